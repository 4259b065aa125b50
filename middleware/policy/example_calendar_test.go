package policy_test

import (
	"fmt"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
)

// A monthly quota that resets at midnight on the 1st in Berlin, next to a
// per-minute limit. Every limit of a policy shares one algorithm, and a
// calendar counts in fixed windows.
func ExampleParse_calendar() {
	_, err := policy.Parse("policies.yaml", []byte(`policies:
  reports:
    key: ip
    limits:
      - {name: minute, algorithm: fixed_window, rate: 20, period: 1m}
      - name: monthly
        rate: 10000
        calendar: month          # or day, week: the calendar sets the window
        timezone: Europe/Berlin  # default UTC
`))
	fmt.Println(err)
	// Output:
	// <nil>
}
