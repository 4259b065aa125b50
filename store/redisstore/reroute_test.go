package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// scriptedClient answers each command it processes with the next of its
// replies (an error reply or a value) and counts the commands. Any other
// method of the client panics.
type scriptedClient struct {
	redis.UniversalClient
	replies []any
	calls   int
}

func (c *scriptedClient) Process(_ context.Context, cmd redis.Cmder) error {
	c.calls++
	if len(c.replies) == 0 {
		return errors.New("scriptedClient: no reply left")
	}
	r := c.replies[0]
	c.replies = c.replies[1:]
	if e, ok := r.(error); ok {
		cmd.SetErr(e)
		return e
	}
	cmd.(noRetry).SetVal(r)
	return nil
}

func (c *scriptedClient) Pipeline() redis.Pipeliner { panic("scriptedClient: no pipelines") }

// TestRerouteNodeState: a call a node refused for its own state
// (CLUSTERDOWN, LOADING, BUSY) is sent again to that node, never through
// the cluster client, which may first fetch its command table from a dead
// master; a call refused with MOVED goes through the cluster client, and
// so does every retry after it. A budget that runs out after the node
// answered CLUSTERDOWN is reported as kind clusterdown, which the
// middleware's breakers do not count.
func TestRerouteNodeState(t *testing.T) {
	down := itemError("CLUSTERDOWN The cluster is down")
	tests := []struct {
		name                string
		first               error
		node, cluster       []any
		wantNode, wantClust int
		wantKind            string // of a budget that ran out meanwhile
	}{
		{"clusterdown", down, []any{down, int64(7)}, nil, 2, 0, "clusterdown"},
		{"loading", itemError("LOADING Redis is loading the dataset in memory"), []any{int64(7)}, nil, 1, 0, "timeout"},
		{"busy", itemError("BUSY Redis is busy running a script"), []any{int64(7)}, nil, 1, 0, "busy"},
		{"moved", itemError("MOVED 12182 127.0.0.1:7001"), nil, []any{int64(7)}, 0, 1, "timeout"},
		{"moved, then clusterdown", itemError("MOVED 12182 127.0.0.1:7001"), nil, []any{down, int64(7)}, 0, 2, "clusterdown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &scriptedClient{replies: tt.node}
			cluster := &scriptedClient{replies: tt.cluster}
			p := &pipes{client: cluster}
			b := p.newBatcher(node)
			start := time.Now()
			c := &call{ctx: context.Background(), args: []any{"get", "k"}, deadline: start.Add(time.Second)}
			v, err := b.reroute(context.Background(), c, tt.first)
			if err != nil || v != int64(7) {
				t.Fatalf("reroute: got %v, %v; want 7, nil", v, err)
			}
			if node.calls != tt.wantNode || cluster.calls != tt.wantClust {
				t.Errorf("sent %d to the node and %d through the cluster client; want %d and %d",
					node.calls, cluster.calls, tt.wantNode, tt.wantClust)
			}
			if k := classify(p.budgetError(b, start)); k != tt.wantKind {
				t.Errorf("a budget that ran out meanwhile: kind %q, want %q", k, tt.wantKind)
			}
			if k := classify(p.budgetError(b, time.Now().Add(time.Millisecond))); k != "timeout" {
				t.Errorf("a budget started after the node's last refusal: kind %q, want timeout", k)
			}
		})
	}
}

// TestRerouteNotPastTheDeadline: a call refused unrun after its deadline
// (the refusal came late) is not sent again: a call whose deadline passes
// before it is sent is not sent, whose caller has given up on it.
func TestRerouteNotPastTheDeadline(t *testing.T) {
	node := &scriptedClient{replies: []any{int64(7)}}
	cluster := &scriptedClient{replies: []any{int64(7)}}
	p := &pipes{client: cluster}
	b := p.newBatcher(node)
	busy := itemError("BUSY Redis is busy running a script")
	c := &call{ctx: context.Background(), args: []any{"get", "k"}, deadline: time.Now().Add(-time.Millisecond)}
	if v, err := b.reroute(context.Background(), c, busy); err == nil || v != nil {
		t.Fatalf("reroute past the deadline: got %v, %v; want the refusal", v, err)
	}
	if node.calls != 0 || cluster.calls != 0 {
		t.Errorf("sent %d to the node and %d through the cluster client past the deadline; want none", node.calls, cluster.calls)
	}
}

// TestReplyBeforeTheLateWake: a caller that gets a core back only after
// both its reply and its budget's end (a burst of callers on a busy
// process) returns the decision Redis made, not a timeout: failing would
// report a request Redis counted as undecided (and fail it open or
// closed). Before, the two ready cases were a coin toss.
func TestReplyBeforeTheLateWake(t *testing.T) {
	srv := requireServer(t)
	c := newClient(t, srv, &redis.Options{}) // queued calls: no direct path
	// Long enough that a loaded machine (tests in parallel, the race
	// detector) still sends the call within it: only the caller's wait
	// should outlast it.
	const budget = 100 * time.Millisecond
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: budget})
	if err != nil {
		t.Fatal(err)
	}
	beforeWait = func(c *call) {
		<-c.done // the reply is in
		c.done <- struct{}{}
		time.Sleep(budget + 5*time.Millisecond) // and the budget is over
	}
	t.Cleanup(func() { beforeWait = nil })
	req := store.Request{Key: "late-wake", Limits: []store.Limit{{Rate: 1000, Period: time.Hour}}}
	// Before, each take was a coin toss: 12 catch that but for 1 in 4096.
	for i := range 12 {
		d, err := s.Take(context.Background(), req)
		if err != nil || !d.Allowed || d.Remaining != int64(999-i) {
			t.Fatalf("take %d: got %+v, %v; want admitted, %d remaining", i, d, err, 999-i)
		}
	}
}
