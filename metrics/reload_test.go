package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

func TestRegisterPolicySet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("policies:\n  api:\n    key: ip\n    limits: [{rate: 10, period: 1m}]\n  login:\n    key: ip\n    mode: dry_run\n    limits: [{rate: 5, period: 1m}]\n")
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.Load(path, st, policy.Options{Keys: map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := RegisterPolicySet(reg, set, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := RegisterPolicySet(reg, set, Options{}); err == nil {
		t.Fatal("second registration on one registry: got nil, want an error")
	}
	write("policies: [")
	if err := set.Reload(); err == nil {
		t.Fatal("got nil, want an error")
	}
	if err := set.SetMode("api", "off"); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP ratekeeper_policy_last_reload_successful 0 when the latest reload of the policy file failed, else 1.
# TYPE ratekeeper_policy_last_reload_successful gauge
ratekeeper_policy_last_reload_successful 0
# HELP ratekeeper_policy_mode 1 for the mode (enforce, dry_run, off) each policy runs in, 0 for the others.
# TYPE ratekeeper_policy_mode gauge
ratekeeper_policy_mode{mode="dry_run",policy="api"} 0
ratekeeper_policy_mode{mode="dry_run",policy="login"} 1
ratekeeper_policy_mode{mode="enforce",policy="api"} 0
ratekeeper_policy_mode{mode="enforce",policy="login"} 0
ratekeeper_policy_mode{mode="off",policy="api"} 1
ratekeeper_policy_mode{mode="off",policy="login"} 0
# HELP ratekeeper_policy_mode_overridden 1 while a policy's mode was set in code and overrides the file's.
# TYPE ratekeeper_policy_mode_overridden gauge
ratekeeper_policy_mode_overridden{policy="api"} 1
ratekeeper_policy_mode_overridden{policy="login"} 0
# HELP ratekeeper_policy_reloads_total Reloads of the policy file by result (success, failure); a failed reload keeps the running policies.
# TYPE ratekeeper_policy_reloads_total counter
ratekeeper_policy_reloads_total{result="failure"} 1
ratekeeper_policy_reloads_total{result="success"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"ratekeeper_policy_last_reload_successful", "ratekeeper_policy_mode", "ratekeeper_policy_mode_overridden", "ratekeeper_policy_reloads_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "ratekeeper_policy_loaded_timestamp_seconds"); err != nil || n != 1 {
		t.Fatalf("loaded timestamp: got %d series, %v; want 1", n, err)
	}
	write("policies:\n  api:\n    key: ip\n    limits: [{rate: 10, period: 1m}]\n")
	if err := set.Reload(); err != nil {
		t.Fatal(err)
	}
	after := `
# HELP ratekeeper_policy_last_reload_successful 0 when the latest reload of the policy file failed, else 1.
# TYPE ratekeeper_policy_last_reload_successful gauge
ratekeeper_policy_last_reload_successful 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(after), "ratekeeper_policy_last_reload_successful"); err != nil {
		t.Fatalf("after a good reload: %v", err)
	}
	if err := RegisterPolicySet(nil, set, Options{}); err == nil {
		t.Fatal("nil registerer: got nil, want an error")
	}
	if err := RegisterPolicySet(prometheus.NewRegistry(), nil, Options{}); err == nil {
		t.Fatal("nil set: got nil, want an error")
	}
}
