package redisstore

import (
	"math"
	"strconv"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// costReply starts the error a full script answers, for a request that
// reads overrides, when no override admits its cost.
const costReply = "RKCOST "

// Script modes (ARGV[1]).
const (
	modeTake = "take"
	modePeek = "peek"
)

// Arguments as interface values made once: converting a string variable
// to any allocates.
var (
	argEvalSHA any = "evalsha"
	argOne     any = 1
	argTake    any = modeTake
	argPeek    any = modePeek
)

// modeArg returns mode as a preallocated argument.
func modeArg(mode string) any {
	if mode == modeTake {
		return argTake
	}
	return argPeek
}

// command is one command for Redis: a script call when sc is set.
type command struct {
	key  string // the first key the command names: its slot
	sc   *script
	args []any // "evalsha", sha, key count, keys..., arguments...
	// own is how many of the last arguments are the call's own, which a
	// stacked batch does not share among calls of the same shape: the
	// log parts' nonces of a lean stacked call of window parts.
	own     int
	variant variant
	li      *limitInfo // of the request's first limit
	// refusal finds the cached refusal that answers the call; the zero
	// value (a call the deny cache does not answer) finds none.
	refusal refusalQuery
	// start is when the call was made, its budget's start; zero for
	// the time it is sent (see redisStore.do).
	start time.Time
	// pooled is the call whose room holds args (a plain request's), or
	// nil: the call that sends the command (see take).
	pooled *call
}

// leanArgs is the most arguments of a plain request's script call: the
// lean override script's, with its two keys.
const leanArgs = 11

// take returns the call that sends cmd: the one whose room holds its
// arguments, or a new one.
func (cmd *command) take() *call {
	if c := cmd.pooled; c != nil {
		cmd.pooled = nil
		return c
	}
	return callPool.Get().(*call)
}

// drop gives back the call whose room holds cmd's arguments, for a
// command that is not sent.
func (cmd *command) drop() {
	if c := cmd.pooled; c != nil {
		cmd.pooled, cmd.args = nil, nil
		c.refs.Store(1)
		c.release()
	}
}

// command builds the script call of a validated request, in the family
// variantOf chooses. Only plain requests without an override are
// answered from the deny cache: an operator's change of an override must
// apply to the next request.
func (s *redisStore) command(mode string, req *store.Request, cost int64) command {
	li := s.limits.get(req.Limits[0])
	alg := req.Limits[0].Algorithm
	c := command{variant: variantOf(req), li: li}
	if c.variant == reservation && mode != modeTake {
		c.variant = full // a peek reserves nothing
	}
	c.sc = &s.scripts.byAlgorithm[alg][c.variant]
	if c.variant == full || c.variant == partialGrant || c.variant == calendarWindows || c.variant == waiting || c.variant == reservation {
		c.args = s.fullArgs(mode, keyOf(s.prefix, req.Key, ""), c.sc, req, cost)
		switch c.variant {
		case calendarWindows:
			c.args = s.appendBounds(c.args, req.Limits)
		case waiting:
			c.args = append(c.args, req.MaxWait.Microseconds())
		}
		c.key = c.args[3+4].(string) // the first state key
		return c
	}
	// The arguments go in the room of the call that will send them,
	// the key and a nonce as pointers to the call's copies: neither the
	// list nor the strings as arguments allocate.
	p := callPool.Get().(*call)
	c.pooled = p
	c.args = p.argv[:0]
	if c.variant == lean {
		c.key = keyOf(s.prefix, req.Key, li.suffix)
		p.key = c.key
		c.args = append(c.args, argEvalSHA, c.sc.shaArg, argOne, &p.key)
	} else {
		base := keyOf(s.prefix, req.Key, "")
		c.key = base + li.suffix
		p.key = c.key
		c.args = append(c.args, argEvalSHA, c.sc.shaArg, 2, &p.key, base+tagOverride)
	}
	c.args = append(c.args, modeArg(mode), cost, li.rate, li.period, li.capacity)
	if alg == store.SlidingWindowLog && mode == modeTake {
		p.nonce = s.nonce()
		c.args = append(c.args, &p.nonce)
	}
	if c.variant == lean && s.deny != nil {
		c.refusal = refusalQuery{cache: s.deny, key: c.key, li: li, cost: cost}
	}
	return c
}

// decode checks and decodes the reply v to c, a call for req of cost,
// by the reply layout of c's variant.
func (c *command) decode(v any, req *store.Request, cost int64) (store.Decision, error) {
	switch c.variant {
	case leanOverride:
		return decodeLeanOverride(v, req.Limits[0], cost, c.li)
	case lean:
		return decodeLean(v, c.li)
	case partialGrant:
		return decodePartial(v, req, cost)
	case waiting:
		return decodeWait(v, req, cost)
	case reservation:
		return decodeReservation(v, req, cost)
	}
	r, err := decodeReply(v, req.Limits, cost)
	if err != nil {
		return store.Decision{}, err
	}
	return r.decision(req.Limits), nil
}

// blocks reports whether a limit blocks, which needs the block key.
func blocks(limits []store.Limit) bool {
	for _, l := range limits {
		if l.Block > 0 {
			return true
		}
	}
	return false
}

// escalates reports whether a limit's blocks escalate, which needs the
// strike counter.
func escalates(limits []store.Limit) bool {
	for _, l := range limits {
		if l.BlockMax > l.Block {
			return true
		}
	}
	return false
}

// fullArgs returns the EVALSHA arguments of a validated request for the
// full script; see package lua for the layout. Keys the script will not
// touch (the block key when no limit blocks, the strike counter when no
// limit escalates, the de-duplication hash without an id, the override
// when the request does not read it) are filled with a key the script
// uses: the block key when a limit blocks, else the first state key. The
// call then names only keys it needs, which matters on a Redis Cluster
// during the migration of the slot: Redis serves a multi-key command
// there only when every key it names exists on one node, and a block key
// that was never set never exists. The first key names the slot.
func (s *redisStore) fullArgs(mode, base string, sc *script, req *store.Request, cost int64) []any {
	n := len(req.Limits)
	args := make([]any, 0, 3+4+n+9+6*n)
	args = append(args, argEvalSHA, sc.shaArg, 0) // the key count is set below
	var stateKeys [store.MaxLimits]string
	states := appendStateKeys(stateKeys[:0], base, req.Limits)
	filler := states[0]
	if blocks(req.Limits) {
		filler = base + tagBlock
	}
	// The block, strike, de-duplication and override keys, in that order;
	// the filler is the block key itself when a limit blocks. A key is
	// built only when the call names it.
	for _, k := range [...]struct {
		used bool
		tag  string
	}{{false, ""}, {escalates(req.Limits), tagStrikes}, {req.DedupID != "", tagDedup}, {req.ApplyOverride, tagOverride}} {
		if k.used {
			args = append(args, base+k.tag)
		} else {
			args = append(args, filler)
		}
	}
	for _, k := range states {
		args = append(args, k)
	}
	args[2] = len(args) - 3
	return s.appendFullArgv(args, mode, req, cost)
}

// appendFullArgv appends the full script's ARGV for req to args.
func (s *redisStore) appendFullArgv(args []any, mode string, req *store.Request, cost int64) []any {
	var dedup any = ""
	var replays, window int64
	if req.DedupID != "" {
		dedup = dedupField(req.DedupID)
		replays, window = contract.DedupBound(req)
	}
	nonce := ""
	switch alg := req.Limits[0].Algorithm; {
	case mode == modeTake && alg == store.SlidingWindowLog:
		nonce = s.nonce()
	case alg == contract.Suppressed:
		// The nonce's place carries the request's random value.
		nonce = strconv.FormatFloat(s.draw(), 'g', -1, 64)
	}
	args = append(args, mode, cost, nonce, flag(req.CountDenied), dedup, replays, window, len(req.Limits), flag(req.ApplyOverride))
	for _, l := range req.Limits {
		li := s.limits.get(l)
		args = append(args, li.rate, li.period, li.capacity)
		if l.Block > 0 {
			args = append(args, l.Block.Milliseconds(), l.BlockMax.Milliseconds(), li.id)
		} else {
			args = append(args, 0, 0, "")
		}
	}
	return args
}

// flag returns a script's boolean argument: "1" or "0".
func flag(b bool) any {
	if b {
		return "1"
	}
	return "0"
}

// draw returns the store's random value, clamped into [0, 1).
func (s *redisStore) draw() float64 {
	switch u := s.rand(); {
	case !(u >= 0):
		return 0
	case u >= 1:
		return math.Nextafter(1, 0)
	default:
		return u
	}
}

// nonce returns an identifier unique to one take: a random per-store part
// and a counter. Sliding window log members carry it.
func (s *redisStore) nonce() string {
	var b [11 + 13]byte
	n := copy(b[:], s.nonceBase)
	return string(strconv.AppendUint(b[:n], s.seq.Add(1), 36))
}
