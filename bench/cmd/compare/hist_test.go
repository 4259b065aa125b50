package main

import (
	"math"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 1 << 40, math.MaxInt64, math.MaxUint64} {
		i := bucketOf(v)
		if i < 0 || i >= histLen {
			t.Fatalf("bucketOf(%d) = %d, outside [0, %d)", v, i, histLen)
		}
		mid := bucketMid(i)
		if diff := math.Abs(float64(mid) - float64(v)); diff > float64(v)/32+1 {
			t.Errorf("bucketMid(bucketOf(%d)) = %d, off by %.0f", v, mid, diff)
		}
	}
	for i := 1; i < histLen; i++ {
		if bucketMid(i) <= bucketMid(i-1) {
			t.Fatalf("bucket %d midpoint %d not above bucket %d's %d", i, bucketMid(i), i-1, bucketMid(i-1))
		}
	}
}

func TestQuantile(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Millisecond}} {
		got := h.quantile(c.q)
		if d := math.Abs(float64(got - c.want)); d > float64(c.want)/50 {
			t.Errorf("quantile(%v) = %v, want about %v", c.q, got, c.want)
		}
	}
	var empty hist
	if got := empty.quantile(0.5); got != 0 {
		t.Errorf("empty quantile = %v", got)
	}
}
