package policy_test

import (
	"fmt"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
)

// A policy may cap its key's concurrent requests, alone (reports) or
// beside its rate limits (api).
func ExampleParse_inFlight() {
	_, err := policy.Parse("policies.yaml", []byte(`policies:
  reports:
    key: route                          # one cap per route
    in_flight: {max: 4, lease: 30s, status: 503}
  api:
    key: ip                             # one cap per client
    limits: [{rate: 100, period: 1m}]
    in_flight: {max: 10}                # lease 30s, status 429 by default
`))
	fmt.Println(err)
	// Output:
	// <nil>
}
