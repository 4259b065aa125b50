package main

import (
	"math/bits"
	"time"
)

// histSub is the number of linear sub-buckets per power of two (as a
// power of two): 2^5 = 32 sub-buckets bound the relative error of a
// reported percentile by 1/64.
const histSub = 5

// histLen covers every uint64 nanosecond count: the largest has a shift
// of 64-(histSub+1) and top bits below 2^(histSub+1).
const histLen = (64 - histSub + 1) << histSub

// hist is a log-linear latency histogram owned by one worker goroutine:
// recording is an index computation and an increment, with no lock and no
// allocation. Workers' histograms are merged after the measurement.
type hist struct {
	counts [histLen]uint64
	n      uint64
}

// bucketOf returns the bucket of v. Values below 2^(histSub+1) get a
// bucket each; above, a bucket holds the values sharing their top
// histSub+1 bits.
func bucketOf(v uint64) int {
	if v < 1<<(histSub+1) {
		return int(v)
	}
	shift := bits.Len64(v) - (histSub + 1)
	return shift<<histSub + int(v>>uint(shift))
}

// bucketMid returns a representative value of bucket i: the middle of
// the range of values it holds.
func bucketMid(i int) uint64 {
	if i < 1<<(histSub+1) {
		return uint64(i)
	}
	shift := i>>histSub - 1
	m := uint64(i - shift<<histSub) // top bits, in [2^histSub, 2^(histSub+1))
	lo := m << uint(shift)
	return lo + (uint64(1)<<uint(shift))/2
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
}

func (h *hist) reset() { *h = hist{} }

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile (0 < q <= 1) of the recorded values, or
// zero for an empty histogram.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q * float64(h.n))
	if float64(rank) < q*float64(h.n) {
		rank++
	}
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(bucketMid(i))
		}
	}
	return time.Duration(bucketMid(histLen - 1))
}
