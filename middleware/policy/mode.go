package policy

import "fmt"

// Mode is a policy's runtime switch, written as in the file, the logs and
// the admin API's JSON:
//
//   - "enforce" (the default) decides every request and refuses those
//     over the limit.
//   - "dry_run" decides and records every request, sets the rate-limit
//     headers (never Retry-After) and reports the refusals it would make
//     as dry_run outcomes, but lets every request through (see
//     middleware.Options.DryRun).
//   - "off" bypasses the policy: requests reach the handler without a
//     decision, without rate-limit headers and without being counted, so
//     that nothing is recorded and no observer is told. It is the
//     emergency switch for a limit that hurts legitimate traffic.
//
// The empty Mode is no mode: given to [Set.SetMode], it returns a policy
// to the mode its file gives it.
type Mode string

// The modes a policy runs in.
const (
	modeEnforce Mode = "enforce"
	modeDryRun  Mode = "dry_run"
	modeOff     Mode = "off"
)

func (m Mode) valid() bool { return m == modeEnforce || m == modeDryRun || m == modeOff }

// checkMode returns an error for a Mode that is not one of the three.
func checkMode(m Mode) error {
	if !m.valid() {
		return fmt.Errorf("ratekeeper: policy: unknown mode %q (want enforce, dry_run or off)", string(m))
	}
	return nil
}
