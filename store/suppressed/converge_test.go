package suppressed_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/fakeclock"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// TestSuppressedConverges offers a suppressed limit of 100 per second
// (hard limit 200) on the memory store two and five times its rate, evenly spaced, for two
// simulated minutes, and requires the admitted rate to come back to the
// configured one: within 5% of it over the steady periods (all but the
// first, in which the offered load is still being measured), never above
// the hard limit in any period, and with the refusals between the limits
// reported as suppressed.
func TestSuppressedConverges(t *testing.T) {
	const (
		rate    = 100
		periods = 120
	)
	for _, load := range []int64{2, 5} {
		t.Run(strconv.FormatInt(load, 10)+"x", func(t *testing.T) {
			clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			src := rand.New(rand.NewPCG(7, uint64(load)))
			m, err := memstore.New(memstore.Options{Clock: clk.Now, Rand: src.Float64})
			if err != nil {
				t.Fatal(err)
			}
			s, err := suppressed.New(m, suppressed.Options{})
			if err != nil {
				t.Fatal(err)
			}
			l := store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 2 * rate, Period: time.Second}
			r := store.Request{Key: "k", Limits: []store.Limit{l}}
			perPeriod := rate * load
			step := time.Second / time.Duration(perPeriod)
			var steady, first, suppressed, hard int64
			for p := 0; p < periods; p++ {
				var admitted int64
				for i := int64(0); i < perPeriod; i++ {
					d, err := s.Take(context.Background(), r)
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case d.Allowed:
						admitted++
					case d.Suppressed:
						suppressed++
					default:
						hard++
					}
					clk.Advance(step)
				}
				if admitted > l.Capacity() {
					t.Fatalf("period %d: got %d admitted, want at most the hard limit %d", p, admitted, l.Capacity())
				}
				if p == 0 {
					first = admitted
				} else {
					steady += admitted
				}
			}
			perSteady := float64(steady) / float64(periods-1)
			t.Logf("offered %d/s (%d×): admitted %d in the first second, then %.1f/s on average (target %d/s, %.3f of it; %.3f of the offered load); refusals: %d suppressed, %d by the hard limit",
				perPeriod, load, first, perSteady, rate, perSteady/rate, perSteady/float64(perPeriod), suppressed, hard)
			if perSteady < 0.95*rate || perSteady > 1.05*rate {
				t.Errorf("admitted %.1f/s in the steady periods, want %d/s ± 5%%", perSteady, rate)
			}
			if suppressed == 0 {
				t.Error("no suppressed refusal, want most refusals suppressed")
			}
		})
	}
}
