package memstore

// keyIndex finds a shard's records by key. It is an open-addressing table
// with linear probing whose slots hold a record beside its key's hash
// (keyHash, which the shard's Take has computed already): a lookup reads
// a slot, compares hashes, and reads the key only of a record whose hash
// matches, which is the record it is looking for but once in 2^64. Over
// many keys, a Go map would hash the key again and read a group's control
// word and then its slot, one more cache line per lookup, about a tenth
// of an in-process decision when the record is not in the cache.
//
// The table holds at most three slots in four; a deletion moves the
// slots after it back (no tombstones), so a lookup stops at the first
// empty slot. Sweeps shrink it (see shrink).
type keyIndex struct {
	slots []slot // len is zero or a power of two
	n     int    // records held
	next  int    // the slot where sample starts next
}

// slot is a record and the hash of its key; an empty slot has r nil.
type slot struct {
	h uint64
	r *record
}

// len returns the number of records in ix.
func (ix *keyIndex) len() int { return ix.n }

// get returns the record of key, whose hash is h, or nil.
func (ix *keyIndex) get(key string, h uint64) *record {
	if ix.n == 0 {
		return nil
	}
	mask := uint64(len(ix.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &ix.slots[i]
		if s.r == nil {
			return nil
		}
		if s.h == h && s.r.key == key {
			return s.r
		}
	}
}

// put adds r, whose key (with its hash in r.hash) no record in ix has.
func (ix *keyIndex) put(r *record) {
	if (ix.n+1)*4 > len(ix.slots)*3 {
		ix.resize(max(8, 2*len(ix.slots)))
	}
	ix.place(slot{r.hash, r})
	ix.n++
}

// place puts s in the first empty slot from its hash's.
func (ix *keyIndex) place(s slot) {
	mask := uint64(len(ix.slots) - 1)
	i := s.h & mask
	for ix.slots[i].r != nil {
		i = (i + 1) & mask
	}
	ix.slots[i] = s
}

// del removes r from ix; it does nothing when r is not there.
func (ix *keyIndex) del(r *record) {
	if ix.n == 0 {
		return
	}
	mask := uint64(len(ix.slots) - 1)
	i := r.hash & mask
	for ix.slots[i].r != r {
		if ix.slots[i].r == nil {
			return
		}
		i = (i + 1) & mask
	}
	// Move back each following slot that a lookup would no longer reach
	// across the emptied one: a slot whose home (its hash's position)
	// lies cyclically outside (i, j].
	for j := (i + 1) & mask; ix.slots[j].r != nil; j = (j + 1) & mask {
		home := ix.slots[j].h & mask
		if (j-home)&mask >= (j-i)&mask {
			ix.slots[i] = ix.slots[j]
			i = j
		}
	}
	ix.slots[i] = slot{}
	ix.n--
}

// resize moves every record to a table of size slots, a power of two
// larger than ix.n*4/3 (zero when ix is empty).
func (ix *keyIndex) resize(size int) {
	old := ix.slots
	ix.slots, ix.next = nil, 0
	if size > 0 {
		ix.slots = make([]slot, size)
	}
	for _, s := range old {
		if s.r != nil {
			ix.place(s)
		}
	}
}

// shrink returns memory after many deletions: a table less than an
// eighth full is halved until it is at least a quarter full (an empty one
// is dropped), so that the next insertions do not grow it straight away.
func (ix *keyIndex) shrink() {
	size := len(ix.slots)
	if ix.n*8 >= size || size <= 8 && ix.n > 0 {
		return
	}
	for size > 8 && ix.n*4 < size {
		size /= 2
	}
	if ix.n == 0 {
		size = 0
	}
	ix.resize(size)
}

// each calls f with every record of ix, which f must not add or remove.
func (ix *keyIndex) each(f func(r *record)) {
	for _, s := range ix.slots {
		if s.r != nil {
			f(s.r)
		}
	}
}

// sample calls f with up to n records, starting where the last sample
// stopped, so that successive samples go round the whole table. f may
// remove the record it is given (and no other), and reports whether it
// did.
func (ix *keyIndex) sample(n int, f func(r *record) (removed bool)) {
	if len(ix.slots) == 0 {
		return
	}
	mask := len(ix.slots) - 1
	i := ix.next & mask
	// A removal moves a later slot into the one just visited, which is
	// then visited again; steps bounds the walk all the same.
	for steps := len(ix.slots); n > 0 && steps > 0; steps-- {
		r := ix.slots[i].r
		if r == nil {
			i = (i + 1) & mask
			continue
		}
		n--
		if !f(r) {
			i = (i + 1) & mask
		}
	}
	ix.next = i
}
