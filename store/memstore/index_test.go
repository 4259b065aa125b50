package memstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkIndex fails t unless ix holds exactly the records of want, each
// found by its key from its hash's slot, within three slots in four.
func checkIndex(t *testing.T, ix *keyIndex, want map[string]*record, step int) {
	t.Helper()
	if ix.len() != len(want) {
		t.Fatalf("step %d: len %d, want %d", step, ix.len(), len(want))
	}
	if ix.n*4 > len(ix.slots)*3 {
		t.Fatalf("step %d: %d records in %d slots, more than three in four", step, ix.n, len(ix.slots))
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

// TestKeyIndex puts and deletes records at random, their hashes drawn
// from a few values so that runs of slots form, wrap round the table's
// end and hold equal hashes of different keys, and checks the index
// against a map after every step, shrinking it now and then as a sweep
// does.
func TestKeyIndex(t *testing.T) {
	for _, hashes := range []int{3, 40, 1 << 30} {
		t.Run(fmt.Sprint("hashes=", hashes), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(hashes)))
			var ix keyIndex
			want := map[string]*record{}
			for step := range 20000 {
				k := fmt.Sprint("k", rng.IntN(300))
				switch r := want[k]; {
				case r == nil:
					// Hashes near a power of two's end put homes in the last slots.
					r = &record{key: k, hash: uint64(rng.IntN(hashes)) - 2}
					if ix.get(k, r.hash) != nil {
						t.Fatalf("step %d: get(%q) found a record before its put", step, k)
					}
					ix.put(r)
					want[k] = r
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
				checkIndex(t, &ix, want, step)
			}
			for k, r := range want {
				ix.del(r)
				delete(want, k)
			}
			ix.shrink()
			checkIndex(t, &ix, want, -1)
			if len(ix.slots) != 0 {
				t.Fatalf("empty index after shrink: %d slots, want none", len(ix.slots))
			}
		})
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

// TestKeyIndexShrink checks that a sweep's shrink returns the memory of a
// table that has emptied, keeps what it holds, and leaves room to grow.
func TestKeyIndexShrink(t *testing.T) {
	var ix keyIndex
	want := map[string]*record{}
	for i := range 4096 {
		r := &record{key: fmt.Sprint(i), hash: keyHash(7, fmt.Sprint(i))}
		ix.put(r)
		want[r.key] = r
	}
	big := len(ix.slots)
	ix.shrink()
	if len(ix.slots) != big {
		t.Fatalf("shrink of a full table: %d slots, want %d", len(ix.slots), big)
	}
	for k, r := range want {
		if len(want) == 100 {
			break
		}
		ix.del(r)
		delete(want, k)
	}
	ix.shrink()
	if n := len(ix.slots); n > 512 || n < 4*100/3 {
		t.Fatalf("shrink with 100 of 4096 records left: %d slots, want at most 512 and room for them", n)
	}
	checkIndex(t, &ix, want, 0)
}

// TestKeyIndexSample checks that samples go round the whole table, that
// a sampled record may be removed, and that a removal does not make the
// sample skip the record moved into its slot.
func TestKeyIndexSample(t *testing.T) {
	var ix keyIndex
	want := map[string]*record{}
	for i := range 100 {
		r := &record{key: fmt.Sprint(i), hash: uint64(i % 7)} // long runs
		ix.put(r)
		want[r.key] = r
	}
	seen := map[*record]int{}
	for range 10 {
		ix.sample(10, func(r *record) bool {
			seen[r]++
			return false
		})
	}
	if len(seen) != 100 {
		t.Fatalf("ten samples of 10 from 100 records saw %d of them, want all", len(seen))
	}
	// Remove every record in samples: each is offered once, none twice.
	offered := map[*record]int{}
	for ix.len() > 0 {
		before := ix.len()
		ix.sample(7, func(r *record) bool {
			offered[r]++
			ix.del(r)
			delete(want, r.key)
			return true
		})
		if ix.len() == before {
			t.Fatalf("a sample of a table holding %d records offered none", before)
		}
		checkIndex(t, &ix, want, 0)
	}
	for r, n := range offered {
		if n != 1 {
			t.Fatalf("record %q offered %d times, want once", r.key, n)
		}
	}
	if len(offered) != 100 {
		t.Fatalf("%d records offered, want 100", len(offered))
	}
}
