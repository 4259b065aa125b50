package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// A client that throttles its own calls to a partner's API (at most 10 a
// second, across every instance that shares the store) waits for its turn
// instead of failing: Wait returns when the call may go out.
func ExampleLimiter_Wait() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st, err := memstore.New(memstore.Options{Clock: func() time.Time { return start }}) // a frozen clock, for the output
	if err != nil {
		panic(err)
	}
	partner, err := limiter.New(st, limiter.Options{
		Name:    "partner-api",
		Limits:  []store.Limit{{Rate: 10, Period: time.Second, Burst: 1}},
		MaxWait: time.Second, // a call whose turn is further away is refused
	})
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, err := partner.Wait(context.Background(), limiter.Request{Identity: "api.partner.example"})
		if err != nil {
			fmt.Println("gave up:", err)
			return
		}
		fmt.Println(d.Allowed, d.Delay) // now call the partner
	}
	// Output:
	// true 0s
	// true 100ms
	// true 200ms
}
