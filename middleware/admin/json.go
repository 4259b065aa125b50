package admin

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
)

// The wire format of the API's answers; see the package documentation.

type statusJSON struct {
	Source    string       `json:"source"`
	Checksum  string       `json:"checksum"`
	LoadedAt  time.Time    `json:"loaded_at"`
	Reloads   uint64       `json:"reloads"`
	Failures  uint64       `json:"failures"`
	LastError string       `json:"last_error,omitempty"`
	Policies  []policyJSON `json:"policies"`
}

type policyJSON struct {
	Name       string          `json:"name"`
	Mode       string          `json:"mode"`
	Configured string          `json:"configured_mode"`
	Overridden bool            `json:"overridden"`
	Config     json.RawMessage `json:"config"`
}

func newPolicyJSON(p policy.Policy) policyJSON {
	return policyJSON{Name: p.Name, Mode: string(p.Mode), Configured: string(p.Configured), Overridden: p.Overridden, Config: p.Config}
}

type clientJSON struct {
	Policy    string        `json:"policy"`
	Tier      string        `json:"tier,omitempty"`
	Identity  string        `json:"identity"`
	Mode      string        `json:"mode"`
	Unlimited bool          `json:"unlimited,omitempty"`
	Suspended bool          `json:"suspended,omitempty"`
	Override  *overrideJSON `json:"override,omitempty"`
	State     *stateJSON    `json:"state,omitempty"`
}

type stateJSON struct {
	Limit        string     `json:"limit"`
	Capacity     int64      `json:"capacity"`
	Remaining    int64      `json:"remaining"`
	Reset        time.Time  `json:"reset"`
	Blocked      bool       `json:"blocked"`
	BlockedUntil *time.Time `json:"blocked_until,omitempty"`
	RetryAfter   int64      `json:"retry_after"`
}

type resetJSON struct {
	Policy   string `json:"policy"`
	Tier     string `json:"tier,omitempty"`
	Identity string `json:"identity"`
	Found    bool   `json:"found"`
}

type blockedJSON struct {
	Policy  string              `json:"policy"`
	Clients []blockedClientJSON `json:"clients"`
	Cursor  string              `json:"cursor"`
}

type blockedClientJSON struct {
	Tier       string    `json:"tier,omitempty"`
	Identity   string    `json:"identity"`
	Scope      string    `json:"scope"`
	Until      time.Time `json:"until"`
	RetryAfter int64     `json:"retry_after"`
}

type topJSON struct {
	Policy  string `json:"policy"`
	Minutes int    `json:"minutes"`
	// Scope says what the counts cover: the refusals this instance
	// decided ("instance"); every replica keeps its own.
	Scope   string          `json:"scope"`
	Clients []topClientJSON `json:"clients"`
}

// topScope is the scope of the top list: one instance's refusals.
const topScope = "instance"

type topClientJSON struct {
	Tier     string `json:"tier,omitempty"`
	Identity string `json:"identity"`
	Count    uint64 `json:"count"`
	Error    uint64 `json:"error"`
}

type errorJSON struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal","message":"could not encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorJSON{Error: code, Message: msg})
}
