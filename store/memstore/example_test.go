package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// A policy of 3 per second AND 5 per 10 seconds on one key: the short
// limit decides first; once it has refilled, the long one does.
func Example() {
	clock := storetest.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := memstore.New(memstore.Options{Clock: clock.Now})
	if err != nil {
		panic(err)
	}
	req := store.Request{Key: "user:42", Limits: []store.Limit{
		{Name: "second", Rate: 3, Period: time.Second},
		{Name: "10s", Rate: 5, Period: 10 * time.Second},
	}}
	for i := 0; i < 4; i++ {
		d, _ := s.Take(context.Background(), req)
		fmt.Printf("allowed=%t policy=%s remaining=%d retry=%s\n", d.Allowed, d.LimitID, d.Remaining, d.RetryAfter)
	}
	clock.Advance(time.Second)
	for i := 0; i < 3; i++ {
		d, _ := s.Take(context.Background(), req)
		fmt.Printf("allowed=%t policy=%s remaining=%d retry=%s\n", d.Allowed, d.LimitID, d.Remaining, d.RetryAfter)
	}
	// Output:
	// allowed=true policy=second remaining=2 retry=0s
	// allowed=true policy=second remaining=1 retry=0s
	// allowed=true policy=second remaining=0 retry=0s
	// allowed=false policy=second remaining=0 retry=333.334ms
	// allowed=true policy=10s remaining=1 retry=0s
	// allowed=true policy=10s remaining=0 retry=0s
	// allowed=false policy=10s remaining=0 retry=1s
}

// A login limit: 3 attempts per minute per account, every attempt
// counted, and a fourth attempt blocks the account for 15 minutes, longer
// for repeat offences (up to an hour). The block outlives the minute.
func Example_block() {
	clock := storetest.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := memstore.New(memstore.Options{Clock: clock.Now})
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
	clock.Advance(time.Minute)
	take()
	clock.Advance(14 * time.Minute)
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
