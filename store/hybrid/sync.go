package hybrid

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// syncLoop commits pending units every interval until Close.
func (s *hybridStore) syncLoop() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	var batch []*entry
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		batch = s.collect(batch[:0], s.now())
		if len(batch) == 0 {
			continue
		}
		if s.down.Load() && !s.probe(batch[0]) {
			continue
		}
		s.commitAll(s.ctx, batch, s.timeout)
		clear(batch)
	}
}

// collect appends the entries with units to commit to batch, and drops
// idle entries that hold nothing. Shards are read-locked unless they hold
// an idle entry.
func (s *hybridStore) collect(batch []*entry, now int64) []*entry {
	for i := range s.shards {
		sh := &s.shards[i]
		idle := false
		sh.mu.RLock()
		for _, es := range sh.m {
			for _, e := range es {
				e.mu.Lock()
				busy := e.pending > 0 || e.debt > 0
				if busy && !e.syncing {
					batch = append(batch, e)
				}
				idle = idle || (!busy && !e.syncing && now-e.lastUse > int64(s.idle))
				e.mu.Unlock()
			}
		}
		sh.mu.RUnlock()
		if idle {
			s.dropIdle(sh, now)
		}
	}
	return batch
}

// dropIdle forgets the entries of sh that hold nothing and have been idle
// for the idle timeout.
func (s *hybridStore) dropIdle(sh *shard, now int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for key, es := range sh.m {
		kept := es[:0]
		for _, e := range es {
			e.mu.Lock()
			if e.pending == 0 && e.debt == 0 && !e.syncing && now-e.lastUse > int64(s.idle) {
				e.dead = true
			} else {
				kept = append(kept, e)
			}
			e.mu.Unlock()
		}
		if len(kept) == 0 {
			delete(sh.m, key)
		} else {
			clear(es[len(kept):])
			sh.m[key] = kept
		}
	}
}

// probe asks the backend, once its probe time has come, whether it answers
// again, with a Peek of e's key (which writes nothing). It reports whether
// commits may be sent.
func (s *hybridStore) probe(e *entry) bool {
	now := s.now()
	if s.isDown(now) {
		return false
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	_, err := s.backend.Peek(ctx, store.Request{Key: e.key, Limits: []store.Limit{e.lim}})
	if err != nil {
		s.fail(err, now)
		return false
	}
	s.recover()
	return true
}

// commitAll commits the pending units of entries, at most maxCommitters
// at a time, each call bounded by timeout, and returns when all are done.
// It returns the first failure and the units left uncommitted.
func (s *hybridStore) commitAll(ctx context.Context, entries []*entry, timeout time.Duration) (int64, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		left  int64
	)
	sem := make(chan struct{}, maxCommitters)
	for _, e := range entries {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n, err := s.commitEntry(ctx, e, timeout)
			if n > 0 || err != nil {
				mu.Lock()
				left += n
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return left, first
}

// commitEntry sends e's pending units and debt to the backend and renews
// its lease from the answer. It returns the units still uncommitted.
func (s *hybridStore) commitEntry(ctx context.Context, e *entry, timeout time.Duration) (int64, error) {
	now := s.now()
	e.mu.Lock()
	for e.syncing {
		wait := e.wait
		e.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		e.mu.Lock()
	}
	if e.dead || e.pending+e.debt == 0 {
		e.mu.Unlock()
		return 0, nil
	}
	send, owed := e.begin()
	e.mu.Unlock()

	cctx, cancel := context.WithTimeout(ctx, timeout)
	x := s.commit(cctx, e.key, &e.lim, send)
	cancel()
	if x.err != nil {
		s.failed(ctx, x.err, now)
	} else {
		s.commits.Add(1)
		s.recover()
	}
	e.mu.Lock()
	e.settle(s, now, owed, &x)
	left := e.pending + e.debt
	e.mu.Unlock()
	return left, x.err
}

// flush commits every entry's units for Close, within ctx.
func (s *hybridStore) flush(ctx context.Context) error {
	var all []*entry
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for _, es := range sh.m {
			all = append(all, es...)
		}
		sh.mu.RUnlock()
	}
	left, err := s.commitAll(ctx, all, s.closeTimeout)
	switch {
	case err != nil:
		return fmt.Errorf("hybrid: close: %d units not committed: %w", left, err)
	case left > 0:
		return fmt.Errorf("hybrid: close: %d units not committed: %w", left, errRefused)
	}
	return nil
}

// errRefused reports units the backend refused to record at Close: they
// were admitted beyond the limit and counted in Stats.Overadmitted.
var errRefused = errors.New("the backend refused them (over the limit)")
