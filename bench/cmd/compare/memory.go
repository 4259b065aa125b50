package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// The memory measurement gives every identity one admitted decision under
// a limit of memRate per memPeriod: long enough that no state key expires
// before it is measured.
const (
	memRate    = 10
	memPeriod  = time.Hour
	memCallers = 16
)

// memCase is a limiter whose Redis footprint is measured.
type memCase struct {
	name string
	// setup returns the decision function for keys under prefix and the
	// SCAN pattern matching every key it writes.
	setup func(e *env, prefix string) (take func(ctx context.Context, key string) error, pattern string, err error)
}

// memResult is the footprint of identities identities.
type memResult struct {
	name        string
	identities  int
	stateKeys   int64
	stateBytes  int64 // MEMORY USAGE summed over state keys
	replayKeys  int64
	replayBytes int64 // MEMORY USAGE of ratekeeper's replay records
	usedDelta   int64 // INFO memory used_memory after minus before
}

func memCases() []memCase {
	var cases []memCase
	for _, alg := range store.Algorithms {
		cases = append(cases, memCase{name: "ratekeeper/redis/" + alg.String(), setup: func(e *env, prefix string) (func(context.Context, string) error, string, error) {
			s, err := redisstore.New(e.rdb, e.rkOptions(prefix, true, true))
			if err != nil {
				return nil, "", err
			}
			limits := []store.Limit{{Algorithm: alg, Rate: memRate, Period: memPeriod}}
			return func(ctx context.Context, key string) error {
				d, err := s.Take(ctx, store.Request{Key: key, Limits: limits})
				if err == nil && !d.Allowed {
					err = fmt.Errorf("first decision for %q refused", key)
				}
				return err
			}, prefix + ":*", nil
		}})
	}
	cases = append(cases,
		memCase{name: refRedisRate, setup: func(e *env, prefix string) (func(context.Context, string) error, string, error) {
			l := redis_rate.NewLimiter(e.rdb)
			limit := redis_rate.Limit{Rate: memRate, Burst: memRate, Period: memPeriod}
			return func(ctx context.Context, key string) error {
				_, err := l.Allow(ctx, prefix+":"+key, limit)
				return err
			}, "rate:" + prefix + ":*", nil
		}},
		memCase{name: "ulule/redis", setup: func(e *env, prefix string) (func(context.Context, string) error, string, error) {
			st, err := ululeredis.NewStoreWithOptions(e.rdb, ulule.StoreOptions{Prefix: prefix})
			if err != nil {
				return nil, "", err
			}
			l := ulule.New(st, ulule.Rate{Period: memPeriod, Limit: memRate})
			return func(ctx context.Context, key string) error {
				_, err := l.Get(ctx, key)
				return err
			}, prefix + ":*", nil
		}},
	)
	return cases
}

// isReplayKey reports a replay record ("<prefix>:{key}:op:<nonce>"), the
// short-lived per-take key that earlier ratekeeper versions wrote.
func isReplayKey(k string) bool { return strings.Contains(k, "}:op:") }

// measureMemory makes one decision for each of n identities and measures
// what they left in Redis. flush empties the server first (only for a
// server this program started).
func measureMemory(ctx context.Context, e *env, mc memCase, n int, flush bool) (memResult, error) {
	r := memResult{name: mc.name, identities: n}
	if flush {
		if err := e.rdb.FlushAll(ctx).Err(); err != nil {
			return r, fmt.Errorf("FLUSHALL: %w", err)
		}
	}
	// Decisions under another prefix first, from as many callers as the
	// measurement uses, so that neither loading the script nor growing
	// the connections' buffers is counted.
	warm, _, err := mc.setup(e, e.prefix())
	if err != nil {
		return r, err
	}
	if err := takeAll(ctx, warm, e.keys[:min(len(e.keys), 4*memCallers)]); err != nil {
		return r, fmt.Errorf("%s: warm-up: %w", mc.name, err)
	}
	prefix := e.prefix()
	take, pattern, err := mc.setup(e, prefix)
	if err != nil {
		return r, err
	}
	before, err := usedMemory(ctx, e.rdb)
	if err != nil {
		return r, err
	}
	if err := takeAll(ctx, take, e.keys[:n]); err != nil {
		return r, fmt.Errorf("%s: %w", mc.name, err)
	}
	after, err := usedMemory(ctx, e.rdb)
	if err != nil {
		return r, err
	}
	r.usedDelta = after - before

	keys, err := scanKeys(ctx, e, pattern)
	if err != nil {
		return r, err
	}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 500)]
		keys = keys[len(batch):]
		pipe := e.rdb.Pipeline()
		cmds := make([]interface{ Val() int64 }, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.MemoryUsage(ctx, k, 0)
		}
		// A key that expired between SCAN and MEMORY USAGE answers nil:
		// it no longer uses memory.
		if _, err := pipe.Exec(ctx); err != nil && !isNil(err) {
			return r, fmt.Errorf("MEMORY USAGE: %w", err)
		}
		for i, k := range batch {
			b := cmds[i].Val()
			if isReplayKey(k) {
				r.replayKeys++
				r.replayBytes += b
			} else {
				r.stateKeys++
				r.stateBytes += b
			}
		}
	}
	return r, nil
}

// takeAll makes one decision for each key with memCallers goroutines and
// returns the first error.
func takeAll(ctx context.Context, take func(context.Context, string) error, keys []string) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, memCallers)
	for w := range memCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(keys)) || ctx.Err() != nil {
					return
				}
				if err := take(ctx, keys[i]); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// scanKeys returns every key matching pattern.
func scanKeys(ctx context.Context, e *env, pattern string) ([]string, error) {
	var keys []string
	iter := e.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("SCAN %s: %w", pattern, err)
	}
	return keys, nil
}

// deleteRunKeys removes this run's keys from a server it shares with
// others (never flushed): every key whose name contains the run id.
func deleteRunKeys(ctx context.Context, e *env) error {
	keys, err := scanKeys(ctx, e, "*rkbench"+e.runID+"-*")
	if err != nil {
		return err
	}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 500)]
		keys = keys[len(batch):]
		if err := e.rdb.Unlink(ctx, batch...).Err(); err != nil {
			return fmt.Errorf("UNLINK: %w", err)
		}
	}
	return nil
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }
