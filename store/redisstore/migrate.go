package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// placeholder is the value of a key the store creates on the target of a
// Redis Cluster slot migration, so that a script naming several keys runs
// there; the scripts read it as an absent key and a take deletes it (see
// package lua, "Slot migration"). It starts with a NUL byte, which no state
// written by the store or by SetOverride does.
const placeholder = "\x00rk:absent"

// placeholderTTL is the life of a placeholder: long enough for the script
// sent right after it on the same connection, short enough that one left
// behind (by a peek, or a take that does not read the key) goes soon.
const placeholderTTL = 2 * time.Second

// migrateTimeout bounds the MIGRATE that hands a caller's keys from the
// source of a slot migration to its target: the source waits for the
// target that long at most, without serving anything else. It does not
// shrink with the call's remaining budget (see handOver).
const migrateTimeout = 100 * time.Millisecond

// isTryAgain reports the TRYAGAIN error of Redis Cluster: a command naming
// several keys on a slot being migrated, not all of them on the node.
func isTryAgain(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "TRYAGAIN")
}

// callKeys returns the distinct keys a script call names: from its
// arguments "evalsha", sha, key count, keys....
func callKeys(args []any) []string {
	if len(args) < 3 {
		return nil
	}
	n, ok := args[2].(int)
	if !ok || n < 0 || len(args) < 3+n {
		return nil
	}
	keys := make([]string, 0, n)
next:
	for _, a := range args[3 : 3+n] {
		var k string
		switch a := a.(type) {
		case string:
			k = a
		case *string: // a plain request's key (see call.argv)
			k = *a
		default:
			return nil
		}
		for _, seen := range keys {
			if seen == k {
				continue next
			}
		}
		keys = append(keys, k)
	}
	return keys
}

// migrating runs a script call that Redis Cluster answered with TRYAGAIN:
// the call names several distinct keys, in a slot being migrated from its
// master (the source) to another (the target), and they are not all on one
// node, or some exist nowhere. Redis serves such a command only when every
// key it names is on the node. migrating asks the source which of the keys
// it holds, one EXISTS per key (a single-key command: answered with 1 for
// a key held, with ASK and the target's address for a missing one), then:
//
//   - some keys on the source, others missing there: the source hands the
//     ones it holds to the target (MIGRATE ... KEYS, without REPLACE, as
//     the resharding tool does), and it asks again;
//   - none on the source: the source creates no key in a migrating slot,
//     so every key is on the target or nowhere. On one connection to the
//     target it sends, for each key, ASKING and SET key placeholder NX PX
//     (which creates a missing key and leaves one that exists), then
//     ASKING and the script, which now finds every key on the node;
//   - anything else (every key on the source, a MOVED, an error, a
//     MIGRATE refused): it gives up, and the caller pauses and retries.
//
// done is false when the script did not run, for certain, and the call
// may be sent again. Otherwise v and err are the call's outcome; errBudget
// when the call's deadline passed before the script could be sent.
func (p *pipes) migrating(ctx context.Context, c *call) (v any, done bool, err error) {
	keys := callKeys(c.args)
	if len(keys) < 2 || p.cluster == nil {
		return nil, false, nil
	}
	source, err := p.cluster.MasterForKey(ctx, keys[0])
	if err != nil {
		return nil, false, nil
	}
	for range 2 {
		held, target := probe(ctx, source, keys)
		if target == "" {
			return nil, false, nil
		}
		node := p.node(ctx, target)
		if len(held) > 0 {
			if !time.Now().Before(c.deadline) || !handOver(ctx, source, node, target, held) {
				return nil, false, nil
			}
			continue
		}
		if node == nil {
			return nil, false, nil
		}
		if !time.Now().Before(c.deadline) {
			// Too late to send: the caller has given up.
			return nil, true, errBudget
		}
		return runOnTarget(ctx, node, c, keys)
	}
	return nil, false, nil
}

// probe asks source which of keys it holds. It returns those it holds and
// the target's address from an ASK answered for a missing one; target is
// "" when no ASK came (every key is on source, or source does not serve the
// slot, or did not answer), so that the call is only retried.
func probe(ctx context.Context, source *redis.Client, keys []string) (held []string, target string) {
	pipe := source.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Exists(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	for i, cmd := range cmds {
		n, err := cmd.Result()
		switch {
		case err == nil && n == 1:
			held = append(held, keys[i])
		case err != nil:
			addr, ok := askTarget(err)
			if !ok || (target != "" && addr != target) {
				return nil, ""
			}
			target = addr
		default:
			// Served and missing: the node owns the slot without
			// migrating it; the TRYAGAIN is past.
			return nil, ""
		}
	}
	return held, target
}

// askTarget returns the address of an ASK redirection.
func askTarget(err error) (string, bool) {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return "", false
	}
	f := strings.Fields(rerr.Error())
	if len(f) != 3 || f[0] != "ASK" {
		return "", false
	}
	return f[2], true
}

// handOver has source move keys to target (MIGRATE host port "" 0 timeout
// KEYS ..., without REPLACE, so that it never overwrites a key the target
// holds), authenticating with the source client's static username and
// password when it has them, as redis-cli does. Keys source no longer
// holds are skipped by Redis. It reports whether source answered OK or
// NOKEY; on any error (no permission, the target unreachable or refusing
// the credentials, a key the target already holds) the keys stay where
// Redis left them and the caller waits for the resharding tool instead.
//
// The MIGRATE waits for the target migrateTimeout at most, whatever is
// left of the call's budget (the caller's own wait ends at its deadline
// regardless), so that a short remainder does not make it fail half-way.
// When it fails all the same with its outcome unknown (IOERR, or no
// reply), a key may now be on both nodes: the target restored it, the
// source kept it. undoCopies then deletes the target's copy of every key
// the source still holds, which nothing has read: the source stays the
// one holder, as if the MIGRATE had not run.
func handOver(ctx context.Context, source, targetNode *redis.Client, target string, keys []string) bool {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return false
	}
	args := make([]any, 0, 10+len(keys))
	args = append(args, "migrate", host, port, "", 0, migrateTimeout.Milliseconds())
	switch o := source.Options(); {
	case o.Password != "" && o.Username != "":
		args = append(args, "auth2", o.Username, o.Password)
	case o.Password != "":
		args = append(args, "auth", o.Password)
	}
	args = append(args, "keys")
	for _, k := range keys {
		args = append(args, k)
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*migrateTimeout)
	defer cancel()
	s, err := source.Do(mctx, args...).Text()
	if err == nil {
		return s == "OK" || s == "NOKEY"
	}
	if outcomeUnknown(err) && targetNode != nil {
		undoCopies(mctx, source, targetNode, keys)
	}
	return false
}

// outcomeUnknown reports a MIGRATE error after which a key may be on both
// nodes: IOERR (the target did not answer in time), or no reply at all.
func outcomeUnknown(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return strings.HasPrefix(rerr.Error(), "IOERR")
	}
	return true
}

// undoCopies deletes, on the target of a migration, each of keys that the
// source still holds after a MIGRATE whose outcome is unknown. Redis runs
// a MIGRATE to its end before it answers anything else, so the source's
// answer is final: a key it holds was not handed over, and any copy the
// target has is the MIGRATE's half-done restore.
func undoCopies(ctx context.Context, source, target *redis.Client, keys []string) {
	held, _ := probe(ctx, source, keys)
	if len(held) == 0 {
		return
	}
	pipe := target.Pipeline()
	for _, k := range held {
		_ = pipe.Process(ctx, redis.NewCmd(ctx, "asking"))
		_ = pipe.Process(ctx, redis.NewCmd(ctx, "del", k))
	}
	_, _ = pipe.Exec(ctx)
}

// runOnTarget sends to target, in one pipeline on one connection, for
// each key ASKING and SET key placeholder NX PX, then ASKING and the call's
// script (with its source when target does not know it), then for each key
// ASKING and a compare-and-delete of the placeholder: one the script did
// not write over or delete (a key it did not read, or any under a peek)
// goes at once, so that none is left for a later migration of the slot to
// meet on its source (see package lua, "Slot migration"). done is as for
// migrating.
func runOnTarget(ctx context.Context, target *redis.Client, c *call, keys []string) (v any, done bool, err error) {
	for range 2 {
		pipe := target.Pipeline()
		for _, k := range keys {
			_ = pipe.Process(ctx, redis.NewCmd(ctx, "asking"))
			_ = pipe.Process(ctx, redis.NewCmd(ctx, "set", k, placeholder, "nx", "px", placeholderTTL.Milliseconds()))
		}
		_ = pipe.Process(ctx, redis.NewCmd(ctx, "asking"))
		cmd := redis.NewCmd(ctx, c.args...)
		_ = pipe.Process(ctx, noRetry{cmd})
		for _, k := range keys {
			_ = pipe.Process(ctx, redis.NewCmd(ctx, "asking"))
			_ = pipe.Process(ctx, redis.NewCmd(ctx, "eval", clearPlaceholder, 1, k, placeholder))
		}
		_, _ = pipe.Exec(ctx)
		err = cmd.Err()
		switch {
		case err == nil:
			return cmd.Val(), true, nil
		case isNoScript(err) && c.args[0] != "eval":
			c.args[0], c.args[1] = "eval", c.sc.src
			continue
		case notRun(err) || errors.Is(err, redis.ErrClosed):
			return nil, false, nil
		}
		return cmd.Val(), true, err
	}
	return nil, true, err
}

// clearPlaceholder deletes KEYS[1] when it holds ARGV[1], the placeholder.
// A key of another type is left alone (pcall hands back its error).
const clearPlaceholder = `if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`

// node returns the client of the cluster node at addr: one the cluster
// client made (so that its options, TLS and credentials included, carry
// over), or nil when it has none.
func (p *pipes) node(ctx context.Context, addr string) *redis.Client {
	p.mu.RLock()
	n := p.byAddr[addr]
	p.mu.RUnlock()
	if n != nil {
		return n
	}
	_ = p.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		p.addNode(c)
		return nil
	})
	p.mu.RLock()
	n = p.byAddr[addr]
	p.mu.RUnlock()
	return n
}

// addNode records a node client of the cluster client by its address.
func (p *pipes) addNode(c *redis.Client) {
	addr := c.Options().Addr
	p.mu.Lock()
	p.byAddr[addr] = c
	p.mu.Unlock()
}
