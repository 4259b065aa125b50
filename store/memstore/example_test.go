package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// Limits of 3 per second AND 5 per 10 seconds on one key: the short
// limit decides first; once it has refilled, the long one does.
func Example() {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) // a clock moved by hand
	s, err := memstore.New(memstore.Options{Clock: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	req := store.Request{Key: "user:42", Limits: []store.Limit{
		{Name: "second", Rate: 3, Period: time.Second},
		{Name: "10s", Rate: 5, Period: 10 * time.Second},
	}}
	for i := 0; i < 4; i++ {
		d, _ := s.Take(context.Background(), req)
		fmt.Printf("allowed=%t limit=%s remaining=%d retry=%s\n", d.Allowed, d.LimitID, d.Remaining, d.RetryAfter)
	}
	now = now.Add(time.Second)
	for i := 0; i < 3; i++ {
		d, _ := s.Take(context.Background(), req)
		fmt.Printf("allowed=%t limit=%s remaining=%d retry=%s\n", d.Allowed, d.LimitID, d.Remaining, d.RetryAfter)
	}
	// Output:
	// allowed=true limit=second remaining=2 retry=0s
	// allowed=true limit=second remaining=1 retry=0s
	// allowed=true limit=second remaining=0 retry=0s
	// allowed=false limit=second remaining=0 retry=333.334ms
	// allowed=true limit=10s remaining=1 retry=0s
	// allowed=true limit=10s remaining=0 retry=0s
	// allowed=false limit=10s remaining=0 retry=1s
}

// A login limit: 3 attempts per minute per account, every attempt
// counted, and a fourth attempt blocks the account for 15 minutes, longer
// for repeat offences (up to an hour). The block outlives the minute.
func Example_block() {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) // a clock moved by hand
	s, err := memstore.New(memstore.Options{Clock: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	req := store.Request{Key: "login:alice", CountDenied: true, Limits: []store.Limit{{
		Name: "login", Algorithm: store.SlidingWindowLog, Rate: 3, Period: time.Minute,
		Block: 15 * time.Minute, BlockMax: time.Hour,
	}}}
	take := func() {
		d, _ := s.Take(context.Background(), req)
		fmt.Printf("allowed=%t blocked=%t started=%t retry=%s\n", d.Allowed, d.Blocked, d.BlockStarted, d.RetryAfter)
	}
	for i := 0; i < 5; i++ {
		take()
	}
	now = now.Add(time.Minute)
	take()
	now = now.Add(14 * time.Minute)
	take()
	// Output:
	// allowed=true blocked=false started=false retry=0s
	// allowed=true blocked=false started=false retry=0s
	// allowed=true blocked=false started=false retry=0s
	// allowed=false blocked=true started=true retry=15m0s
	// allowed=false blocked=true started=false retry=15m0s
	// allowed=false blocked=true started=false retry=14m0s
	// allowed=true blocked=false started=false retry=0s
}

// A limit changed under the same Name applies at once to what the key has
// used: raised from 2 to 5 per minute after 2 requests, it admits 3 more;
// cut back to 2, it refuses until what was used has drained.
func Example_changeLimit() {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) // a clock moved by hand
	s, err := memstore.New(memstore.Options{Clock: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	take := func(rate int64) {
		d, _ := s.Take(context.Background(), store.Request{Key: "user:42", Limits: []store.Limit{
			{Name: "api", Rate: rate, Period: time.Minute},
		}})
		fmt.Printf("rate=%d allowed=%t remaining=%d retry=%s\n", rate, d.Allowed, d.Remaining, d.RetryAfter)
	}
	take(2)
	take(2)
	take(2)
	take(5)
	take(5)
	take(5)
	take(5)
	take(2)
	// Output:
	// rate=2 allowed=true remaining=1 retry=0s
	// rate=2 allowed=true remaining=0 retry=0s
	// rate=2 allowed=false remaining=0 retry=30s
	// rate=5 allowed=true remaining=2 retry=0s
	// rate=5 allowed=true remaining=1 retry=0s
	// rate=5 allowed=true remaining=0 retry=0s
	// rate=5 allowed=false remaining=0 retry=12s
	// rate=2 allowed=false remaining=0 retry=2m0s
}
