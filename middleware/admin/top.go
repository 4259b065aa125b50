package admin

import (
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware"
)

// Top is a bounded summary of the clients each policy refused most over
// the last minutes, for the top endpoint. It keeps, per policy, one
// Space-Saving summary of at most k clients for each of the last minutes
// minutes: memory is bounded by policies × minutes × k entries, whatever
// the traffic, and nothing of it reaches metric labels.
//
// Space-Saving counts exactly while a minute has seen at most k distinct
// refused clients; beyond that a new client takes the place of the least
// counted one and inherits its count as its error, so that every client
// refused more than 1/k of a minute's refusals is kept, and within a
// minute a count is never below the truth nor more than its error above
// it. Over several minutes the minutes' summaries are added: a client
// dropped from one minute's summary loses what it had there.
//
// The middleware's observers never see identities (package middleware,
// Event), so a Top is fed by the application with [Top.Record], wherever
// it knows both the decision and the identity: after [middleware.Limiter.Allow]
// in a handler, for example. A Top is safe for concurrent use; Record
// takes one short lock and allocates only for a client new in the minute.
type Top struct {
	k       int
	minutes int
	now     func() time.Time

	mu       sync.Mutex
	policies map[string][]minute // policy name → ring of minutes
}

// minute is one minute's Space-Saving summary.
type minute struct {
	at      int64 // minutes since the Unix epoch; 0 when unused
	entries map[topKey]*counter
}

type topKey struct{ tier, identity string }

type counter struct{ count, err uint64 }

// TopEntry is one client of a [Top.Top] answer.
type TopEntry struct {
	// Tier is the client's tier; "" for a policy without tiers.
	Tier string
	// Identity is the client's identity, as the key function returned it.
	Identity string
	// Count is how many refusals were counted for the client; it may
	// exceed the truth by at most Error.
	Count uint64
	// Error is the overestimate Count may hold; 0 means exact.
	Error uint64
}

// NewTop returns a summary of the k most refused clients per policy over
// the last minutes minutes (k from 1 to 10000, minutes from 1 to 60).
func NewTop(k, minutes int) (*Top, error) {
	if k < 1 || k > 10000 {
		return nil, errors.New("ratekeeper: admin: NewTop: k must be from 1 to 10000")
	}
	if minutes < 1 || minutes > 60 {
		return nil, errors.New("ratekeeper: admin: NewTop: minutes must be from 1 to 60")
	}
	return &Top{k: k, minutes: minutes, now: time.Now, policies: make(map[string][]minute)}, nil
}

// Record counts d for identity if d refused the request (a limit's
// refusal, a block, or a refusal a dry-run policy let through); other
// decisions, and those for suspended tiers, are ignored. d.Policy names
// the policy and the tier ("api/authenticated"), as the middleware sets it.
func (t *Top) Record(d middleware.Decision, identity string) {
	if d.Allowed || d.Limit == 0 || d.Policy == "" || identity == "" {
		return
	}
	name, _, _ := strings.Cut(d.Policy, "/")
	t.record(name, topKey{d.Tier, identity})
}

func (t *Top) record(policy string, key topKey) {
	now := t.now().Unix() / 60
	t.mu.Lock()
	defer t.mu.Unlock()
	ring := t.policies[policy]
	if ring == nil {
		ring = make([]minute, t.minutes)
		t.policies[policy] = ring
	}
	m := &ring[now%int64(t.minutes)]
	if m.at != now {
		m.at = now
		clear(m.entries)
		if m.entries == nil {
			m.entries = make(map[topKey]*counter, t.k)
		}
	}
	if c, ok := m.entries[key]; ok {
		c.count++
		return
	}
	if len(m.entries) < t.k {
		m.entries[key] = &counter{count: 1}
		return
	}
	// Space-Saving: the new client replaces the least counted one.
	var minKey topKey
	var minC *counter
	for k, c := range m.entries {
		if minC == nil || c.count < minC.count {
			minKey, minC = k, c
		}
	}
	delete(m.entries, minKey)
	minC.err = minC.count
	minC.count++
	m.entries[key] = minC
}

// Top returns up to n clients of policy with the most refusals over the
// last d (whole minutes, at most the Top's minutes; the current minute
// counts as one), most refused first, ties by tier and identity.
func (t *Top) Top(policy string, d time.Duration, n int) []TopEntry {
	span := int64(d / time.Minute)
	span = max(1, min(span, int64(t.minutes)))
	now := t.now().Unix() / 60
	sum := make(map[topKey]*counter)
	t.mu.Lock()
	for _, m := range t.policies[policy] {
		if m.at == 0 || m.at > now || now-m.at >= span {
			continue
		}
		for k, c := range m.entries {
			s := sum[k]
			if s == nil {
				s = &counter{}
				sum[k] = s
			}
			s.count += c.count
			s.err += c.err
		}
	}
	t.mu.Unlock()
	out := make([]TopEntry, 0, len(sum))
	for k, c := range sum {
		out = append(out, TopEntry{Tier: k.tier, Identity: k.identity, Count: c.count, Error: c.err})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Tier != b.Tier {
			return a.Tier < b.Tier
		}
		return a.Identity < b.Identity
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
