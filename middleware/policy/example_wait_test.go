package policy_test

import (
	"fmt"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
)

// A policy whose clients wait up to two seconds for their turn instead of
// being answered 429, and one that cannot: waiting needs GCRA or the
// token bucket, which reserve a turn ahead of the clock.
func ExampleParse_maxWait() {
	_, err := policy.Parse("policies.yaml", []byte(`policies:
  upload:
    key: ip
    max_wait: 2s   # a request whose turn is further away gets 429 at once
    limits:
      - {rate: 10, period: 1s, burst: 5}
  reports:
    key: ip
    max_wait: 2s
    limits:
      - {rate: 100, period: 1h, algorithm: fixed_window}
`))
	fmt.Println(err)
	// Output:
	// policies.yaml:9: policies.reports.max_wait: needs gcra or token_bucket limits, not fixed_window
}
