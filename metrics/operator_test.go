package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// exported returns every series name the Collector can export with the
// default namespace, histogram suffixes included.
func exported() map[string]bool {
	names := map[string]bool{}
	for _, n := range []string{nameDecisions, nameBlocks, nameStoreErrors, nameDegraded, nameUnavailable, nameCached, nameRepaired, nameSuppressed, nameEvictions, nameMaxmemoryPolicy} {
		names[defaultNamespace+"_"+n] = true
	}
	// The stacks' refunds, the policy set's series (reload.go) and the
	// hybrid store's (store.go).
	for _, n := range []string{nameRefunds, nameUnrefunded,
		"policy_reloads_total", "policy_last_reload_successful", "policy_loaded_timestamp_seconds", "policy_mode", "policy_mode_overridden",
		"hybrid_refreshes_total", "hybrid_commits_total", "hybrid_committed_units_total", "hybrid_backend_failures_total", "hybrid_unconfirmed_units_total", "hybrid_overadmitted_units_total"} {
		names[defaultNamespace+"_"+n] = true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		names[defaultNamespace+"_"+nameLatency+suffix] = true
	}
	return names
}

var metricRef = regexp.MustCompile(`\bratekeeper_[a-z0-9_]+`)

// checkNames fails for every metric name in exprs the library does not
// export, and returns the names found.
func checkNames(t *testing.T, file string, exprs []string) map[string]bool {
	t.Helper()
	known := exported()
	found := map[string]bool{}
	for _, e := range exprs {
		for _, n := range metricRef.FindAllString(e, -1) {
			found[n] = true
			if !known[n] {
				t.Errorf("%s: expression uses %s, which the library does not export: %s", file, n, e)
			}
		}
	}
	if len(found) == 0 {
		t.Errorf("%s: no ratekeeper metric referenced", file)
	}
	return found
}

func TestAlertRulesFile(t *testing.T) {
	raw, err := os.ReadFile("operator/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("alerts.yaml is not a Prometheus rule file: %v", err)
	}
	if len(doc.Groups) == 0 {
		t.Fatal("alerts.yaml: no rule groups")
	}
	var exprs, alerts []string
	for _, g := range doc.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			if (r.Alert == "") == (r.Record == "") {
				t.Errorf("rule %q/%q: exactly one of alert and record", r.Alert, r.Record)
			}
			if strings.TrimSpace(r.Expr) == "" {
				t.Errorf("rule %q: empty expr", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("rule %q: for %q: %v", r.Alert, r.For, err)
				}
			}
			if r.Alert != "" && (r.Labels["severity"] == "" || r.Annotations["summary"] == "") {
				t.Errorf("rule %q: needs a severity label and a summary", r.Alert)
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("rule %q: unbalanced parentheses", r.Alert)
			}
			exprs = append(exprs, r.Expr)
			alerts = append(alerts, r.Alert)
		}
	}
	found := checkNames(t, "alerts.yaml", exprs)
	// The four alerts: store errors, fail-open, latency, 429 ratio.
	for _, want := range []string{"ratekeeper_store_errors_total", "ratekeeper_degraded_requests_total", "ratekeeper_decision_duration_seconds_bucket", "ratekeeper_decisions_total"} {
		if !found[want] {
			t.Errorf("alerts.yaml: no rule uses %s", want)
		}
	}
	// A failed reload (the service keeps running the previous policies) and
	// a policy switched off (no limiting at all) page someone.
	for _, want := range []string{"ratekeeper_policy_last_reload_successful", "ratekeeper_policy_mode"} {
		if !found[want] {
			t.Errorf("alerts.yaml: no rule uses %s", want)
		}
	}
	if !strings.Contains(strings.Join(exprs, "\n"), `mode="off"`) {
		t.Error(`alerts.yaml: no rule fires on ratekeeper_policy_mode{mode="off"}`)
	}
	sort.Strings(alerts)
	t.Logf("alerts: %v", alerts)
}

func TestDashboardFile(t *testing.T) {
	raw, err := os.ReadFile("operator/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no queries", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	found := checkNames(t, "grafana-dashboard.json", exprs)
	for n := range exported() {
		if strings.HasSuffix(n, "_count") {
			continue
		}
		if !found[n] {
			t.Errorf("dashboard: no panel shows %s", n)
		}
	}
}
