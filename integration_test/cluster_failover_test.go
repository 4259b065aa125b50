package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

const (
	// failoverNodeTimeout is the cluster-node-timeout of the failover
	// cluster: a master is considered failing this long after it stops
	// answering, and its replica takes over about a second later.
	failoverNodeTimeout = time.Second
	// failoverWindow is how soon after the promotion the store must decide
	// for the failed master's keys again, well below go-redis's periodic
	// topology reload (60 s).
	failoverWindow = 10 * time.Second
	// failoverClientTimeout is the ClusterClient's dial, read and write
	// timeout: small, so that calls to the dead master fail fast.
	failoverClientTimeout = 200 * time.Millisecond
	// failoverStoreTimeout is the store's Timeout.
	failoverStoreTimeout = 500 * time.Millisecond
	// failoverTakes is how many requests are admitted before the kill.
	failoverTakes = 5
	// goRedisReload is go-redis's default ClusterStateReloadInterval.
	goRedisReload = 60 * time.Second
)

// TestRedisClusterFailover kills the master that owns a client key's slot
// in a cluster of three masters with one replica each
// (cluster-node-timeout 1 s) and measures how long after the replica's
// promotion the Redis store decides for that key again. The ClusterClient
// keeps go-redis's default 60 s periodic topology reload and has 200 ms
// dial and read timeouts; the store's Timeout is 500 ms. Requests keep
// arriving every 20 ms during the outage, as under real traffic.
//
//   - store-reload: with the default Options.ClusterReload (1 s) the store
//     triggers topology reloads while calls fail, and a take succeeds
//     within 10 s of the promotion. The state written before the failover
//     (replicated before the kill) is on the new master: the first take
//     after it reports the remaining count continuing from before, and
//     every key still has a TTL.
//   - reload-disabled: with ClusterReload -1 the same failover leaves every
//     take failing for 10 s after the promotion (go-redis keeps sending the
//     slot's commands to the dead address: a refused connection is no MOVED
//     reply, and the periodic reload is a minute away), which shows that
//     store-reload measures the store's reload. One explicit ReloadState
//     then restores service with the state intact.
func TestRedisClusterFailover(t *testing.T) {
	t.Run("store-reload", func(t *testing.T) {
		f := setupFailover(t, 0)
		f.kill(t)
		p := f.probe(t, failoverWindow)
		if p.recovered.IsZero() || p.recovered.Sub(p.promoted) > failoverWindow {
			t.Fatalf("no take succeeded within %s of the promotion (%d failed takes: %v), want recovery within %s", failoverWindow, p.failed, p.kinds, failoverWindow)
		}
		t.Logf("recovered %s after the promotion (%s after the kill; promotion %s after the kill); %d takes failed meanwhile: %v, %d of them timed out after the promotion",
			p.recovered.Sub(p.promoted).Round(time.Millisecond), p.recovered.Sub(f.killed).Round(time.Millisecond),
			p.promoted.Sub(f.killed).Round(time.Millisecond), p.failed, p.kinds, p.ambiguous)
		f.checkState(t, p)
	})

	t.Run("reload-disabled", func(t *testing.T) {
		f := setupFailover(t, -1)
		f.kill(t)
		p := f.probe(t, failoverWindow)
		switch {
		case p.recovered.IsZero():
		case p.recovered.Sub(f.loaded) >= goRedisReload:
			t.Fatalf("with ClusterReload disabled a take succeeded %s after the client loaded the topology, late enough for go-redis's periodic reload (%s): the test ran too slowly to tell anything",
				p.recovered.Sub(f.loaded).Round(time.Millisecond), goRedisReload)
		default:
			t.Fatalf("with ClusterReload disabled a take succeeded %s after the promotion, want none within %s: go-redis found the new master by itself, so store-reload does not show the store's reload at work",
				p.recovered.Sub(p.promoted).Round(time.Millisecond), failoverWindow)
		}
		t.Logf("no recovery within %s of the promotion (promotion %s after the kill); %d takes failed: %v",
			failoverWindow, p.promoted.Sub(f.killed).Round(time.Millisecond), p.failed, p.kinds)

		f.cc.ReloadState(context.Background())
		start := time.Now()
		q := f.probe(t, 5*time.Second)
		if q.recovered.IsZero() {
			t.Fatalf("no take succeeded within 5 s of an explicit ReloadState (%d failed: %v), want recovery", q.failed, q.kinds)
		}
		t.Logf("recovered %s after an explicit ReloadState", q.recovered.Sub(start).Round(time.Millisecond))
		q.ambiguous += p.ambiguous
		f.checkState(t, q)
	})
}

// failover is one failover scenario: a cluster, a client and a store, a
// client key and the master (with its replica) that owns the key's slot.
type failover struct {
	cluster *testCluster
	cc      *redis.ClusterClient
	loaded  time.Time // when cc had loaded its topology, at the latest
	s       redisStore
	prefix  string
	req     store.Request
	master  *clusterProc
	replica *clusterProc
	killed  time.Time
}

// setupFailover starts the cluster, a ClusterClient with short timeouts
// and a store with ClusterReload reload, admits failoverTakes requests for
// a client key and waits until the owning master's replica has received
// all of them.
func setupFailover(t *testing.T, reload time.Duration) *failover {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc := startCluster(t, clusterSpec{masters: 3, replicas: 1, nodeTimeout: failoverNodeTimeout})
	f := &failover{cluster: tc, prefix: randomPrefix(t)}
	f.cc = tc.clientWith(t, redis.ClusterOptions{
		DialTimeout:  failoverClientTimeout,
		ReadTimeout:  failoverClientTimeout,
		WriteTimeout: failoverClientTimeout,
	})
	f.loaded = time.Now()
	f.s = newStoreWith(t, f.cc, redisstore.Options{Prefix: f.prefix, Timeout: failoverStoreTimeout, ClusterReload: reload})
	// A token bucket refilling one token per 864 s: Remaining counts the
	// admitted requests exactly for as long as the test runs.
	lim := store.Limit{Algorithm: store.TokenBucket, Rate: 100, Period: 24 * time.Hour}
	f.req = store.Request{Key: "failover-client", Limits: []store.Limit{lim}}

	keys, err := f.s.StateKeys(f.req)
	if err != nil {
		t.Fatalf("StateKeys: %v", err)
	}
	slot, err := f.cc.ClusterKeySlot(ctx, keys[0]).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %q: %v", keys[0], err)
	}
	if tagSlot, err := f.cc.ClusterKeySlot(ctx, hashTag(t, f.s, f.req.Key)).Result(); err != nil || tagSlot != slot {
		t.Fatalf("slot of the encoded client key: got %d, %v, want %d (the state key's slot)", tagSlot, err, slot)
	}
	f.master, f.replica = tc.slotOwner(ctx, t, int(slot))
	t.Logf("client key %q: slot %d, master %s, replica %s", f.req.Key, slot, f.master.addr, f.replica.addr)

	for i := range failoverTakes {
		d, err := f.s.Take(ctx, f.req)
		if err != nil || !d.Allowed || d.Remaining != lim.Rate-int64(i)-1 {
			t.Fatalf("take %d before the failover: got %+v, %v, want admitted with %d remaining", i, d, err, lim.Rate-int64(i)-1)
		}
	}
	if err := waitReplicated(ctx, f.master, f.replica); err != nil {
		t.Fatalf("replication before the failover: %v", err)
	}
	return f
}

// slotOwner returns the master serving slot, as CLUSTER SLOTS reports it,
// and that master's replica.
func (tc *testCluster) slotOwner(ctx context.Context, t *testing.T, slot int) (master, replica *clusterProc) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: tc.addrs[0], MaxRetries: -1})
	defer c.Close()
	//lint:ignore SA1019 CLUSTER SLOTS still answers on Redis 7 and gives the slot ranges directly.
	ranges, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	for _, r := range ranges {
		if slot < r.Start || slot > r.End {
			continue
		}
		// Redis 7.0 lists a replica only once its replication offset is
		// not zero, that is after the first write; startCluster has
		// checked the replicas' roles.
		for i, m := range tc.nodes {
			if m.addr != r.Nodes[0].Addr {
				continue
			}
			rep := tc.replicas[i][0]
			if len(r.Nodes) > 1 && r.Nodes[1].Addr != rep.addr {
				t.Fatalf("slot %d: got replica %s, want %s, the replica of %s", slot, r.Nodes[1].Addr, rep.addr, m.addr)
			}
			return m, rep
		}
		t.Fatalf("slot %d: master %s is none of %v", slot, r.Nodes[0].Addr, tc.addrs)
	}
	t.Fatalf("slot %d: not in CLUSTER SLOTS %v", slot, ranges)
	return nil, nil
}

// waitReplicated waits until replica has processed the master's whole
// replication stream as it stands now.
func waitReplicated(ctx context.Context, master, replica *clusterProc) error {
	mc := redis.NewClient(&redis.Options{Addr: master.addr, MaxRetries: -1})
	defer mc.Close()
	rc := redis.NewClient(&redis.Options{Addr: replica.addr, MaxRetries: -1})
	defer rc.Close()
	info, err := mc.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("%s: INFO replication: %w", master.addr, err)
	}
	want, err := strconv.ParseInt(parseClusterInfo(info)["master_repl_offset"], 10, 64)
	if err != nil {
		return fmt.Errorf("%s: master_repl_offset: %w", master.addr, err)
	}
	return poll(ctx, func() string {
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Sprintf("%s: INFO replication: %v", replica.addr, err)
		}
		got, err := strconv.ParseInt(parseClusterInfo(info)["slave_repl_offset"], 10, 64)
		if err != nil || got < want {
			return fmt.Sprintf("%s: got slave_repl_offset %d (%v), want at least %d", replica.addr, got, err, want)
		}
		return ""
	})
}

// kill sends SIGKILL to the owning master, through the handle of the
// process the test started, and waits until it has exited.
func (f *failover) kill(t *testing.T) {
	t.Helper()
	if err := f.master.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill master %s (pid %d): %v", f.master.addr, f.master.cmd.Process.Pid, err)
	}
	f.killed = time.Now()
	select {
	case <-f.master.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("master %s (pid %d) still running 10 s after SIGKILL", f.master.addr, f.master.cmd.Process.Pid)
	}
}

// probeResult is what probe saw.
type probeResult struct {
	promoted  time.Time // when the replica first reported itself master
	recovered time.Time // when a take first succeeded; zero if none did
	decision  store.Decision
	failed    int // takes that failed
	// ambiguous counts the takes that timed out late enough to have
	// reached the new master, and so may have been recorded there.
	ambiguous int
	kinds     map[string]int
	timedOut  []time.Time // when each take that timed out returned
}

// probe takes for the client key every 20 ms until a take succeeds or
// window has passed since the replica's promotion, which must come within
// 20 s of the kill. Meanwhile it polls the replica's CLUSTER NODES for the
// promotion; if the replica is already master, the window starts now.
func (f *failover) probe(t *testing.T, window time.Duration) probeResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	promoted := make(chan time.Time, 1)
	go watchPromotion(ctx, f.replica, promoted)

	r := probeResult{kinds: map[string]int{}}
	promotionDeadline := time.Now().Add(20 * time.Second)
	for {
		tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := f.s.Take(tctx, f.req)
		tcancel()
		now := time.Now()
		if r.promoted.IsZero() {
			select {
			case r.promoted = <-promoted:
			default:
			}
		}
		if err == nil {
			r.recovered, r.decision = now, d
			break
		}
		r.failed++
		k := store.KindOf(err)
		r.kinds[k]++
		if k == "timeout" {
			r.timedOut = append(r.timedOut, now)
		}
		if r.promoted.IsZero() && now.After(promotionDeadline) {
			t.Fatalf("replica %s not promoted within 20 s of the kill (last take error: %v)\n%s", f.replica.addr, err, f.cluster.logs())
		}
		if !r.promoted.IsZero() && now.Sub(r.promoted) >= window {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.promoted.IsZero() {
		// A take succeeded, so the replica serves the slot; the watcher,
		// polling every 10 ms, has yet to see it.
		select {
		case r.promoted = <-promoted:
		case <-time.After(5 * time.Second):
			t.Fatalf("a take succeeded %s after the kill, but replica %s did not report itself master", r.recovered.Sub(f.killed), f.replica.addr)
		}
	}
	// Before the promotion no live node served the slot, so a take that
	// timed out then was not recorded anywhere (go-redis sends nothing
	// once the deadline has passed). The watcher may see the promotion a
	// poll or two late; promotionLag covers that.
	const promotionLag = 100 * time.Millisecond
	for _, at := range r.timedOut {
		if at.After(r.promoted.Add(-promotionLag)) {
			r.ambiguous++
		}
	}
	return r
}

// watchPromotion polls the replica's CLUSTER NODES every 10 ms and sends
// the time at which it first shows the replica as a master on promoted,
// then returns; it also returns when ctx ends.
func watchPromotion(ctx context.Context, replica *clusterProc, promoted chan<- time.Time) {
	c := redis.NewClient(&redis.Options{Addr: replica.addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	for {
		text, err := c.ClusterNodes(ctx).Result()
		if err == nil {
			for _, n := range parseClusterNodes(text) {
				if n.flags["myself"] && n.flags["master"] {
					promoted <- time.Now()
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkState checks the first successful take after the failover and the
// keys on the new masters: the take was admitted with the remaining count
// continuing from before the failover (all of it had been replicated;
// lower only by takes that timed out after the promotion and so may have
// run on the new master), the state key is there and every key has a TTL.
func (f *failover) checkState(t *testing.T, p probeResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := p.decision
	want := f.req.Limits[0].Rate - failoverTakes - 1
	if !d.Allowed || d.Remaining > want || d.Remaining < want-int64(p.ambiguous) {
		t.Errorf("first take after the failover: got %+v, want admitted with %d remaining (as low as %d if the %d takes that timed out after the promotion ran)", d, want, want-int64(p.ambiguous), p.ambiguous)
	}
	// ForEachMaster must see the new master, not the dead one.
	f.cc.ReloadState(ctx)
	var byMaster map[string]map[string]time.Duration
	err := poll(ctx, func() string {
		var err error
		byMaster, err = clusterKeys(ctx, f.cc, f.prefix)
		if err != nil {
			return err.Error()
		}
		return ""
	})
	if err != nil {
		t.Fatalf("keys after the failover: %v", err)
	}
	stateKeys, err := f.s.StateKeys(f.req)
	if err != nil {
		t.Fatalf("StateKeys: %v", err)
	}
	found := false
	for master, keys := range byMaster {
		if master == f.master.addr {
			t.Errorf("keys listed on the killed master %s: %v", master, keys)
		}
		if master != f.replica.addr {
			t.Errorf("keys of the client key on %s, want them all on the promoted replica %s: %v", master, f.replica.addr, keys)
		}
		for k, ttl := range keys {
			if ttl <= 0 {
				t.Errorf("key %q on %s: got TTL %s, want a positive TTL", k, master, ttl)
			}
			if k == stateKeys[0] {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("state key %q not found after the failover; keys by master: %v", stateKeys[0], byMaster)
	}
	var names []string
	for _, keys := range byMaster {
		for k := range keys {
			names = append(names, strings.TrimPrefix(k, f.prefix))
		}
	}
	t.Logf("first take after the failover: %d remaining; keys: %v", d.Remaining, names)
}
