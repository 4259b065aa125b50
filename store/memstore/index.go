package memstore

// keyIndex finds a shard's records by key. Its slots hold a record beside
// its key's hash (keyHash, which the shard's Take has computed already):
// a lookup reads a slot, compares hashes, and reads the key only of a
// record whose hash matches, which is the record it is looking for but
// once in 2^64. Over many keys, a Go map would hash the key again and
// read a group's control word and then its slot, one more cache line per
// lookup, about a tenth of an in-process decision when the record is not
// in the cache.
//
// The slots are split into segments, as a Go map's are, so that growth
// never moves more than one segment's records at once, under the shard's
// lock: bits of the hash above a segment's slot bits pick a directory
// entry, which names a segment (extendible hashing). A segment is an
// open-addressing table with linear probing, at most three slots in four
// used; a deletion moves the slots after it back (no tombstones), so a
// lookup stops at the first empty slot. A segment that would pass three
// quarters doubles up to segMax slots, then splits in two by one more bit
// of the hash, the directory doubling when that bit is new to it. Sweeps
// shrink sparse segments and drop an empty index (see shrink).
type keyIndex struct {
	// root is the first segment, held here so that the lookups of a
	// shard of up to some 768 keys (a store of up to some 49,000 over 64
	// shards), when depth is 0, read no directory entry: only root's
	// slots.
	root  segment
	depth uint
	dir   []*segment // 1<<depth entries, by dirBits; a segment may fill several
	segs  []*segment // each segment once, in the order they were made
	n     int        // records held
	cur   int        // the segment in segs where sample starts next
	next  int        // and the slot in it
}

// segment is one open-addressing table of a keyIndex. Its records agree
// on the low depth bits of dirBits, which the directory entries naming it
// have.
type segment struct {
	slots []slot // len is a power of two
	n     int
	depth uint
}

// slot is a record and the hash of its key; an empty slot has r nil.
type slot struct {
	h uint64
	r *record
}

const (
	// segMax is the size a segment splits at rather than grow: a split
	// moves at most three quarters of it, some 768 records.
	segMax = 1024
	// dirShift is where the bits of a hash that pick a directory entry
	// start: above every slot bit of a segment of segMax slots, and far
	// below the top bits that picked the shard.
	dirShift = 10
	// maxDepth caps the directory at 2^20 entries (8 MB); segments whose
	// hashes agree on that many bits, which keyHash makes vanishingly
	// rare, grow past segMax instead of splitting.
	maxDepth = 20
)

// dirBits returns the bits of h that pick its directory entry.
func dirBits(h uint64) uint64 { return h >> dirShift }

// len returns the number of records in ix.
func (ix *keyIndex) len() int { return ix.n }

// segOf returns the segment that holds, or would hold, hash h.
func (ix *keyIndex) segOf(h uint64) *segment {
	if ix.depth == 0 {
		return &ix.root
	}
	return ix.dir[dirBits(h)&(1<<ix.depth-1)]
}

// get returns the record of key, whose hash is h, or nil.
func (ix *keyIndex) get(key string, h uint64) *record {
	if ix.n == 0 {
		return nil
	}
	sg := ix.segOf(h)
	mask := uint64(len(sg.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &sg.slots[i]
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
	if ix.dir == nil {
		ix.root = segment{slots: make([]slot, 8)}
		ix.dir, ix.segs = []*segment{&ix.root}, []*segment{&ix.root}
	}
	sg := ix.segOf(r.hash)
	for (sg.n+1)*4 > len(sg.slots)*3 {
		if len(sg.slots) < segMax || sg.depth >= maxDepth {
			sg.resize(2 * len(sg.slots))
		} else {
			ix.split(sg)
			sg = ix.segOf(r.hash)
		}
	}
	sg.place(slot{r.hash, r})
	sg.n++
	ix.n++
}

// split moves the records of sg whose hash has bit sg.depth of dirBits set
// to a new segment, which the directory entries with that bit then name,
// doubling the directory first when sg's depth is the directory's.
func (ix *keyIndex) split(sg *segment) {
	if sg.depth == ix.depth {
		dir := make([]*segment, 2*len(ix.dir))
		copy(dir, ix.dir)
		copy(dir[len(ix.dir):], ix.dir)
		ix.dir = dir
		ix.depth++
	}
	bit := uint64(1) << sg.depth
	hi := &segment{slots: make([]slot, len(sg.slots)), depth: sg.depth + 1}
	old := sg.slots
	sg.slots, sg.n = make([]slot, len(old)), 0
	sg.depth++
	for _, s := range old {
		switch {
		case s.r == nil:
		case dirBits(s.h)&bit != 0:
			hi.place(s)
			hi.n++
		default:
			sg.place(s)
			sg.n++
		}
	}
	// The entries that named sg agree on its old depth's bits; those with
	// the new bit set now name hi.
	for i := range ix.dir {
		if ix.dir[i] == sg && uint64(i)&bit != 0 {
			ix.dir[i] = hi
		}
	}
	ix.segs = append(ix.segs, hi)
}

// place puts s in the first empty slot from its hash's.
func (sg *segment) place(s slot) {
	mask := uint64(len(sg.slots) - 1)
	i := s.h & mask
	for sg.slots[i].r != nil {
		i = (i + 1) & mask
	}
	sg.slots[i] = s
}

// resize moves sg's records to a table of size slots, a power of two
// larger than sg.n*4/3.
func (sg *segment) resize(size int) {
	old := sg.slots
	sg.slots = make([]slot, size)
	for _, s := range old {
		if s.r != nil {
			sg.place(s)
		}
	}
}

// del removes r from ix; it does nothing when r is not there.
func (ix *keyIndex) del(r *record) {
	if ix.n == 0 {
		return
	}
	sg := ix.segOf(r.hash)
	mask := uint64(len(sg.slots) - 1)
	i := r.hash & mask
	for sg.slots[i].r != r {
		if sg.slots[i].r == nil {
			return
		}
		i = (i + 1) & mask
	}
	// Move back each following slot that a lookup would no longer reach
	// across the emptied one: a slot whose home (its hash's position)
	// lies cyclically outside (i, j].
	for j := (i + 1) & mask; sg.slots[j].r != nil; j = (j + 1) & mask {
		home := sg.slots[j].h & mask
		if (j-home)&mask >= (j-i)&mask {
			sg.slots[i] = sg.slots[j]
			i = j
		}
	}
	sg.slots[i] = slot{}
	sg.n--
	ix.n--
}

// shrink returns memory after many deletions: it drops an empty index,
// and shrinks every segment less than an eighth full (see
// segment.shrink). Segments are not merged: a shard that once held many
// keys keeps a segment of at least 8 slots for each segMax*3/8 or so of
// its peak.
func (ix *keyIndex) shrink() {
	if ix.n == 0 {
		*ix = keyIndex{}
		return
	}
	for _, sg := range ix.segs {
		sg.shrink()
	}
}

// shrink halves a segment less than an eighth full until it is at least a
// quarter full, or 8 slots, so that the next insertions do not grow it
// straight away.
func (sg *segment) shrink() {
	size := len(sg.slots)
	if sg.n*8 >= size || size <= 8 {
		return
	}
	for size > 8 && sg.n*4 < size {
		size /= 2
	}
	sg.resize(size)
}

// each calls f with every record of ix, which f must not add or remove.
func (ix *keyIndex) each(f func(r *record)) {
	for _, sg := range ix.segs {
		for _, s := range sg.slots {
			if s.r != nil {
				f(s.r)
			}
		}
	}
}

// sample calls f with up to n records, starting where the last sample
// stopped, so that successive samples go round the whole index (a record
// may be offered twice, when a removal moves it back across a segment's
// end). f may remove the record it is given, and no other, and reports
// whether it did; it must not add any. A segment that removals have left
// less than an eighth full is shrunk when the sample leaves it.
func (ix *keyIndex) sample(n int, f func(r *record) (removed bool)) {
	if ix.n == 0 {
		return
	}
	for visits := 0; n > 0 && visits <= len(ix.segs); visits++ {
		if ix.cur >= len(ix.segs) {
			ix.cur, ix.next = 0, 0
		}
		sg := ix.segs[ix.cur]
		i := min(ix.next, len(sg.slots))
		removed := false
		// A removal moves a later slot into the one just visited, which
		// is then visited again.
		for n > 0 && i < len(sg.slots) {
			r := sg.slots[i].r
			if r == nil {
				i++
				continue
			}
			n--
			if f(r) {
				removed = true
			} else {
				i++
			}
		}
		ix.next = i
		if i == len(sg.slots) {
			ix.cur, ix.next = ix.cur+1, 0
		}
		if removed && ix.next == 0 {
			sg.shrink()
		}
	}
}
