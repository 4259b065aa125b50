package admin

import (
	"cmp"
	"fmt"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"sort"
	"strings"
	"sync"
	"time"
)

// Top is a bounded summary of the clients each policy refused most over
// the last minutes, for the top endpoint. It keeps, per policy, one
// Space-Saving summary of at most Clients clients for each of the last
// Minutes minutes: memory is bounded by policies × Minutes × Clients
// entries, whatever the traffic, and nothing of it reaches metric labels.
//
// Space-Saving counts exactly while a minute has seen at most Clients
// distinct refused clients; beyond that a new client takes the place of
// the least counted one and inherits its count as its error, so that every
// client refused more than 1/Clients of a minute's refusals is kept, and within a
// minute a count is never below the truth nor more than its error above
// it. Over several minutes the minutes' summaries are added: a client
// dropped from one minute's summary loses what it had there.
//
// The middleware's observers never see identities (package middleware,
// Event), so a Top is fed by the application with [Top.Record], wherever
// it knows both the decision and the identity: from
// middleware.Options.RefusalHook, or after [middleware.Limiter.Allow] in a
// handler. The zero value is ready to use, with the fields' defaults; set
// the fields before the first Record and do not change them afterwards
// ([New] refuses values out of range). A Top is safe for concurrent use;
// Record takes one short lock and allocates only for a client new in the
// minute.
type Top struct {
	// Clients is how many clients the summary keeps per policy and
	// minute, from 1 to 10000; 0 means 100.
	Clients int
	// Minutes is how many of the last minutes the summary covers, from 1
	// to 60; 0 means 15.
	Minutes int

	now func() time.Time // nil means time.Now

	mu       sync.Mutex
	k        int                 // Clients, read at first use
	minutes  int                 // Minutes, read at first use
	policies map[string][]minute // policy name → ring of minutes
}

// Bounds and defaults of a Top's fields.
const (
	maxTopClients     = 10000
	maxTopMinutes     = 60
	defaultTopClients = 100
	defaultTopMinutes = 15
)

// check returns an error for fields out of range.
func (t *Top) check() error {
	if t.Clients < 0 || t.Clients > maxTopClients {
		return fmt.Errorf("ratekeeper: admin: Top.Clients must be from 1 to %d (0 for %d), got %d", maxTopClients, defaultTopClients, t.Clients)
	}
	if t.Minutes < 0 || t.Minutes > maxTopMinutes {
		return fmt.Errorf("ratekeeper: admin: Top.Minutes must be from 1 to %d (0 for %d), got %d", maxTopMinutes, defaultTopMinutes, t.Minutes)
	}
	return nil
}

// size returns how many clients per minute and how many minutes the
// summary keeps, reading the fields at first use; t.mu is held. Values
// out of range (in a Top that New did not check) are brought into range.
func (t *Top) size() (k, minutes int) {
	if t.policies == nil {
		t.k = cmp.Or(max(0, min(t.Clients, maxTopClients)), defaultTopClients)
		t.minutes = cmp.Or(max(0, min(t.Minutes, maxTopMinutes)), defaultTopMinutes)
		t.policies = make(map[string][]minute)
	}
	return t.k, t.minutes
}

// limits returns size, taking the lock.
func (t *Top) limits() (k, minutes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size()
}

func (t *Top) clock() time.Time {
	if t.now == nil {
		return time.Now()
	}
	return t.now()
}

// minute is one minute's Space-Saving summary.
type minute struct {
	at      int64 // minutes since the Unix epoch; 0 when unused
	entries map[topKey]*counter
}

type topKey struct{ tier, identity string }

type counter struct{ count, err uint64 }

// topEntry is one client of a [Top.top] answer.
type topEntry struct {
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

// Record counts d for identity if d refused the request (a limit's
// refusal, a block, or a refusal a dry-run policy let through); other
// decisions, and those for suspended tiers, are ignored. d.Policy names
// the policy and the tier ("api/authenticated"), as the middleware sets it.
func (t *Top) Record(d limiter.Decision, identity string) {
	if d.Allowed || d.Capacity == 0 || d.Policy == "" || identity == "" {
		return
	}
	name, _, _ := strings.Cut(d.Policy, "/")
	t.record(name, topKey{d.Tier, identity})
}

func (t *Top) record(policy string, key topKey) {
	now := t.clock().Unix() / 60
	t.mu.Lock()
	defer t.mu.Unlock()
	k, minutes := t.size()
	ring := t.policies[policy]
	if ring == nil {
		ring = make([]minute, minutes)
		t.policies[policy] = ring
	}
	m := &ring[now%int64(minutes)]
	if m.at != now {
		m.at = now
		clear(m.entries)
		if m.entries == nil {
			m.entries = make(map[topKey]*counter, k)
		}
	}
	if c, ok := m.entries[key]; ok {
		c.count++
		return
	}
	if len(m.entries) < k {
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

// top returns up to n clients of policy with the most refusals over the
// last d (whole minutes, at most the Top's minutes; the current minute
// counts as one), most refused first, ties by tier and identity.
func (t *Top) top(policy string, d time.Duration, n int) []topEntry {
	now := t.clock().Unix() / 60
	sum := make(map[topKey]*counter)
	t.mu.Lock()
	_, minutes := t.size()
	span := max(1, min(int64(d/time.Minute), int64(minutes)))
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
	out := make([]topEntry, 0, len(sum))
	for k, c := range sum {
		out = append(out, topEntry{Tier: k.tier, Identity: k.identity, Count: c.count, Error: c.err})
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
