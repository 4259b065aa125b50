package memstore

import (
	"crypto/sha256"
	"math"
	"strings"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// maxDedupIDLen is the longest de-duplication id kept as given; longer ids
// are kept as their SHA-256.
const maxDedupIDLen = 128

// keyState is a request key's block, strike counter and remembered
// de-duplication ids.
//
// Blocks and strikes follow the expiry of Redis keys, which is kept in
// whole milliseconds of the clock: a block set at time t for d ends at
// ⌊t⌋ms + d and blocks while ⌊now⌋ms is before its end (a Redis key whose
// PTTL is 0 no longer blocks), and a strike counter set at t for d lasts
// while ⌊now⌋ms <= ⌊t⌋ms + d (a Redis key exists until its PTTL is below 0).
// Remembered ids keep their end in microseconds.
type keyState struct {
	exp        int64  // µs; nothing of the key state matters at and after exp
	blockEnd   int64  // ms since the Unix epoch
	scope      string // ID of the limit that started the block
	strikes    int64  // escalating blocks remembered
	strikesEnd int64  // ms since the Unix epoch
	ids        map[dedupKey]dedupEntry
	idsEnd     int64 // µs; no remembered id lives past it
	idsLive    int   // len(ids) after the last pruning
}

// dedupEntry is a remembered id's end (µs) and how many times it was
// replayed.
type dedupEntry struct {
	exp     int64
	replays int64
}

// dedupKey is a remembered de-duplication id: the id itself, or the
// SHA-256 of an id longer than maxDedupIDLen bytes.
type dedupKey struct {
	id     string
	hashed bool
}

func dedupKeyOf(id string) dedupKey {
	if len(id) > maxDedupIDLen {
		sum := sha256.Sum256([]byte(id))
		return dedupKey{string(sum[:]), true}
	}
	return dedupKey{id, false}
}

// floorMS converts µs to whole milliseconds, rounding down.
func floorMS(us int64) int64 {
	ms := us / 1000
	if us < 0 && us%1000 != 0 {
		ms--
	}
	return ms
}

// blocked reports whether ks (nil: no state) blocks the key at now.
func (ks *keyState) blocked(now int64) bool {
	return ks != nil && floorMS(now) < ks.blockEnd
}

// strikeCount returns the number of escalating blocks remembered at now.
func (ks *keyState) strikeCount(now int64) int64 {
	if ks == nil || floorMS(now) > ks.strikesEnd {
		return 0
	}
	return ks.strikes
}

// remembered returns ks's entry of id when it is unexpired at now.
func (ks *keyState) remembered(id dedupKey, now int64) (dedupEntry, bool) {
	if ks == nil {
		return dedupEntry{}, false
	}
	e, ok := ks.ids[id]
	return e, ok && e.exp > now
}

// updateExp recomputes exp after a change: when nothing of ks matters
// any more, in µs.
func (ks *keyState) updateExp() {
	e := ks.blockEnd * 1000
	if ks.strikes > 0 {
		e = max(e, (ks.strikesEnd+1)*1000)
	}
	ks.exp = max(e, ks.idsEnd)
}

// pruneIDs drops the ids expired at now and returns how many it dropped.
func (ks *keyState) pruneIDs(now int64) int {
	n := len(ks.ids)
	for k, e := range ks.ids {
		if e.exp <= now {
			delete(ks.ids, k)
		}
	}
	ks.idsLive = len(ks.ids)
	return n - ks.idsLive
}

// firstIDExp returns the earliest end of a remembered id, math.MaxInt64
// when there is none.
func (ks *keyState) firstIDExp() int64 {
	first := int64(math.MaxInt64)
	for _, e := range ks.ids {
		first = min(first, e.exp)
	}
	return first
}

// blockFor returns the limit whose refusal blocks the key, and for how
// many milliseconds: among the refusing limits with a Block, the one with
// the longest block after escalation (ties: the earliest). It returns -1
// when no refusing limit blocks. strikes is the key's strike count.
func blockFor(limits []store.Limit, out []outcome, strikes int64) (int, int64) {
	best, bestMS := -1, int64(0)
	for i, l := range limits {
		if out[i].allowed || l.Block <= 0 {
			continue
		}
		d := l.Block.Milliseconds()
		if l.BlockMax > l.Block {
			// The (strikes+1)-th block lasts Block·2^strikes, at most
			// BlockMax: at most 35 doublings from 1ms to a year.
			most := l.BlockMax.Milliseconds()
			for k := int64(0); k < strikes && d < most; k++ {
				d *= 2
			}
			d = min(d, most)
		}
		if d > bestMS {
			best, bestMS = i, d
		}
	}
	return best, bestMS
}

// longestPeriod returns the longest period of limits, in µs.
func longestPeriod(limits []store.Limit) int64 {
	var p time.Duration
	for _, l := range limits {
		p = max(p, l.Period)
	}
	return p.Microseconds()
}

// cloneID returns k with its own copy of the id, so that a remembered id
// does not keep a caller's larger string alive.
func cloneID(k dedupKey) dedupKey {
	if !k.hashed {
		k.id = strings.Clone(k.id)
	}
	return k
}
