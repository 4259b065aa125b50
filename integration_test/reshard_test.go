package integration

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

const (
	// reshardWorkers is how many goroutines make decisions during the
	// migrations.
	reshardWorkers = 4
	// reshardFillers is how many other keys share the busy key's slot, so
	// that moving the slot takes many MIGRATE batches and the busy key's
	// state keys travel in different batches.
	reshardFillers = 3000
	// reshardBatch is how many keys one MIGRATE moves.
	reshardBatch = 10
	// reshardPause separates MIGRATE batches, stretching the migration
	// over a second or so, as a throttled resharding tool would.
	reshardPause = 2 * time.Millisecond
	// reshardMaxDegraded is the largest share of decisions that may fail
	// while the slot moves: 0.1 %.
	reshardMaxDegraded = 0.001
	// reshardBudget is each decision's time budget (redisstore Timeout).
	reshardBudget = 250 * time.Millisecond
	// reshardSmall is the capacity of the small limit, whose admissions
	// are counted exactly.
	reshardSmall = 50
	// reshardBig is the capacity of the busy key's limits: never reached,
	// so every decision is admitted and records one unit.
	reshardBig = 1_000_000
)

// TestReshardUnderLoad moves the hash slot of a busy client key from one
// master of a three-master cluster to another and back while four
// goroutines make decisions for keys in that slot, through a
// ClusterClient with go-redis's default options and a store with the
// default budget (50 ms). The migration is done as redis-cli --cluster
// reshard does it: CLUSTER SETSLOT IMPORTING on the target, MIGRATING on
// the source, MIGRATE ... KEYS in batches of the keys CLUSTER
// GETKEYSINSLOT lists (3,000 other keys share the slot, so that the move
// takes most of a second), then CLUSTER SETSLOT NODE on every master.
// Meanwhile Redis answers ASK and, after the move, MOVED: both mean the
// script did not run, so the store follows them within the budget. A
// decision naming several keys also meets TRYAGAIN (its keys are not all
// on one node, or some exist nowhere), which the store resolves on the
// target with placeholders (package redisstore, "Slot migration").
//
// Two keys share the slot: a busy key whose limits (capacity 10⁶,
// refilling a thousand units a day, under one during the test) admit every
// decision, and a small key of capacity 50 whose decisions start once the
// slot is first migrating, with no state on either node. It checks that the limits stay exact across the
// migrations: no two admissions of the busy key report the same remaining
// count (no decision lost or run twice), its state afterwards shows one
// unit per admission, and the small key admits at most 50 (exactly 50
// when nothing failed). In every case at most 0.1 % of the decisions sent
// to Redis (refusals answered by the deny cache left out) may fail:
//
//   - one-limit: the request the middleware sends for a plain policy, one
//     key per decision.
//   - two-limits: two state keys per decision.
//   - block: one blocking, escalating limit: the decision names the block
//     key and the strike counter, which exist only once a block started
//     (the small key's block starts during the first migration).
//   - overrides: requests that read the key's override; the busy key has
//     one (a scale of 2), the small key none, so its override key exists
//     nowhere.
//   - dedup: every take carries a new de-duplication id, and names the
//     key's de-duplication hash.
//   - fresh-clients: three decisions in four are for a client key seen
//     for the first time (thousands of them in the slot), each with a
//     blocking limit and a second one; the others repeat a client of the
//     same goroutine. Every client's admissions must report distinct
//     remaining counts and its state must show one unit per admission.
func TestReshardUnderLoad(t *testing.T) {
	cluster := startCluster(t, clusterSpec{masters: 3})
	cc := cluster.client(t)

	big := store.Limit{Name: "a", Algorithm: store.TokenBucket, Rate: 1000, Period: 24 * time.Hour, Burst: reshardBig}
	small := store.Limit{Name: "a", Algorithm: store.TokenBucket, Rate: 1000, Period: 24 * time.Hour, Burst: reshardSmall}
	second := store.Limit{Name: "b", Algorithm: store.TokenBucket, Rate: 1000, Period: 24 * time.Hour, Burst: reshardBig}
	blocking := func(l store.Limit) store.Limit {
		l.Block, l.BlockMax = time.Hour, 4*time.Hour
		return l
	}
	one := func(limits ...store.Limit) store.Request { return store.Request{Limits: limits} }
	withOverrides := func(r store.Request) store.Request {
		r.ApplyOverride = true
		return r
	}
	cases := []reshardCase{
		{name: "one-limit", busy: one(big), small: one(small)},
		{name: "two-limits", busy: one(big, second), small: one(small, second)},
		{name: "block", busy: one(blocking(big)), small: one(blocking(small))},
		{
			name: "overrides", busy: withOverrides(one(big)), small: withOverrides(one(small)),
			override: &store.Override{Kind: store.OverrideScale, Scale: 2, TTL: 10 * time.Minute}, busyCap: 2 * reshardBig,
		},
		{name: "dedup", busy: one(big), small: one(small), dedup: true},
		{name: "fresh-clients", busy: one(blocking(big), second), small: one(blocking(small), second), fresh: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := reshard(t, cluster, cc, tc)
			if r.share() > reshardMaxDegraded {
				t.Errorf("got %d of %d decisions failed (%.3f %%) during the migrations, want at most %.1f %%", r.failed, r.sent, 100*r.share(), 100*reshardMaxDegraded)
			}
		})
	}
}

// reshardCase is one TestReshardUnderLoad case.
type reshardCase struct {
	name string
	// busy and small are the requests of the busy and the small key,
	// without their Key; the first limit of small holds reshardSmall
	// units.
	busy, small store.Request
	// override, when set, is set on the busy key before the traffic.
	override *store.Override
	// busyCap is the capacity of the busy key's first limit as its
	// decisions see it (under the override); 0 means reshardBig.
	busyCap int64
	// dedup gives every take a new de-duplication id.
	dedup bool
	// fresh makes three decisions in four, in place of the busy key's,
	// for a client key never used before.
	fresh bool
}

// reshardResult is what reshard measured.
type reshardResult struct {
	sent, failed int            // decisions sent to Redis, and failed
	failures     map[string]int // failed decisions by kind and message
}

func (r reshardResult) share() float64 { return float64(r.failed) / float64(r.sent) }

// reshardFresh is how many client keys the fresh-clients case prepares:
// more than its goroutines make decisions during the migrations.
const reshardFresh = 12000

// clientTally is what one client key's decisions saw.
type clientTally struct {
	admitted, failed int
	remaining        map[int64]int // per admission
}

// reshard runs one TestReshardUnderLoad case: a busy client key and a
// small one in the same slot (with fresh, also many other client keys)
// while the slot moves from its master to another and back.
func reshard(t *testing.T, cluster *testCluster, cc *redis.ClusterClient, tc reshardCase) reshardResult {
	t.Helper()
	prefix := randomPrefix(t)
	// A budget of reshardBudget rather than the default 50 ms: three
	// masters, the resharding and the race detector share two cores here,
	// and a decision that runs out of time while the machine stalls is not
	// a decision the migration failed. What is counted is every failure,
	// timeouts included.
	s := newStoreWith(t, cc, redisstore.Options{Prefix: prefix, Timeout: reshardBudget})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	busyCap := tc.busyCap
	if busyCap == 0 {
		busyCap = reshardBig
	}

	busy := tc.busy
	busy.Key = "reshard-busy-" + t.Name()
	slot := int(keySlot(hashTag(t, s, busy.Key)))
	small := tc.small
	small.Key = sameSlotKey(t, s, "reshard-small", slot)
	var fresh []string
	if tc.fresh {
		fresh = slotKeys(t, "reshard-fresh", slot, reshardFresh)
	}
	reqs := []store.Request{busy, small}
	for _, k := range fresh[:min(len(fresh), 3)] {
		req := busy
		req.Key = k
		reqs = append(reqs, req)
	}
	for _, req := range reqs {
		keys, err := s.StateKeys(req)
		if err != nil {
			t.Fatalf("StateKeys: %v", err)
		}
		for _, k := range keys {
			if got, err := cc.ClusterKeySlot(ctx, k).Result(); err != nil || int(got) != slot {
				t.Fatalf("CLUSTER KEYSLOT %q: got %d, %v, want %d", k, got, err, slot)
			}
		}
	}
	if tc.override != nil {
		if err := s.SetOverride(ctx, busy.Key, *tc.override); err != nil {
			t.Fatalf("SetOverride: %v", err)
		}
	}

	m := newMigrator(ctx, t, cluster, slot)
	fill := cc.Pipeline()
	for i := range reshardFillers {
		k := prefix + ":{" + hashTag(t, s, busy.Key) + "}:fill:" + strconv.Itoa(i)
		fill.Set(ctx, k, "x", 10*time.Minute)
	}
	if _, err := fill.Exec(ctx); err != nil {
		t.Fatalf("write %d filler keys: %v", reshardFillers, err)
	}

	var (
		stop, smallOn atomic.Bool
		nextFresh     atomic.Int64
		wg            sync.WaitGroup
		mu            sync.Mutex
		r             = reshardResult{failures: map[string]int{}}
		total, cached int
		remaining     = map[int64]int{} // of the busy key, per admission
		busyAdmitted  int
		smallAdmitted int
		clients       = map[string]*clientTally{} // fresh client keys used
	)
	for w := range reshardWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for i := 0; !stop.Load(); i++ {
				req := busy
				switch {
				case (w+i)%2 == 1 && smallOn.Load():
					req = small
				case tc.fresh && (i%4 != 0 || last == ""):
					last = fresh[int(nextFresh.Add(1)-1)%len(fresh)]
					req.Key = last
				case tc.fresh:
					req.Key = last
				}
				if tc.dedup {
					req.DedupID = "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				}
				d, err := s.Take(ctx, req)
				mu.Lock()
				total++
				if d.Cached {
					cached++
				} else {
					r.sent++
				}
				var ct *clientTally
				if req.Key != busy.Key && req.Key != small.Key {
					if ct = clients[req.Key]; ct == nil {
						ct = &clientTally{remaining: map[int64]int{}}
						clients[req.Key] = ct
					}
				}
				switch {
				case err != nil:
					r.failed++
					if ct != nil {
						ct.failed++
					}
					msg := err.Error()
					if len(msg) > 120 {
						msg = msg[:120]
					}
					r.failures[store.KindOf(err)+": "+msg]++
				case d.Duplicate:
					t.Errorf("%s: a new de-duplication id admitted as a duplicate: %+v", req.Key, d)
				case req.Key == small.Key:
					if d.Allowed {
						smallAdmitted++
					}
				case !d.Allowed:
					t.Errorf("%s refused: %+v", req.Key, d)
				case ct != nil:
					ct.admitted++
					ct.remaining[d.Remaining]++
				default:
					busyAdmitted++
					remaining[d.Remaining]++
				}
				mu.Unlock()
			}
		}()
	}

	time.Sleep(200 * time.Millisecond) // traffic before the first migration
	from, to := m.owner, m.other()
	for round := range 2 {
		start := time.Now()
		// The small key's first decision comes once the slot is
		// migrating: it has no state on either node.
		n := m.move(t, from, to, func() { smallOn.Store(true) })
		t.Logf("migration %d: %d keys moved from %s to %s in %s", round+1, n, from.addr, to.addr, time.Since(start).Round(time.Millisecond))
		from, to = to, from
		time.Sleep(200 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()

	var kinds []string
	for k, n := range r.failures {
		kinds = append(kinds, fmt.Sprintf("%d × %s", n, k))
	}
	sort.Strings(kinds)
	t.Logf("%d decisions, %d answered by the deny cache, %d sent to Redis of which %d failed (%.3f %%); busy key admitted %d, small key %d of %d, %d other client keys; failures: %s",
		total, cached, r.sent, r.failed, 100*r.share(), busyAdmitted, smallAdmitted, reshardSmall, len(clients), strings.Join(kinds, "; "))

	if smallAdmitted > reshardSmall || (r.failed == 0 && smallAdmitted != reshardSmall) {
		t.Errorf("small key: got %d admitted with %d failed decisions, want %d (at most %d)", smallAdmitted, r.failed, reshardSmall, reshardSmall)
	}
	for rem, n := range remaining {
		if n > 1 {
			t.Errorf("busy key: %d admissions reported remaining %d, want one each: a decision was lost or ran twice", n, rem)
		}
	}
	// Peek reports what a take would leave, one unit less than the state
	// holds. A failed decision may have run (a timeout after sending), so
	// with failures the state may show up to that many more units.
	wantUsed(ctx, t, s, busy, busyCap, busyAdmitted, r.failed)
	for key, ct := range clients {
		for rem, n := range ct.remaining {
			if n > 1 {
				t.Errorf("client %s: %d admissions reported remaining %d, want one each: a decision was lost or ran twice", key, n, rem)
			}
		}
		req := busy
		req.Key = key
		wantUsed(ctx, t, s, req, reshardBig, ct.admitted, ct.failed)
	}
	if r.sent < 1000 {
		t.Errorf("got %d decisions sent to Redis, want at least 1000 to measure 0.1 %%", r.sent)
	}
	return r
}

// wantUsed fails unless req's key shows admitted units used in its first
// limit of capacity cp, or up to failed more (a failed decision may have
// run: a timeout after sending).
func wantUsed(ctx context.Context, t *testing.T, s redisStore, req store.Request, cp int64, admitted, failed int) {
	t.Helper()
	req.DedupID = ""
	d, err := s.Peek(ctx, req)
	if err != nil {
		t.Fatalf("%s: Peek after the migrations: %v", req.Key, err)
	}
	used := cp - d.Remaining - 1
	if used < int64(admitted) || used > int64(admitted+failed) {
		t.Errorf("%s after the migrations: got %d units used, want %d admitted (+ at most %d failed)", req.Key, used, admitted, failed)
	}
}

// migrator moves one slot between the masters of a testCluster.
type migrator struct {
	ctx   context.Context
	slot  int
	nodes []*reshardNode
	owner *reshardNode // the master serving the slot now
}

// reshardNode is one master of a migrator, with an admin client.
type reshardNode struct {
	addr string
	port int
	id   string
	c    *redis.Client
}

func newMigrator(ctx context.Context, t *testing.T, tc *testCluster, slot int) *migrator {
	t.Helper()
	m := &migrator{ctx: ctx, slot: slot}
	for _, p := range tc.nodes {
		c := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("%s: CLUSTER MYID: %v", p.addr, err)
		}
		n := &reshardNode{addr: p.addr, port: p.port, id: id, c: c}
		m.nodes = append(m.nodes, n)
	}
	text, err := m.nodes[0].c.ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER NODES: %v", err)
	}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		for _, r := range f[min(len(f), 8):] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || slot < a || slot > b {
				continue
			}
			for _, n := range m.nodes {
				if n.id == f[0] {
					m.owner = n
				}
			}
		}
	}
	if m.owner == nil {
		t.Fatalf("slot %d: no owner in CLUSTER NODES:\n%s", slot, text)
	}
	return m
}

// other returns a master that does not serve the slot.
func (m *migrator) other() *reshardNode {
	for _, n := range m.nodes {
		if n != m.owner {
			return n
		}
	}
	return nil
}

// move migrates the slot with its keys from one master to another and
// returns how many keys it moved. It calls migrating once both nodes are
// in their migration states, before any key moves.
func (m *migrator) move(t *testing.T, from, to *reshardNode, migrating func()) int {
	t.Helper()
	ctx := m.ctx
	if err := to.c.Do(ctx, "CLUSTER", "SETSLOT", m.slot, "IMPORTING", from.id).Err(); err != nil {
		t.Fatalf("%s: CLUSTER SETSLOT %d IMPORTING: %v", to.addr, m.slot, err)
	}
	if err := from.c.Do(ctx, "CLUSTER", "SETSLOT", m.slot, "MIGRATING", to.id).Err(); err != nil {
		t.Fatalf("%s: CLUSTER SETSLOT %d MIGRATING: %v", from.addr, m.slot, err)
	}
	migrating()
	// Let the decisions meet the slot in its migration states before
	// keys move.
	time.Sleep(20 * time.Millisecond)
	moved := 0
	for {
		keys, err := from.c.ClusterGetKeysInSlot(ctx, m.slot, reshardBatch).Result()
		if err != nil {
			t.Fatalf("%s: CLUSTER GETKEYSINSLOT %d: %v", from.addr, m.slot, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := from.c.Do(ctx, args...).Err(); err != nil && err.Error() != "NOKEY" {
			t.Fatalf("%s: MIGRATE %d keys to %s: %v", from.addr, len(keys), to.addr, err)
		}
		moved += len(keys)
		time.Sleep(reshardPause)
	}
	// The target first, so that it serves the slot before the source
	// redirects there; then the source and every other master.
	order := []*reshardNode{to, from}
	for _, n := range m.nodes {
		if n != to && n != from {
			order = append(order, n)
		}
	}
	for _, n := range order {
		if err := n.c.Do(ctx, "CLUSTER", "SETSLOT", m.slot, "NODE", to.id).Err(); err != nil {
			t.Fatalf("%s: CLUSTER SETSLOT %d NODE %s: %v", n.addr, m.slot, to.addr, err)
		}
	}
	if n, err := from.c.ClusterCountKeysInSlot(ctx, m.slot).Result(); err != nil || n != 0 {
		t.Fatalf("%s after the migration: got %d keys in slot %d, %v, want 0", from.addr, n, m.slot, err)
	}
	m.owner = to
	return moved
}

// sameSlotKey returns the first client key base, base-1, base-2, ... whose
// hash tag in s hashes to slot.
func sameSlotKey(t *testing.T, s redisStore, base string, slot int) string {
	t.Helper()
	for i := range 1 << 22 {
		k := base + "-" + strconv.Itoa(i)
		if int(keySlot(hashTag(t, s, k))) == slot {
			return k
		}
	}
	t.Fatalf("no key %s-N hashes to slot %d", base, slot)
	return ""
}

// keySlot returns the Redis Cluster hash slot of a key without hash tag:
// CRC16 (XMODEM) modulo 16384.
func keySlot(key string) uint16 {
	return crc16(0, key) % clusterSlots
}

// crc16 continues the CRC16 (XMODEM) crc over s.
func crc16(crc uint16, s string) uint16 {
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

// crc16Table holds the CRC16 (XMODEM, polynomial 0x1021) of each byte.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// slotKeys returns n client keys "<base>-<i>-<two letters>" whose encoded
// form (the key itself: only safe characters) hashes to slot: for each i
// the two letters are searched, from the CRC of the rest.
func slotKeys(t *testing.T, base string, slot, n int) []string {
	t.Helper()
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	keys := make([]string, 0, n)
	for i := 0; len(keys) < n; i++ {
		head := base + "-" + strconv.Itoa(i) + "-"
		crc := crc16(0, head)
	search:
		for a := 0; a < len(letters); a++ {
			ca := crc16(crc, letters[a:a+1])
			for b := 0; b < len(letters); b++ {
				if int(crc16(ca, letters[b:b+1])%clusterSlots) == slot {
					keys = append(keys, head+letters[a:a+1]+letters[b:b+1])
					break search
				}
			}
		}
		if i > 100*n {
			t.Fatalf("found %d of %d keys %s-N-xx in slot %d", len(keys), n, base, slot)
		}
	}
	return keys
}
