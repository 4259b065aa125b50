package memstore

import (
	"fmt"
	"math/bits"
	"testing"
)

// TestKeyHashSpread: keys that differ in a few bytes, short or long,
// spread evenly over the shards.
func TestKeyHashSpread(t *testing.T) {
	for _, prefix := range []string{"", "ip:", "user:0123456789abcdef-", "a much longer key prefix of fifty bytes or so ...:"} {
		const shards, n = 64, 64_000
		var counts [shards]int
		for i := 0; i < n; i++ {
			hi, _ := bits.Mul64(keyHash(12345, fmt.Sprintf("%s%d", prefix, i)), shards)
			counts[hi]++
		}
		for i, c := range counts {
			// 1000 expected a shard; the binomial spread is about ±31.
			if c < 850 || c > 1150 {
				t.Errorf("prefix %q: shard %d holds %d of %d keys", prefix, i, c, n)
			}
		}
	}
	if keyHash(1, "ip:10.0.0.1") == keyHash(2, "ip:10.0.0.1") {
		t.Error("the seed does not change the hash")
	}
	// Every length up to two words reads every byte.
	for n := 1; n <= 16; n++ {
		b := make([]byte, n)
		base := keyHash(7, string(b))
		for i := range b {
			b[i] = 1
			if keyHash(7, string(b)) == base {
				t.Errorf("length %d: byte %d does not change the hash", n, i)
			}
			b[i] = 0
		}
	}
}
