package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// baseFlushers and maxFlushers bound how many pipelines one node may have
// in flight: baseFlushers while round trips are quick, maxFlushers after
// one took longer than a fifth of the store's Timeout (pipes.slowTrip),
// until a round trip ends slowFor after the last such one. Redis runs
// commands one at a time, so on a nearby server a few pipelines keep it
// busy, and more would only split batches and start goroutines. But a
// call that finds them all in flight waits for one to come back before
// its own round trip starts, so on a slow or distant server the round
// trips set how many are needed: with 40 ms replies, 4 of them made calls
// wait up to 40 ms and miss a 50 ms budget (issue 19), where 16 keep the
// wait to a few milliseconds at hundreds of calls per second. The warm-up
// opens maxFlushers connections (see warmConns).
const (
	baseFlushers = 4
	maxFlushers  = 16
	slowFor      = 10 * time.Second
)

// lateReplyWait is how long past the latest budget of its calls a batch
// still waits for its replies, on a client that cuts socket I/O at context
// deadlines (see run).
const lateReplyWait = time.Second

// maxQueued bounds a node's queue: beyond it Redis cannot answer the calls
// within any sensible budget, and a call is refused at once instead of
// waiting to time out.
const maxQueued = 8192

// flusherIdle is how long a flusher that found the queue empty waits for
// a caller to hand it a sending slot before it exits: a lone caller's
// next call then wakes it instead of starting a goroutine, whose small
// stack would grow again through the client's calls.
const flusherIdle = time.Second

var (
	// errBudget reports a call that ran out of its budget before a reply.
	errBudget = fmt.Errorf("redisstore: no reply within the budget: %w", context.DeadlineExceeded)
	// errBusyBudget reports a call that ran out of its budget while the
	// node answered BUSY: it waited for another script, not for a dead
	// server (classified as kind busy).
	errBusyBudget = errors.New("redisstore: no reply within the budget; the server was busy running a script")
	// errDownBudget reports a call that ran out of its budget while the
	// node answered CLUSTERDOWN: it waited for another shard's failover,
	// the node itself is up (classified as kind clusterdown).
	errDownBudget = errors.New("redisstore: no reply within the budget; the cluster was down while another shard failed over")
	// errOverloaded reports a call refused because its node's queue is
	// full.
	errOverloaded = fmt.Errorf("redisstore: too many calls waiting for Redis: %w", context.DeadlineExceeded)
	// errPanic reports a client (or a hook) that panicked.
	errPanic = errors.New("redisstore: client panicked")
)

// noRetry sends a command with go-redis's re-send on failure switched off
// (the Cmder's NoRetry flag): after a broken connection Redis may have run
// a script already, and running it again would count a request twice. The
// client still follows MOVED and ASK, and re-sends what never left.
type noRetry struct{ *redis.Cmd }

// NoRetry implements the go-redis Cmder flag.
func (noRetry) NoRetry() bool { return true }

// call is one command waiting for its reply. It is pooled: the waiting
// caller and the batch that runs it each hold a reference, and the last to
// let go returns it to the pool.
type call struct {
	next *call // the queue's link
	ctx  context.Context
	sc   *script // nil for a command that is not a script call
	args []any
	// argv is the room of a plain request's arguments, key its key and
	// nonce a sliding window log take's nonce, which argv holds as
	// *string (go-redis writes them as the strings): a call made by
	// redisStore.command owns them, so a plain decision builds no
	// argument slice and boxes no string. They are written before the
	// call is queued and read until its batch has been sent and answered,
	// when go-redis is done with them, before the batch lets go of the
	// call.
	argv  [leanArgs]any
	key   string
	nonce string
	own   int // command.own
	// refusal finds a cached refusal that answers the call: one that
	// arrives while the call waits in the queue answers it there, without
	// a round trip.
	refusal  refusalQuery
	deadline time.Time
	done     chan struct{} // receives one value when v and err are set
	timer    *time.Timer
	refs     atomic.Int32
	v        any
	err      error
	// detached is ctx without its deadline and cancellation, for the
	// round trip of a call sent on its own (see run).
	detached detachedContext
}

// detachedContext is its Context's values without its deadline and
// cancellation, as context.WithoutCancel gives, kept in a pooled call so
// that a lone call allocates none. It is valid until the call finishes.
type detachedContext struct{ context.Context }

// Deadline reports no deadline.
func (detachedContext) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done returns nil: a detached context is never canceled.
func (detachedContext) Done() <-chan struct{} { return nil }

// Err returns nil.
func (detachedContext) Err() error { return nil }

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// finish sets the call's outcome, wakes its caller and lets go of the
// batch's reference.
func (c *call) finish(v any, err error) {
	c.v, c.err = v, err
	c.done <- struct{}{}
	c.release()
}

func (c *call) release() {
	if c.refs.Add(-1) != 0 {
		return
	}
	select {
	case <-c.done: // the caller left before the reply came
	default:
	}
	clear(c.argv[:])
	c.ctx, c.sc, c.args, c.own, c.v, c.err, c.key, c.nonce = nil, nil, nil, 0, nil, nil, "", ""
	c.detached.Context = nil
	c.refusal = refusalQuery{}
	callPool.Put(c)
}

// pipes sends commands through per-node batchers.
type pipes struct {
	// dial is what the dial hook newPipes adds to the client sees.
	dial         *dialState
	client       redis.UniversalClient
	cluster      *redis.ClusterClient // set for cluster clients
	maxBatch     int
	ctxDeadlines bool // the client cuts socket I/O at context deadlines
	// direct: a go-redis client known to cut socket I/O at context
	// deadlines, so that a lone call may be sent from its caller's
	// goroutine (see batcher.direct).
	direct bool
	// poolCap caps flusherLimit at the connections the client's pool
	// (per node) has for flushers: its PoolSize, less the one held for
	// lone calls. A flusher beyond them would wait for a connection
	// with its calls taken, where they could have gone out with the next
	// flusher back. go-redis sizes the pool 10 per GOMAXPROCS (5 per
	// node of a cluster), so a process limited to one CPU has 10 (5).
	// Zero: no cap.
	poolCap int32
	// lone: through a plain client, the connection lone calls are sent
	// through from their callers' goroutines (see lone); nil for Cluster
	// and Ring clients.
	lone *loneSender
	// spin bounds how long a lone call through the held connection polls
	// for its reply (Options.LoneSpin); 0: never.
	spin time.Duration
	// merge: one command may name the keys of any calls, as on a single
	// Redis server (not a Cluster, whose keys must share a slot, nor a
	// Ring, which sends a command to its first key's shard), so the lean
	// calls of a batch are decided by one lean batch call, and its lean
	// stacked calls by one stacked batch call (see merge). It
	// is switched off for good when the server answers CROSSSLOT (a
	// cluster-mode server behind a plain client).
	merge atomic.Bool
	one   *batcher
	// warm reloads a node's scripts after it answered NOSCRIPT; nil
	// leaves that to the calls' EVAL alone.
	warm *warmer
	// slowAt is the unix nanos of the last round trip that took longer
	// than slowTrip, 0 once a round trip ended slowFor after it (see
	// flusherLimit).
	slowAt   atomic.Int64
	slowTrip time.Duration

	mu     sync.RWMutex
	nodes  map[*redis.Client]*batcher
	byAddr map[string]*redis.Client // the cluster client's nodes (see migrating)
}

// dialFailure is a failed attempt to open a connection and when it failed.
type dialFailure struct {
	err error
	at  time.Time
}

// dialWatch is a go-redis hook that records failed dials: go-redis retries
// a refused dial for longer than a call's budget, so without it a refused
// connection would read as a timeout. Through a client with a lone sender
// it also wraps every connection opened (see lone); it changes nothing
// else.
type dialWatch struct{ s *dialState }

// dialState is what a dial hook records and needs. It holds nothing of
// the store's: every connection the client opens carries a copy of the
// client's hooks, and a held connection (see lone) outlives the stores, so
// a hook that held the store would keep it and its client from the
// collector.
type dialState struct {
	// err is the last failure to open a connection; nil after a success.
	err atomic.Pointer[dialFailure]
	// wrap wraps each connection's socket for lone calls (see wrapConn).
	wrap bool
}

// dialFailure returns the last failure to open a connection, nil after a
// success (and for pipes without a dial hook).
func (p *pipes) dialFailure() *dialFailure {
	if p.dial == nil {
		return nil
	}
	return p.dial.err.Load()
}

func (h dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			h.s.err.Store(&dialFailure{err: err, at: time.Now()})
			return conn, err
		}
		if h.s.err.Load() != nil {
			h.s.err.Store(nil)
		}
		if h.s.wrap && conn != nil {
			conn, _ = wrapConn(conn)
		}
		return conn, nil
	}
}

func (dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// dialFailureFresh is how long a failed dial, not followed by a successful
// one, explains a call that found no connection: go-redis waits 100 ms
// between dial attempts by default.
const dialFailureFresh = time.Second

// budgetError is the error of a call, started at start, whose budget ran
// out: busy when b's node answered BUSY since start (the call waited for
// a script to end), clusterdown when it answered CLUSTERDOWN since start
// (the call waited for another shard's failover), a connection failure
// when the last dial failed recently and none succeeded since (Redis
// refuses connections or cannot be reached), else a timeout.
func (p *pipes) budgetError(b *batcher, start time.Time) error {
	if b.busyAt.Load() >= start.UnixNano() {
		return errBusyBudget
	}
	if b.downAt.Load() >= start.UnixNano() {
		return errDownBudget
	}
	if f := p.dialFailure(); f != nil && start.Sub(f.at) < dialFailureFresh {
		return fmt.Errorf("redisstore: no reply within the budget; connecting failed: %w", f.err)
	}
	return errBudget
}

// newPipes returns the pipes of a store whose calls have a budget of
// timeout.
func newPipes(client redis.UniversalClient, maxBatch int, timeout time.Duration) *pipes {
	p := &pipes{client: client, maxBatch: maxBatch, ctxDeadlines: true, slowTrip: timeout / 5, dial: new(dialState)}
	switch c := client.(type) {
	case *redis.Client:
		p.lone = loneSenderOf(c)
		p.dial.wrap = true
		c.AddHook(dialWatch{p.dial})
	case *redis.ClusterClient:
		p.byAddr = make(map[string]*redis.Client)
		c.OnNewNode(func(n *redis.Client) {
			n.AddHook(dialWatch{p.dial})
			p.addNode(n)
		})
	}
	p.poolCap = poolCap(client, p.lone != nil)
	switch c := client.(type) {
	case *redis.Client:
		p.ctxDeadlines = c.Options().ContextTimeoutEnabled
		p.direct = p.ctxDeadlines
		p.merge.Store(true)
	case *redis.ClusterClient:
		p.cluster = c
		p.ctxDeadlines = c.Options().ContextTimeoutEnabled
		p.direct = p.ctxDeadlines
		p.nodes = make(map[*redis.Client]*batcher)
	case *redis.Ring:
		p.ctxDeadlines = c.Options().ContextTimeoutEnabled
		p.direct = p.ctxDeadlines
	}
	p.one = p.newBatcher(client)
	return p
}

// flusherLimit returns how many pipelines a node may have in flight now:
// maxFlushers from a slow round trip until a round trip ends slowFor
// after it, else baseFlushers; never more than poolCap. It reads no
// clock: every call asks, and the round trips, which read it anyway, keep
// slowAt (see timed).
func (p *pipes) flusherLimit() int32 {
	limit := int32(baseFlushers)
	if p.slowAt.Load() != 0 {
		limit = maxFlushers
	}
	if p.poolCap > 0 {
		limit = min(limit, p.poolCap)
	}
	return limit
}

// timed notes a round trip that started at start and ended now: a slow
// one raises flusherLimit, and the first to end slowFor after the last
// slow one lowers it again.
func (p *pipes) timed(start time.Time) {
	now := time.Now()
	if now.Sub(start) > p.slowTrip {
		p.slowAt.Store(now.UnixNano())
		return
	}
	// A slow round trip noted meanwhile changed slowAt: it stays.
	if at := p.slowAt.Load(); at != 0 && now.UnixNano()-at >= int64(slowFor) {
		p.slowAt.CompareAndSwap(at, 0)
	}
}

// poolCap returns pipes.poolCap for client, of whose pool one connection
// is held for lone calls when lone is set.
func poolCap(client redis.UniversalClient, lone bool) int32 {
	var size int
	switch c := client.(type) {
	case *redis.Client:
		size = c.Options().PoolSize
	case *redis.ClusterClient:
		size = c.Options().PoolSize
	case *redis.Ring:
		size = c.Options().PoolSize
	}
	if size <= 0 {
		return 0
	}
	if lone {
		size--
	}
	return int32(min(max(size, 1), maxFlushers))
}

// client is what a batcher sends through: a node, or the whole client.
type client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Pipeline() redis.Pipeliner
}

func (p *pipes) newBatcher(c client) *batcher {
	b := &batcher{p: p, client: c, idle: make(chan struct{})}
	b.busyFn = b.busy
	return b
}

// busy reports that calls are queued for b's node or sent by another
// sender than the lone caller's: a lone call's caller then stops polling
// for its reply (see capConn.startSpin).
func (b *batcher) busy() bool {
	return b.head.Load() != nil || b.flushers.Load() > 1
}

// forKey returns the batcher of the node that serves key's slot.
func (p *pipes) forKey(ctx context.Context, key string) *batcher {
	if p.cluster == nil {
		return p.one
	}
	node, err := p.cluster.MasterForKey(ctx, key)
	if err != nil {
		return p.one // the cluster client routes (and reports) it itself
	}
	return p.batcherOf(node)
}

// batcherOf returns node's batcher, made on first use. The batcher of a
// client go-redis replaced by a new one for the same address (it closes
// the clients of nodes that left the cluster, and makes new ones if they
// come back) is dropped then, so the map holds one batcher per address
// however often the topology changes; calls already queued on it finish
// as they would have.
func (p *pipes) batcherOf(node *redis.Client) *batcher {
	p.mu.RLock()
	b := p.nodes[node]
	p.mu.RUnlock()
	if b != nil {
		return b
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if b = p.nodes[node]; b == nil {
		addr := node.Options().Addr
		for old := range p.nodes {
			if old.Options().Addr == addr {
				delete(p.nodes, old)
			}
		}
		b = p.newBatcher(node)
		p.nodes[node] = b
	}
	return b
}

// do queues cmd for its key's node and waits for its reply until
// deadline or until ctx is done, whichever comes first (cmd.start, set,
// is when the budget started). A refusal cached
// while the call waits (cmd.refusal) answers it: the result is then a
// store.Decision instead of a script reply.
func (p *pipes) do(ctx context.Context, cmd *command, deadline time.Time) (any, error) {
	start := cmd.start
	wait := deadline.Sub(start)
	if wait <= 0 {
		cmd.drop()
		return nil, errBudget
	}
	c := cmd.take()
	c.ctx, c.sc, c.args, c.own, c.deadline, c.refusal = ctx, cmd.sc, cmd.args, cmd.own, deadline, cmd.refusal
	b := p.forKey(ctx, cmd.key)
	if (p.direct || p.lone != nil) && b.enter() {
		if v, sent, err := b.lone(c, start); sent {
			b.leave()
			c.refs.Store(1)
			c.release()
			return v, err
		}
		b.leave()
	}
	c.refs.Store(2)
	if c.timer == nil {
		c.timer = time.NewTimer(wait)
	} else {
		c.timer.Reset(wait)
	}
	b.submit(c)
	if beforeWait != nil {
		beforeWait(c)
	}
	var v any
	var err error
	select {
	case <-c.done:
		v, err = c.v, c.err
	case <-c.timer.C:
		select {
		case <-c.done:
			// The reply came while this goroutine waited for a core
			// (a burst of callers on a busy process): it costs no
			// more wait now, and failing instead would report a
			// decision Redis made as none.
			v, err = c.v, c.err
		default:
			err = p.budgetError(b, start)
			// A refusal of the same key that arrived meanwhile (a
			// burst for one identity) still answers within the
			// budget: Redis would refuse this call too, and a
			// refused call writes nothing, whether it ran or not.
			if d, ok := cmd.refusal.cached(time.Now()); ok {
				v, err = d, nil
			}
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.timer.Stop()
	c.release()
	return v, err
}

// beforeWait, set only by tests, runs after a call is queued and before
// its caller waits for the reply: it stands for a caller that waits for a
// core meanwhile.
var beforeWait func(*call)

// batcher coalesces the calls for one node: up to flusherLimit goroutines
// each take everything queued (at most maxBatch calls), send it as one
// pipeline and deliver the replies, until the queue is empty; then they
// wait a while for more (flusherIdle) before they exit. A lone call is
// sent at once.
type batcher struct {
	p      *pipes
	client client
	busyFn func() bool // b.busy, made once

	// Queued calls form a lock-free stack (newest first, linked through
	// call.next): a burst of callers never queues on a mutex.
	head     atomic.Pointer[call]
	queued   atomic.Int32
	flushers atomic.Int32
	busyAt   atomic.Int64 // unix nanos of the node's last BUSY reply
	downAt   atomic.Int64 // unix nanos of the node's last CLUSTERDOWN reply
	// scriptsAt is the unix nanos of the last reload of the scripts
	// after the node answered NOSCRIPT (see warmer.reload).
	scriptsAt atomic.Int64
	// idle hands a sending slot to a flusher waiting for work (see
	// startFlusher); unbuffered, so a slot is handed only to a flusher
	// that takes it.
	idle chan struct{}
	// budget is the context of a lone call sent directly, reused from
	// one call to the next (see direct); nil until the first.
	budget *budgetContext
}

func (b *batcher) submit(c *call) {
	if b.queued.Add(1) > maxQueued {
		b.queued.Add(-1)
		c.finish(nil, errOverloaded)
		return
	}
	for {
		old := b.head.Load()
		c.next = old
		if b.head.CompareAndSwap(old, c) {
			break
		}
	}
	// Without batching every call is sent on its own, at once.
	limit := b.p.flusherLimit()
	for b.p.maxBatch == 1 || b.flushers.Load() < limit {
		n := b.flushers.Load()
		if b.flushers.CompareAndSwap(n, n+1) {
			b.startFlusher()
			return
		}
	}
}

// enter takes a node with nothing queued or in flight for a lone call: it
// holds the node's only sending slot, so calls that arrive meanwhile are
// queued and start flushers of their own (see leave).
func (b *batcher) enter() bool {
	return b.head.Load() == nil && b.flushers.CompareAndSwap(0, 1)
}

// leave gives back the slot enter took, and starts a flusher if a call
// was queued meanwhile (see giveBack).
func (b *batcher) leave() {
	if b.giveBack() {
		b.startFlusher()
	}
}

// startFlusher puts the sending slot its caller took to work: it hands it
// to a flusher waiting for work, or starts one.
func (b *batcher) startFlusher() {
	select {
	case b.idle <- struct{}{}:
	default:
		go b.flush()
	}
}

// giveBack gives back a sending slot and reports whether the caller took
// it again because a call is queued: a caller that saw every slot busy
// queues, then counts senders; a sender gives back its slot, then looks
// at the queue, so one of them sees the other and no call is stranded.
// A sender that takes its slot back keeps it even above the current
// limit (which falls from 16 to 4 when round trips are quick again):
// the count never rises above what it was, and a sender that let go
// because others were above the limit could leave a call queued with
// every one of them gone.
func (b *batcher) giveBack() bool {
	b.flushers.Add(-1)
	if b.head.Load() == nil {
		return false
	}
	b.flushers.Add(1)
	return true
}

// lone sends c, a lone call, from its caller's goroutine (see direct) and
// reports whether it did: through the connection held for lone calls
// (see lone), or, while none is held, through a client that cuts socket
// I/O at context deadlines. It sends nothing when neither can.
func (b *batcher) lone(c *call, start time.Time) (v any, sent bool, err error) {
	p := b.p
	var lc *loneConn
	if p.lone != nil {
		lc = p.lone.take()
	}
	switch {
	case lc != nil:
		v, err = b.held(c, start, lc)
	case p.direct:
		v, err = b.direct(c, start, b.client, p.client, nil)
	default:
		return nil, false, nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = p.budgetError(b, start) // as for a queued call
	}
	return v, true, err
}

// held sends c through lc, the held connection, which it lets go of when
// the call fails other than by a reply of the server's. The call's reply
// is polled for (see poll) while polls catch their replies (see spinFor),
// and go-redis's peeks for push notifications look at nothing while alive
// found nothing to read (see quietRaw).
func (b *batcher) held(c *call, start time.Time, lc *loneConn) (v any, err error) {
	ls := b.p.lone
	defer ls.release()
	spin := ls.spinFor(b.p.spin)
	lc.sock.startSpin(spin, b.busyFn)
	// Any reroute stays on the connection, whose deadlines are capped.
	v, err = b.direct(c, start, lc.conn, lc.conn, lc.sock)
	lc.sock.quiet.Store(false) // quiet during its call only
	caught := lc.sock.stopSpin()
	if err != nil && (!serverReply(err) || notRun(err)) || lc.sock.closed.Load() {
		ls.drop(lc)
	} else if spin > 0 {
		ls.spun(caught)
	}
	// Only a failure is classified: classify's targets escape, so a call
	// that succeeded would pay its allocations for nothing.
	if err != nil && classify(err) == "timeout" {
		err = context.DeadlineExceeded // the capped socket's
	}
	return v, err
}

// direct sends the lone call c from its caller's goroutine through node
// (all is the client of any reroute, see reroute): a client that cuts
// socket I/O and the wait for a pooled connection at the context's
// deadline, or the held connection of sock, whose socket deadlines are
// capped at the call's, so the call cannot outlast its budget. No
// goroutine is started and none is woken to hand the reply back, which
// is most of a lone call's cost beyond the round trip. A panic in the
// client fails the call, as in run.
func (b *batcher) direct(c *call, start time.Time, node, all client, sock *capConn) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	if sock != nil {
		// go-redis sets no deadline when its timeouts are negative.
		sock.limit.Store(c.deadline.UnixNano())
		_ = sock.Conn.SetDeadline(c.deadline)
		defer sock.limit.Store(0)
	}
	if c.ctx.Done() != nil {
		ctx, cancel := context.WithDeadline(c.ctx, c.deadline)
		defer cancel()
		defer b.p.timed(start)
		return b.oneVia(ctx, c, node, all)
	}
	// A caller's context that is never canceled (context.Background, a
	// detached one) needs only the deadline: the batcher's own context
	// carries it, with a timer reused from call to call.
	bc := b.startBudget(c.ctx, c.deadline)
	defer b.stopBudget(bc)
	defer b.p.timed(start)
	return b.oneVia(bc, c, node, all)
}

// budgetContext is parent's values with a deadline, for a lone call sent
// directly: its Done channel is closed by a timer at the deadline, as
// context.WithDeadline's would be for a parent that is never canceled,
// but the timer and the context are reused from one call to the next
// instead of made per call. A batcher's direct calls take turns (see
// enter), so one serves them all until its timer fires; then it is
// dropped and the next call makes another.
type budgetContext struct {
	context.Context // the caller's; its Done channel is nil
	deadline        time.Time
	done            chan struct{}
	timer           *time.Timer
	expired         atomic.Bool
}

// Deadline returns the call's deadline, or the parent's if earlier.
func (bc *budgetContext) Deadline() (time.Time, bool) {
	if d, ok := bc.Context.Deadline(); ok && d.Before(bc.deadline) {
		return d, true
	}
	return bc.deadline, true
}

// Done returns the channel closed at the deadline.
func (bc *budgetContext) Done() <-chan struct{} { return bc.done }

// Err returns context.DeadlineExceeded once the deadline has passed.
func (bc *budgetContext) Err() error {
	if bc.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// expire ends bc at its deadline (the timer's function).
func (bc *budgetContext) expire() {
	bc.expired.Store(true)
	close(bc.done)
}

// startBudget returns b's budget context for a call of parent until
// deadline, made on first use or after the last one expired.
func (b *batcher) startBudget(parent context.Context, deadline time.Time) *budgetContext {
	bc := b.budget
	if bc == nil {
		bc = &budgetContext{done: make(chan struct{})}
		bc.timer = time.AfterFunc(time.Until(deadline), bc.expire)
		b.budget = bc
	} else {
		bc.timer.Reset(time.Until(deadline))
	}
	bc.Context, bc.deadline = parent, deadline
	return bc
}

// stopBudget ends the call bc served: bc is kept for the next one unless
// its timer fired (or is firing), which closes its Done channel for good.
func (b *batcher) stopBudget(bc *budgetContext) {
	if !bc.timer.Stop() {
		b.budget = nil
		return
	}
	bc.Context = nil
}

// flush sends batches until the queue is empty, then waits for more
// (see await).
func (b *batcher) flush() {
	// On the flusher's stack: a lone call or a small batch allocates
	// nothing here; a longer queue grows it on the heap.
	var room [16]*call
	buf := room[:0]
	var idle *time.Timer
	for {
		// Let goroutines that are about to queue a call do so first: a
		// burst then travels in full batches instead of a trickle of
		// small ones, and its first refusal, which answers every queued
		// call for the same key (see run), comes back sooner. With
		// nothing else to run this returns at once.
		runtime.Gosched()
		list := b.head.Swap(nil)
		if list == nil {
			// A call queued after the swap whose caller saw every
			// flusher busy would be stranded: giveBack looks once more.
			if !b.giveBack() && !b.await(&idle) {
				return
			}
			continue
		}
		// Oldest first, in batches of at most maxBatch.
		// buf keeps its whole capacity from one round to the next (a
		// batch is a window over it).
		buf = buf[:0]
		for c := list; c != nil; {
			next := c.next
			c.next = nil
			buf = append(buf, c)
			c = next
		}
		b.queued.Add(-int32(len(buf)))
		slices.Reverse(buf)
		for batch := buf; len(batch) > 0; {
			n := min(len(batch), b.p.maxBatch)
			b.run(batch[:n])
			batch = batch[n:]
		}
	}
}

// await waits, holding no sending slot, until a caller hands one over
// (true) or flusherIdle passes (false). *t is the flusher's timer, made on
// first use.
func (b *batcher) await(t **time.Timer) bool {
	if *t == nil {
		*t = time.NewTimer(flusherIdle)
	} else {
		(*t).Reset(flusherIdle)
	}
	select {
	case <-b.idle:
		(*t).Stop()
		return true
	case <-(*t).C:
		return false
	}
}

// run sends one batch and delivers every reply. Calls whose deadline has
// passed are not sent. A panic in the client fails the batch's calls
// instead of the process.
func (b *batcher) run(batch []*call) {
	live, latest := sendable(batch, time.Now())
	if len(live) == 0 {
		return
	}
	delivered := 0
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("%w: %v", errPanic, r)
			for _, c := range live[delivered:] {
				c.finish(nil, err)
			}
		}
	}()
	ctx := context.Background()
	switch {
	case len(live) == 1 && !b.p.ctxDeadlines:
		// Hooks see the caller's context values; the caller's deadline
		// and cancellation end its wait (see do), not the round trip.
		// The call's own detached context serves until it finishes.
		live[0].detached.Context = live[0].ctx
		ctx = &live[0].detached
	case len(live) == 1:
		// The deadline below is canceled after the call finished (and
		// its memory may serve another): its parent must outlive it.
		ctx = context.WithoutCancel(live[0].ctx)
	}
	if b.p.ctxDeadlines {
		// A reply that comes after the budget is still read: go-redis
		// closes a connection whose read it cut, and its replacement
		// pays a handshake of two round trips, which on a slow server
		// makes the next calls late in turn.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest.Add(lateReplyWait))
		defer cancel()
	}
	defer b.p.timed(time.Now())
	if len(live) == 1 {
		c := live[0]
		v, err := b.one(ctx, c)
		delivered = 1
		c.finish(v, err)
		return
	}
	sends := b.pipeline(ctx, live)
	for _, sd := range sends {
		if len(sd.calls) == 1 {
			c := sd.calls[0]
			v, err := sd.cmd.Val(), sd.cmd.Err()
			if err != nil && notRun(err) {
				v, err = b.reroute(ctx, c, err)
			}
			delivered++
			c.finish(v, err)
			continue
		}
		err := sd.cmd.Err()
		perCall := sd.sc.perCall
		var flat []any
		if err == nil {
			var ok bool
			if flat, ok = sd.cmd.Val().([]any); !ok || !perCall && !wellFormedBatch(flat, len(sd.calls)) || perCall && !wellFormedPerCall(flat, len(sd.calls)) {
				err = fmt.Errorf("%w: a batch of %d calls answered %T %v", errBadReply, len(sd.calls), sd.cmd.Val(), sd.cmd.Val())
			}
		}
		if isCrossSlot(err) {
			// A cluster-mode server behind a plain client: it ran
			// nothing, and a command there names keys of one slot.
			b.p.merge.Store(false)
		}
		// items holds the calls' lean replies, slices of flat: a call's
		// reply is a pointer into it, which an interface holds without
		// an allocation per call (see batchItem).
		var items [][]any
		if err == nil && !perCall {
			items = make([][]any, len(sd.calls))
		}
		at := 0
		for i, c := range sd.calls {
			var v any
			e := err
			switch {
			case e != nil && notRun(e):
				// Redis refused the whole command before it ran:
				// nothing was decided, so each call goes on alone.
				v, e = b.reroute(ctx, c, e)
			case e == nil:
				if perCall {
					v = flat[i]
				} else {
					v, at = batchItem(flat, at, &items[i])
				}
				if msg, ok := v.(string); ok {
					v, e = nil, itemError(msg)
					if notRun(e) {
						// Refused before the call's first write (a
						// replica's READONLY): it goes on alone, as it
						// would have.
						v, e = b.reroute(ctx, c, e)
					}
				}
			}
			delivered++
			c.finish(v, e)
		}
	}
}

// sendable finishes the calls of batch that need no round trip at now
// (their deadline has passed, or a cached refusal answers them) and
// returns the others, in place, with their latest deadline.
func sendable(batch []*call, now time.Time) (live []*call, latest time.Time) {
	live = batch[:0]
	for _, c := range batch {
		if !now.Before(c.deadline) {
			c.finish(nil, errBudget)
			continue
		}
		if d, ok := c.refusal.cached(now); ok {
			c.finish(d, nil)
			continue
		}
		live = append(live, c)
		if c.deadline.After(latest) {
			latest = c.deadline
		}
	}
	return live, latest
}

// send is one command of a pipeline and the calls it answers: one call,
// or the calls of a lean or stacked batch (see merge).
type send struct {
	cmd   *redis.Cmd
	sc    *script // sent again with its source on NOSCRIPT; nil for no script
	args  []any
	calls []*call
}

// pipeline sends the calls live as one pipeline and returns its commands,
// each with the calls it answers, in live's order, which merge may have
// changed. Scripts the server does not know (after a restart or SCRIPT
// FLUSH) did not run: they are sent again with their source, in a second
// pipeline.
func (b *batcher) pipeline(ctx context.Context, live []*call) []send {
	sends := b.merge(live)
	pipe := b.client.Pipeline()
	for i := range sends {
		sends[i].cmd = redis.NewCmd(ctx, sends[i].args...)
		_ = pipe.Process(ctx, noRetry{sends[i].cmd})
	}
	_, _ = pipe.Exec(ctx)
	var again redis.Pipeliner
	for i := range sends {
		sd := &sends[i]
		if sd.sc != nil && isNoScript(sd.cmd.Err()) {
			if again == nil {
				again = b.client.Pipeline()
				b.scriptsLost()
			}
			sd.args[0], sd.args[1] = "eval", sd.sc.src
			sd.cmd = redis.NewCmd(ctx, sd.args...)
			_ = again.Process(ctx, noRetry{sd.cmd})
		}
	}
	if again != nil {
		_, _ = again.Exec(ctx)
	}
	return sends
}

// merge returns the commands that decide the calls live: one batch call
// for the calls of one lean or lean stacked script with as many
// arguments, where there are several and the pipes may merge them
// (pipes.merge); one command per call for the rest. It orders live as the
// commands answer it, keeping the order of first arrival. A batch answers
// its calls with the decisions they would have had alone, in order, at
// one clock reading (a lean batch's admissions in a compact form, a
// stacked batch's replies as they are): it saves Redis a command's
// parsing, lookup and reply per call, and the client a command per call.
func (b *batcher) merge(live []*call) []send {
	// A group's calls have one script and as many keys, arguments and
	// arguments of their own.
	type group struct {
		sc    *script
		keys  any
		nargs int
		own   int
		calls []*call
	}
	var groups []group
	var singles []*call
	if b.p.merge.Load() {
	next:
		for j, c := range live {
			if c.sc == nil || c.sc.batch == nil {
				singles = append(singles, c)
				continue
			}
			for i := range groups {
				if g := &groups[i]; g.sc == c.sc && g.nargs == len(c.args) && g.keys == c.args[2] && g.own == c.own {
					g.calls = append(g.calls, c)
					continue next
				}
			}
			// The first group has room for every call after it: most
			// batches are of one limit, whose calls then fill it
			// without growing it.
			calls := []*call{c}
			if groups == nil {
				calls = append(make([]*call, 0, len(live)-j), c)
			}
			groups = append(groups, group{sc: c.sc, keys: c.args[2], nargs: len(c.args), own: c.own, calls: calls})
		}
	}
	if len(groups) == 0 || len(groups) == len(live) {
		sends := make([]send, len(live))
		for i, c := range live {
			sends[i] = send{sc: c.sc, args: c.args, calls: live[i : i+1]}
		}
		return sends
	}
	// order has room for every call: the windows of it that sends keep
	// never move.
	sends := make([]send, 0, len(singles)+len(groups))
	order := make([]*call, 0, len(live))
	alone := func(c *call) {
		order = append(order, c)
		sends = append(sends, send{sc: c.sc, args: c.args, calls: order[len(order)-1:]})
	}
	for _, c := range singles {
		alone(c)
	}
	for _, g := range groups {
		if len(g.calls) == 1 {
			alone(g.calls[0])
			continue
		}
		from := len(order)
		order = append(order, g.calls...)
		var args []any
		if g.sc.batch.perCall {
			args = stackedBatchArgs(g.sc.batch, g.calls)
		} else {
			args = leanBatchArgs(g.sc.batch, g.calls, g.nargs-4)
		}
		sends = append(sends, send{sc: g.sc.batch, args: args, calls: order[from:]})
	}
	// The panic handler of run finishes live's calls from the first not
	// delivered: live follows the order of the commands.
	copy(live, order)
	return sends
}

// leanCommon is how many lean arguments the calls of one limit and cost
// have in common: mode, cost, rate, period and capacity. A lean call's
// arguments after them (the sliding window log's nonce) are its own.
const leanCommon = 5

// leanBatchArgs returns the command of the lean batch sc of calls, lean
// calls of per arguments each. A lean call's arguments are "evalsha", sha,
// 1, its key, then its script's; the batch takes the calls' keys, per,
// and the calls' arguments as lists that calls share (see "Calling
// convention: lean batches" in package lua): one list when every call has
// the same first leanCommon arguments, as the calls of one limit of cost 1 do; the
// distinct lists (up to 8) and each call's list number when that is no
// longer; else every call's arguments in order (m = 0). A list leaves out
// the arguments after the first leanCommon, each call's own, which follow
// the lists (the sliding window log's takes, whose nonces differ).
func leanBatchArgs(sc *script, calls []*call, per int) []any {
	// A list's arguments, s of per, and each call's own, e.
	s := min(per, leanCommon)
	e := per - s
	var sh sharing
	lists, of, shared := sh.share(calls, 4, s)
	args := make([]any, 0, 6+len(calls)*(1+per))
	args = append(args, argEvalSHA, sc.shaArg, len(calls))
	for _, c := range calls {
		args = append(args, c.args[3])
	}
	switch {
	case !shared:
		args = append(args, per, 0, 0)
	default:
		args = append(args, per, len(lists), e)
	}
	return appendShared(args, calls, 4, s, lists, of, shared)
}

// sharing is the working memory of share, on its caller's stack: a batch
// of up to 64 calls allocates none.
type sharing struct {
	lists [8]*call
	of    [64]int
}

// share finds the argument lists that calls share, each call's
// args[from:from+s], and returns each distinct list's first call (at
// most len(sh.lists)) and each call's list number, from 1. It reports
// false when sharing would not make the command shorter (more distinct
// lists than lists*s + calls <= calls*s allows) or finds more than
// len(sh.lists): the search is quadratic in the lists, and calls that
// share none stop it there.
func (sh *sharing) share(calls []*call, from, s int) (lists []*call, of []int, ok bool) {
	of = sh.of[:]
	if len(calls) > len(of) {
		of = make([]int, len(calls))
	}
	of = of[:len(calls)]
	lists = sh.lists[:0]
	if s <= 1 {
		return lists, of, false
	}
	limit := min(len(calls)*(s-1)/s, len(sh.lists))
share:
	for i, c := range calls {
		for j, l := range lists {
			if sameArgs(l.args[from:from+s], c.args[from:from+s]) {
				of[i] = j + 1
				continue share
			}
		}
		if len(lists) == limit {
			return lists, of, false
		}
		lists = append(lists, c)
		of[i] = len(lists)
	}
	return lists, of, true
}

// appendShared appends to a batch's command the calls' arguments, each
// call's args[from:]: without shared lists every call's in order; else
// the lists (s arguments each), then with more than one each call's list
// number, then each call's own arguments after its list's, in order.
func appendShared(args []any, calls []*call, from, s int, lists []*call, of []int, shared bool) []any {
	if !shared {
		for _, c := range calls {
			args = append(args, c.args[from:]...)
		}
		return args
	}
	for _, l := range lists {
		args = append(args, l.args[from:from+s]...)
	}
	if len(lists) > 1 {
		for _, n := range of {
			args = append(args, n)
		}
	}
	for _, c := range calls {
		args = append(args, c.args[from+s:]...)
	}
	return args
}

// stackedBatchArgs returns the command of the stacked batch sc of calls,
// calls of one lean stacked script with as many keys (k) and arguments,
// of which the last own are each call's own (see command.own): "evalsha",
// sha, every call's keys in order; then the number of calls, k, the
// number of arguments in a list (s) and of each call's own (e), the
// number of lists, and the arguments as lists that calls share (see
// "Calling convention: stacked batches" in package lua). A call's
// arguments are "evalsha", sha, k, its k keys, then its script's.
func stackedBatchArgs(sc *script, calls []*call) []any {
	k := calls[0].args[2].(int)
	e := calls[0].own
	s := len(calls[0].args) - 3 - k - e
	var sh sharing
	lists, of, shared := sh.share(calls, 3+k, s)
	args := make([]any, 0, 8+len(calls)*(len(calls[0].args)-2))
	args = append(args, argEvalSHA, sc.shaArg, len(calls)*k)
	for _, c := range calls {
		args = append(args, c.args[3:3+k]...)
	}
	m := 0
	if shared {
		m = len(lists)
	}
	args = append(args, len(calls), k, s, e, m)
	return appendShared(args, calls, 3+k, s, lists, of, shared)
}

// sameArgs reports whether two lean calls' script arguments are the same:
// strings and integers, as command builds them; any other value is never
// the same as another. It compares from the last, the capacity, where
// calls of different limits differ first.
func sameArgs(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := len(a) - 1; i >= 0; i-- {
		switch x := a[i].(type) {
		case string:
			if y, ok := b[i].(string); !ok || x != y {
				return false
			}
		case int64:
			if y, ok := b[i].(int64); !ok || x != y {
				return false
			}
		case int:
			if y, ok := b[i].(int); !ok || x != y {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// scriptsLost reacts to a NOSCRIPT reply of b's node: the scripts are
// loaded again in the background (see warmer.reload).
func (b *batcher) scriptsLost() {
	if b.p.warm != nil {
		b.p.warm.reload(b)
	}
}

// one sends a batch of one call.
func (b *batcher) one(ctx context.Context, c *call) (any, error) {
	return b.oneVia(ctx, c, b.client, b.p.client)
}

// oneVia sends a batch of one call through node, rerouted through node and
// all (see reroute) when Redis did not run it.
func (b *batcher) oneVia(ctx context.Context, c *call, node, all client) (any, error) {
	cmd, err := b.process(ctx, node, c)
	if err != nil && notRun(err) {
		return b.rerouteVia(ctx, c, err, node, all)
	}
	return cmd.Val(), err
}

// process sends c through cl, and again with its script's source when
// the server does not know the script (after a restart or SCRIPT FLUSH).
func (b *batcher) process(ctx context.Context, cl client, c *call) (*redis.Cmd, error) {
	cmd := redis.NewCmd(ctx, c.args...)
	err := cl.Process(ctx, noRetry{cmd})
	if err != nil && c.sc != nil && isNoScript(err) {
		b.scriptsLost()
		c.args[0], c.args[1] = "eval", c.sc.src
		cmd = redis.NewCmd(ctx, c.args...)
		err = cl.Process(ctx, noRetry{cmd})
	}
	return cmd, err
}

// reroute runs a call that Redis answered with err without running it (the
// slot moved or is being migrated, the cluster is down for a moment), and
// again after a short pause while the call's deadline allows. A refusal
// about the node's own state (CLUSTERDOWN, LOADING, BUSY) is retried on
// the node; any other, and every retry after it, goes through the cluster
// client, which follows MOVED and ASK. A script call naming several keys
// that meets TRYAGAIN (a slot being migrated, its keys not all on one
// node) is run on the migration's target where it can be (see migrating).
// Nothing ran, so nothing can count twice.
func (b *batcher) reroute(ctx context.Context, c *call, err error) (any, error) {
	return b.rerouteVia(ctx, c, err, b.client, b.p.client)
}

// rerouteVia is reroute through node (the node's own client, or the
// connection held for lone calls) and all (the whole client).
func (b *batcher) rerouteVia(ctx context.Context, c *call, err error, node, all client) (any, error) {
	p := b.p
	client := node
	for pause := 2 * time.Millisecond; ; pause *= 2 {
		switch {
		case isBusy(err):
			b.busyAt.Store(time.Now().UnixNano())
		case isClusterDown(err):
			b.downAt.Store(time.Now().UnixNano())
		case !isLoading(err):
			client = all
		}
		if p.cluster != nil && c.sc != nil && isTryAgain(err) {
			if v, done, err := p.migrating(ctx, c); done {
				return v, err
			}
		}
		if !time.Now().Before(c.deadline) {
			// Not sent past its deadline, as a batch's calls are not.
			return nil, err
		}
		var cmd *redis.Cmd
		cmd, err = b.process(ctx, client, c)
		if err == nil || !notRun(err) {
			return cmd.Val(), err
		}
		if time.Until(c.deadline) < pause {
			return nil, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// isBusy reports the BUSY error of a server running a script past its
// busy-reply-threshold.
func isBusy(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "BUSY ")
}

// isClusterDown reports the CLUSTERDOWN error of a Cluster node while the
// cluster does not serve every slot (a master failed, its replica is not
// promoted yet).
func isClusterDown(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "CLUSTERDOWN")
}

// isLoading reports the LOADING error of a server still loading its data.
func isLoading(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "LOADING")
}

// batchItem returns the element of one request in the flat reply of a
// lean batch (see "Calling convention: lean batches" in package lua)
// that starts at flat[at], and where the next request's starts. The
// element is its error string, or its integers, which batchItem stores
// in *slot and returns as a pointer to slot (boxing the slice itself
// would allocate): a *[]any, the array the lean script would have
// answered, which decodeLean reads like the []any of a lone call; or,
// for the two or three integers of an admission that repaired nothing, a
// *admission. The reply must be well formed (wellFormedBatch).
func batchItem(flat []any, at int, slot *[]any) (v any, next int) {
	if n, ok := flat[at].(int64); ok {
		end := at + 1 + int(n)
		*slot = flat[at+1 : end : end]
		if n <= 3 {
			return (*admission)(slot), end
		}
		return slot, end
	}
	return flat[at], at + 1
}

// admission is the compact element of a lean batch's request admitted
// without a repair: its remaining count, its reset time (µs) and, from
// the sliding window log and counter, the time until one unit more; the
// lean reply's other integers are then 1 (allowed), 0 (retry) and 0
// (repaired).
type admission []any

// wellFormedBatch reports whether flat, the reply of a lean batch of
// calls requests, holds exactly one element per request: a count from 1
// to 8 followed by that many integers, or a string. decodeLean checks
// the count against the layouts of a lean reply.
func wellFormedBatch(flat []any, calls int) bool {
	at := 0
	for range calls {
		if at >= len(flat) {
			return false
		}
		switch x := flat[at].(type) {
		case string:
			at++
		case int64:
			if x < 1 || x > 8 || int64(len(flat)-at-1) < x {
				return false
			}
			for _, y := range flat[at+1 : at+1+int(x)] {
				if _, ok := y.(int64); !ok {
					return false
				}
			}
			at += 1 + int(x)
		default:
			return false
		}
	}
	return at == len(flat)
}

// wellFormedPerCall reports whether flat, the reply of a stacked batch of
// calls requests, holds exactly one element per request: its reply (an
// array, which the call's own decoding checks) or a string.
func wellFormedPerCall(flat []any, calls int) bool {
	if len(flat) != calls {
		return false
	}
	for _, x := range flat {
		switch x.(type) {
		case string, []any:
		default:
			return false
		}
	}
	return true
}

// itemError is the error of one request of a lean batch, which the
// script answers as a string: Redis's error reply as it would have been
// for the request alone. It is a redis.Error, as that reply would be.
type itemError string

func (e itemError) Error() string { return string(e) }

// RedisError marks an error reply of Redis (the redis.Error interface).
func (itemError) RedisError() {}

// isCrossSlot reports the CROSSSLOT error of a cluster-mode server for a
// command whose keys lie in several slots: the command did not run.
func isCrossSlot(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "CROSSSLOT")
}

// isNoScript reports the NOSCRIPT error of EVALSHA.
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// notRun reports Redis errors that mean the command was refused before it
// ran: cluster redirections and transient cluster states, keys of several
// slots on a cluster-mode server, a replica that does not take writes, a
// server still loading its data or busy running a script past its
// busy-reply-threshold.
func notRun(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range [...]string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "CROSSSLOT", "READONLY", "LOADING", "MASTERDOWN", "BUSY "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
