package integration

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// TestSuppressedConvergesRedis offers a suppressed limit of 100 per second
// (hard limit 200) two and five times its rate on a real Redis, in real
// time, for four seconds each, and requires the admitted rate after the
// first second (while the offered load is still being measured) to be
// within 15% of the configured rate, with most refusals drawn rather
// than by the hard limit. The memory store's TestSuppressedConverges
// measures the same over two simulated minutes.
func TestSuppressedConvergesRedis(t *testing.T) {
	const (
		rate   = 100
		run    = 4 * time.Second
		warmUp = time.Second
	)
	srv := sharedRedis(t)
	c := newClient(t, srv)
	for _, load := range []int64{2, 5} {
		t.Run(strconv.FormatInt(load, 10)+"x", func(t *testing.T) {
			src := rand.New(rand.NewPCG(11, uint64(load)))
			st := newStoreWith(t, c, redisstore.Options{Prefix: randomPrefix(t), Timeout: 10 * time.Second, Rand: src.Float64})
			l := store.Limit{Algorithm: store.Suppressed, Rate: rate, Period: time.Second}
			r := store.Request{Key: "client", Limits: []store.Limit{l}}
			step := time.Second / time.Duration(rate*load)
			ctx := context.Background()
			var offered, steadyOffered, steady, suppressed, hard int64
			start := time.Now()
			for i := int64(0); ; i++ {
				at := time.Duration(i) * step
				if at >= run {
					break
				}
				if d := time.Until(start.Add(at)); d > 0 {
					time.Sleep(d)
				}
				d, err := st.Take(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				offered++
				inSteady := time.Since(start) >= warmUp
				if inSteady {
					steadyOffered++
				}
				switch {
				case d.Allowed && inSteady:
					steady++
				case d.Allowed:
				case d.Suppressed:
					suppressed++
				default:
					hard++
				}
			}
			elapsed := time.Since(start)
			secs := (elapsed - warmUp).Seconds()
			perSec := float64(steady) / secs
			t.Logf("offered %d/s (%d×; sent %d in %s): admitted %.1f/s after the first second (target %d/s, %.3f of it; %.3f of the offered load); refusals: %d suppressed, %d by the hard limit",
				rate*load, load, offered, elapsed.Round(time.Millisecond), perSec, rate, perSec/rate, float64(steady)/float64(steadyOffered), suppressed, hard)
			if elapsed > run+run/4 {
				t.Skipf("sent %d requests in %s, want them within %s: the machine is too loaded to offer %d/s", offered, elapsed, run, rate*load)
			}
			if perSec < 0.85*rate || perSec > 1.15*rate {
				t.Errorf("admitted %.1f/s after the first second, want %d/s ± 15%%", perSec, rate)
			}
			if suppressed <= hard {
				t.Errorf("%d suppressed and %d hard refusals, want mostly suppressed ones", suppressed, hard)
			}
		})
	}
}
