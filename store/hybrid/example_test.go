package hybrid_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/hybrid"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// A limit of 5 per minute, decided locally over a shared backend (a memory
// store here; the Redis store in production). The first request asks the
// backend and learns that 4 remain; the next four are admitted from the
// local lease; the sixth asks the backend again, which commits the four
// and refuses; the seventh is refused from memory until the RetryAfter.
func Example() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return start } // a clock that stands still
	backend, err := memstore.New(memstore.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	// A sync interval of a minute makes the lease ⌈5·1m/1m⌉ = 5 units
	// (and keeps the syncer out of this example's way).
	s, err := hybrid.New(backend, hybrid.Options{SyncInterval: time.Minute, Clock: clock})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	ctx := context.Background()
	req := store.Request{Key: "user:42", Limits: []store.Limit{store.PerMinute(5)}}
	for i := 0; i < 7; i++ {
		d, err := s.Take(ctx, req)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%t remaining=%d retry=%s cached=%t\n", d.Allowed, d.Remaining, d.RetryAfter, d.Cached)
	}
	st := s.Stats()
	fmt.Printf("backend calls for requests: %d, overadmitted: %d\n", st.Refreshes, st.Overadmitted)
	// Output:
	// allowed=true remaining=4 retry=0s cached=false
	// allowed=true remaining=3 retry=0s cached=false
	// allowed=true remaining=2 retry=0s cached=false
	// allowed=true remaining=1 retry=0s cached=false
	// allowed=true remaining=0 retry=0s cached=false
	// allowed=false remaining=0 retry=12s cached=false
	// allowed=false remaining=0 retry=12s cached=true
	// backend calls for requests: 2, overadmitted: 0
}
