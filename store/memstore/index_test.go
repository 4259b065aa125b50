package memstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// checkIndex fails t unless ix holds exactly the records of want, each
// found by its key, in the segment its hash's directory entry names, and
// unless the directory and the segments keep their rules: 2^depth
// entries, each segment named by the 2^(depth-its depth) entries that
// agree on its depth's bits, no segment more than three quarters full.
func checkIndex(t *testing.T, ix *keyIndex, want map[string]*record, step int) {
	t.Helper()
	if ix.len() != len(want) {
		t.Fatalf("step %d: len %d, want %d", step, ix.len(), len(want))
	}
	if ix.dir != nil && len(ix.dir) != 1<<ix.depth {
		t.Fatalf("step %d: %d directory entries at depth %d", step, len(ix.dir), ix.depth)
	}
	named := map[*segment][]int{}
	for i, sg := range ix.dir {
		named[sg] = append(named[sg], i)
	}
	if len(named) != len(ix.segs) {
		t.Fatalf("step %d: the directory names %d segments, the index lists %d", step, len(named), len(ix.segs))
	}
	total := 0
	for _, sg := range ix.segs {
		entries := named[sg]
		if sg.depth > ix.depth || len(entries) != 1<<(ix.depth-sg.depth) {
			t.Fatalf("step %d: segment of depth %d named by %d of %d entries", step, sg.depth, len(entries), len(ix.dir))
		}
		low := uint64(1)<<sg.depth - 1
		for _, e := range entries {
			if uint64(e)&low != uint64(entries[0])&low {
				t.Fatalf("step %d: entries %d and %d name one segment of depth %d", step, entries[0], e, sg.depth)
			}
		}
		n := 0
		for _, sl := range sg.slots {
			if sl.r == nil {
				continue
			}
			n++
			if ix.segOf(sl.h) != sg || sl.h != sl.r.hash {
				t.Fatalf("step %d: %q in a segment its hash does not lead to", step, sl.r.key)
			}
		}
		if n != sg.n || len(sg.slots)&(len(sg.slots)-1) != 0 {
			t.Fatalf("step %d: segment counts %d records, holds %d, in %d slots", step, sg.n, n, len(sg.slots))
		}
		if sg.n*4 > len(sg.slots)*3 {
			t.Fatalf("step %d: %d records in %d slots, more than three in four", step, sg.n, len(sg.slots))
		}
		total += n
	}
	if total != ix.n {
		t.Fatalf("step %d: segments hold %d records, the index counts %d", step, total, ix.n)
	}
	for k, r := range want {
		if got := ix.get(k, r.hash); got != r {
			t.Fatalf("step %d: get(%q): got %p, want %p", step, k, got, r)
		}
	}
	seen := 0
	ix.each(func(r *record) {
		if want[r.key] != r {
			t.Fatalf("step %d: each gave %q, which is not held", step, r.key)
		}
		seen++
	})
	if seen != len(want) {
		t.Fatalf("step %d: each gave %d records, want %d", step, seen, len(want))
	}
}

// slotsOf returns the number of slots of ix's segments.
func slotsOf(ix *keyIndex) int {
	n := 0
	for _, sg := range ix.segs {
		n += len(sg.slots)
	}
	return n
}

// TestKeyIndex puts and deletes records at random and checks the index
// against a map after every step, shrinking it now and then as a sweep
// does. With a few hash values, runs of slots form, wrap round a
// segment's end and hold equal hashes of different keys; with hashes
// from keyHash over thousands of keys, segments split and the directory
// doubles.
func TestKeyIndex(t *testing.T) {
	for _, tc := range []struct {
		hashes, keys, steps, every int
	}{
		{3, 300, 20000, 1},
		{40, 300, 20000, 1},
		{0, 300, 20000, 1}, // 0: keyHash
		{0, 6000, 60000, 499},
	} {
		t.Run(fmt.Sprint("hashes=", tc.hashes, "/keys=", tc.keys), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.hashes+tc.keys)))
			var ix keyIndex
			want := map[string]*record{}
			deeper := false
			for step := range tc.steps {
				k := fmt.Sprint("k", rng.IntN(tc.keys))
				switch r := want[k]; {
				case r == nil:
					// Hashes near a power of two's end put homes in the last slots.
					r = &record{key: k, hash: uint64(rng.IntN(max(tc.hashes, 1))) - 2}
					if tc.hashes == 0 {
						r.hash = keyHash(9, k)
					}
					if ix.get(k, r.hash) != nil {
						t.Fatalf("step %d: get(%q) found a record before its put", step, k)
					}
					ix.put(r)
					want[k] = r
				// Mostly puts until the index holds half the keys.
				case len(want) < tc.keys/2 && rng.IntN(4) != 0:
				default:
					ix.del(r)
					delete(want, k)
					if ix.get(k, r.hash) != nil {
						t.Fatalf("step %d: get(%q) found a record after its del", step, k)
					}
				}
				if step%97 == 0 {
					ix.shrink()
				}
				deeper = deeper || ix.depth > 1
				if step%tc.every == 0 {
					checkIndex(t, &ix, want, step)
				}
			}
			checkIndex(t, &ix, want, tc.steps)
			if tc.keys > 2*segMax && !deeper {
				t.Fatalf("%d keys: the directory never passed depth 1", tc.keys)
			}
			for k, r := range want {
				ix.del(r)
				delete(want, k)
			}
			ix.shrink()
			checkIndex(t, &ix, want, -1)
			if ix.dir != nil || ix.segs != nil {
				t.Fatalf("empty index after shrink: %d entries, %d segments, want none", len(ix.dir), len(ix.segs))
			}
		})
	}
}

// TestKeyIndexAlikeHashes checks that records whose hashes agree on every
// bit that picks a directory entry, which no split can part, still go in:
// their segment grows past segMax once the directory is as deep as it may
// be.
func TestKeyIndexAlikeHashes(t *testing.T) {
	var ix keyIndex
	want := map[string]*record{}
	for i := range segMax {
		r := &record{key: fmt.Sprint(i), hash: uint64(i)} // dirBits 0
		ix.put(r)
		want[r.key] = r
	}
	checkIndex(t, &ix, want, 0)
	if ix.depth != maxDepth {
		t.Fatalf("depth %d, want %d", ix.depth, maxDepth)
	}
}

// TestKeyIndexDelAbsent checks that deleting a record the index does not
// hold changes nothing.
func TestKeyIndexDelAbsent(t *testing.T) {
	var ix keyIndex
	ix.del(&record{key: "x", hash: 1}) // empty
	a, b := &record{key: "a", hash: 5}, &record{key: "b", hash: 5}
	ix.put(a)
	ix.del(b)
	checkIndex(t, &ix, map[string]*record{"a": a}, 0)
}

// TestKeyIndexShrink checks that a sweep's shrink returns the memory of
// segments that have emptied, keeps what they hold, leaves them room to
// grow, and drops an empty index.
func TestKeyIndexShrink(t *testing.T) {
	var ix keyIndex
	want := map[string]*record{}
	for i := range 4096 {
		r := &record{key: fmt.Sprint(i), hash: keyHash(7, fmt.Sprint(i))}
		ix.put(r)
		want[r.key] = r
	}
	big := slotsOf(&ix)
	ix.shrink()
	if got := slotsOf(&ix); got != big {
		t.Fatalf("shrink of full segments: %d slots, want %d", got, big)
	}
	for k, r := range want {
		if len(want) == 100 {
			break
		}
		ix.del(r)
		delete(want, k)
	}
	ix.shrink()
	checkIndex(t, &ix, want, 0)
	for _, sg := range ix.segs {
		if len(sg.slots) > 8 && sg.n*4 < len(sg.slots) {
			t.Fatalf("after shrink: a segment of %d slots holds %d records, under a quarter", len(sg.slots), sg.n)
		}
	}
	for k, r := range want {
		ix.del(r)
		delete(want, k)
	}
	ix.shrink()
	if ix.dir != nil || ix.segs != nil || ix.n != 0 {
		t.Fatalf("empty index after shrink: %d entries, %d segments, want none", len(ix.dir), len(ix.segs))
	}
}

// TestSegmentShrink checks a segment's shrink at the edges of its rule:
// an eighth full is full enough; one record fewer is not, and it is then
// halved while under a quarter full.
func TestSegmentShrink(t *testing.T) {
	fill := func(n int) *segment {
		sg := &segment{slots: make([]slot, 256)}
		for i := range n {
			sg.place(slot{uint64(i * 11), &record{}})
			sg.n++
		}
		return sg
	}
	for _, tc := range []struct{ n, want int }{
		{32, 256}, // an eighth
		{31, 64},  // 128 would hold it under a quarter full
		{16, 64},  // a quarter of 64
		{15, 32},
		{1, 8}, // never under 8
		{0, 8},
	} {
		sg := fill(tc.n)
		sg.shrink()
		if len(sg.slots) != tc.want {
			t.Errorf("%d records in 256 slots: %d slots after shrink, want %d", tc.n, len(sg.slots), tc.want)
		}
	}
}

// TestKeyIndexSample checks that samples go round the whole index, every
// segment of it, and that records may be removed as they are sampled.
func TestKeyIndexSample(t *testing.T) {
	for _, n := range []int{100, 3000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var ix keyIndex
			want := map[string]*record{}
			for i := range n {
				r := &record{key: fmt.Sprint(i), hash: uint64(i % 7)} // long runs
				if n > segMax {
					r.hash = keyHash(3, r.key) // several segments
				}
				ix.put(r)
				want[r.key] = r
			}
			seen := map[*record]int{}
			for range 10 {
				ix.sample(n/10, func(r *record) bool {
					seen[r]++
					return false
				})
			}
			if len(seen) != n {
				t.Fatalf("ten samples of %d from %d records saw %d of them, want all", n/10, n, len(seen))
			}
			for r, k := range seen {
				if k != 1 {
					t.Fatalf("record %q seen %d times in one round, want once", r.key, k)
				}
			}
			// Remove every record in samples.
			offered := map[*record]bool{}
			for ix.len() > 0 {
				before := ix.len()
				ix.sample(7, func(r *record) bool {
					offered[r] = true
					ix.del(r)
					delete(want, r.key)
					return true
				})
				if ix.len() == before {
					t.Fatalf("a sample of an index holding %d records offered none", before)
				}
				checkIndex(t, &ix, want, 0)
			}
			if len(offered) != n {
				t.Fatalf("%d records offered, want %d", len(offered), n)
			}
		})
	}
}

// TestKeyIndexSampleAfterRemoval checks that when a sample removes a
// record, the record that moves back into its slot is the next offered.
func TestKeyIndexSampleAfterRemoval(t *testing.T) {
	var ix keyIndex
	a, b, c := &record{key: "a", hash: 3}, &record{key: "b", hash: 3}, &record{key: "c", hash: 3}
	for _, r := range []*record{a, b, c} {
		ix.put(r) // slots 3, 4 and 5 of 8
	}
	ix.next = 3
	var offered []string
	ix.sample(2, func(r *record) bool {
		offered = append(offered, r.key)
		if r == a {
			ix.del(r) // b moves back to slot 3, c to 4
			return true
		}
		return false
	})
	if len(offered) != 2 || offered[0] != "a" || offered[1] != "b" {
		t.Fatalf("offered %q, want [a b]", offered)
	}
	checkIndex(t, &ix, map[string]*record{"b": b, "c": c}, 0)
}

// BenchmarkIndexPut puts a million records into an index that starts
// empty and reports, besides the time per put, the longest single put
// seen (max-put-µs): the pause a growing shard makes under its lock, at
// most a segment's split, but also any pause of the garbage collector or
// the machine (run with GOGC=off to see less of those).
func BenchmarkIndexPut(b *testing.B) {
	recs := make([]record, 1<<20)
	for i := range recs {
		recs[i].key = fmt.Sprint("203.", i>>16, ".", i>>8&255, ".", i&255)
		recs[i].hash = keyHash(1, recs[i].key)
	}
	var worst time.Duration
	for b.Loop() {
		var ix keyIndex
		for i := range recs {
			t0 := time.Now()
			ix.put(&recs[i])
			worst = max(worst, time.Since(t0))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/put")
	b.ReportMetric(float64(worst.Nanoseconds())/1e3, "max-put-µs")
}
