package policy

import "fmt"

// Mode is a policy's runtime switch: whether its limiter decides and
// refuses ([Enforce]), decides without refusing ([DryRun]), or is bypassed
// altogether ([Off]). The zero value is Enforce. A Mode is written in
// files, logs and JSON as "enforce", "dry_run" or "off".
type Mode int

const (
	// Enforce decides every request and refuses those over the limit: the
	// default.
	Enforce Mode = iota
	// DryRun decides and records every request, sets the rate-limit
	// headers (never Retry-After) and reports the refusals it would make
	// as dry_run outcomes, but lets every request through (see
	// middleware.WithDryRun).
	DryRun
	// Off bypasses the policy: requests reach the handler without a
	// decision, without rate-limit headers and without being counted, so
	// that nothing is recorded and no observer is told. It is the
	// emergency switch for a limit that hurts legitimate traffic.
	Off
)

var modeNames = [...]string{Enforce: "enforce", DryRun: "dry_run", Off: "off"}

// String returns "enforce", "dry_run" or "off".
func (m Mode) String() string {
	if m.valid() {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) valid() bool { return m >= Enforce && m <= Off }

// MarshalText implements [encoding.TextMarshaler]; it fails for an
// undeclared Mode.
func (m Mode) MarshalText() ([]byte, error) {
	if !m.valid() {
		return nil, fmt.Errorf("ratekeeper: policy: invalid mode %d", int(m))
	}
	return []byte(modeNames[m]), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler]: it accepts
// "enforce", "dry_run" and "off".
func (m *Mode) UnmarshalText(b []byte) error {
	v, ok := parseMode(string(b))
	if !ok {
		return fmt.Errorf("ratekeeper: policy: unknown mode %q (want enforce, dry_run or off)", b)
	}
	*m = v
	return nil
}

func parseMode(s string) (Mode, bool) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), true
		}
	}
	return 0, false
}
