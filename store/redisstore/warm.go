package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultWarmUp is the default [Options.WarmUp].
const defaultWarmUp = time.Second

// warmConns is how many connections the warm-up opens on each node: as
// many as the node's batcher keeps in flight.
const warmConns = maxFlushers

// scriptReloadEvery is the shortest interval between two background
// reloads of the scripts on one node after it answered NOSCRIPT.
const scriptReloadEvery = time.Second

// warmer opens connections and loads the built-in scripts on a node,
// before the first decision (warm) and again after a node that lost its
// scripts answered NOSCRIPT (reload).
type warmer struct {
	sources []string // every built-in script's source, each once
	logger  *slog.Logger
	// timed, when set, is told of a round trip on a warm connection
	// (pipes.timed): a slow server is known before the first decision.
	timed func(start time.Time)
}

// newWarmer returns the warmer of the scripts t holds.
func newWarmer(t *scriptTable, logger *slog.Logger) *warmer {
	w := &warmer{logger: logger}
	seen := make(map[string]bool)
	add := func(sc script) {
		if sc.src != "" && !seen[sc.sha] {
			seen[sc.sha] = true
			w.sources = append(w.sources, sc.src)
		}
	}
	for alg := range t.byAlgorithm {
		for _, sc := range t.byAlgorithm[alg] {
			add(sc)
		}
	}
	for _, sc := range t.leanBatch {
		add(sc)
	}
	add(t.stacked)
	add(t.stackedLean)
	add(t.stackedLeanWindows)
	add(t.stackedLeanBatch)
	add(t.stackedLeanWindowsBatch)
	add(t.refund)
	return w
}

// warm warms every node of client and returns when that is done or d has
// passed: see [Options.WarmUp]. A client that does not cut socket I/O at
// context deadlines (go-redis's default) may take longer to give up; the
// warm-up then goes on in the background until it does. A failure is
// logged, not returned: the store then connects and loads its scripts on
// first use.
func (w *warmer) warm(client redis.UniversalClient, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- w.all(ctx, client)
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(d):
		err = fmt.Errorf("not done within %s", d)
	}
	if err != nil {
		w.logger.Warn("ratekeeper: warming up the Redis connections and scripts failed; the first decisions connect and load scripts themselves and may exceed their budget",
			slog.Duration("waited", time.Since(start).Round(time.Millisecond)), slog.Any("error", err))
	}
}

// all warms every node of client within ctx.
func (w *warmer) all(ctx context.Context, client redis.UniversalClient) error {
	switch c := client.(type) {
	case *redis.ClusterClient:
		if err := c.ForEachMaster(ctx, w.nodeSafe); err != nil {
			return err
		}
		return commandTable(ctx, c)
	case *redis.Ring:
		return c.ForEachShard(ctx, w.nodeSafe)
	case *redis.Client:
		return w.nodeSafe(ctx, c)
	}
	return w.loadSafe(ctx, client)
}

// node warms node: it loads the scripts through the client (which opens
// a first connection), then opens up to warmConns connections of the
// client's main pool at once, each through its handshake, and gives them
// back to the pool, where the first decisions find them, and sends as
// many pipelines at once, which go-redis sends through a pool of their own
// (PipelinePoolSize) that never opens connections ahead of use. Pipelines
// sent at once share a connection only when the first is answered before
// the next leaves, that is when a round trip is cheap enough not to need
// the warm-up. The first connection is opened alone because go-redis
// settles, in its first handshake, whether the server takes maintenance
// notifications, and records that in options that its dedicated
// connections (Conn) read without the client's lock.
func (w *warmer) node(ctx context.Context, node *redis.Client) error {
	opt := node.Options()
	if err := w.load(ctx, node); err != nil {
		return fmt.Errorf("node %s: %w", opt.Addr, err)
	}
	n := min(warmConns, max(opt.PoolSize, 1))
	pipes := opt.PipelinePoolSize // zero means go-redis's default, negative none
	if pipes == 0 {
		pipes = redis.DefaultPipelinePoolSize
	}
	errs := make([]error, n+min(warmConns, max(pipes, 0)))
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil { // a client hook panicked
					errs[i] = fmt.Errorf("%w: %v", errPanic, r)
				}
			}()
			if i >= n {
				_, errs[i] = node.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() })
				return
			}
			conn := node.Conn()
			defer conn.Close()
			if errs[i] = conn.Ping(ctx).Err(); errs[i] != nil || i != 0 || w.timed == nil {
				return
			}
			start := time.Now() // a round trip without the handshake
			if errs[i] = conn.Ping(ctx).Err(); errs[i] == nil {
				w.timed(start)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("node %s: %w", opt.Addr, err)
		}
	}
	return nil
}

// commandTable has c fetch Redis's command table (COMMAND) while every
// node is up. A ClusterClient fetches it on the first command it routes
// itself, from up to three nodes picked at random, without the command's
// deadline unless ContextTimeoutEnabled is set; the store routes through
// it only when a node refused a call (see batcher.reroute), which is when
// a dead master may be among those picked, and redialing it five times
// would hold the call, and the node's queue behind it, past their budget.
// A PING is routed like any command, and writes nothing.
func commandTable(ctx context.Context, c *redis.ClusterClient) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("routing a PING through the cluster client: %w", err)
	}
	return nil
}

// nodeSafe is node, with a panicking client hook turned into an error.
func (w *warmer) nodeSafe(ctx context.Context, node *redis.Client) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	return w.node(ctx, node)
}

// loadSafe is load, with a panicking client hook turned into an error.
func (w *warmer) loadSafe(ctx context.Context, c redis.Cmdable) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	return w.load(ctx, c)
}

// load sends SCRIPT LOAD for every script through c, in one pipeline.
func (w *warmer) load(ctx context.Context, c redis.Cmdable) error {
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, src := range w.sources {
			p.ScriptLoad(ctx, src)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}

// reload loads the scripts again through b's client, in the background
// and at most once per scriptReloadEvery for b: b's node answered
// NOSCRIPT (it restarted or its scripts were flushed). The call that met
// NOSCRIPT is sent again with its script's source at once, as before; the
// reload spares the calls after it that second round trip, and loads the
// scripts even when every such call runs out of its budget before its
// EVAL is answered.
func (w *warmer) reload(b *batcher) {
	now := time.Now().UnixNano()
	last := b.scriptsAt.Load()
	if now-last < int64(scriptReloadEvery) || !b.scriptsAt.CompareAndSwap(last, now) {
		return
	}
	c, ok := b.client.(redis.Cmdable)
	if !ok {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.loadSafe(ctx, c)
	}()
}
