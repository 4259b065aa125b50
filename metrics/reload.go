package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
)

// RegisterPolicySet registers on reg the metrics of a [policy.Set]: its
// reloads and each policy's mode, read from [policy.Set.Status] at every
// scrape. With the default namespace:
//
//	ratekeeper_policy_reloads_total{result}            counter: "success" or "failure"
//	ratekeeper_policy_last_reload_successful           gauge: 0 after a failed reload until one succeeds
//	ratekeeper_policy_loaded_timestamp_seconds         gauge: when the running configuration was applied
//	ratekeeper_policy_mode{policy,mode}                gauge: 1 for the mode each policy runs in, else 0
//	ratekeeper_policy_mode_overridden{policy}          gauge: 1 while a mode set in code overrides the file
//
// Alert on ratekeeper_policy_last_reload_successful == 0 (a file that the
// running service refuses) and on ratekeeper_policy_mode{mode="off"} == 1
// (a policy switched off). Options.Namespace and ConstLabels apply;
// Buckets are unused. It returns an error when reg or s is nil or
// registration fails (a second Set on the same registry needs
// ConstLabels of its own).
func RegisterPolicySet(reg prometheus.Registerer, s *policy.Set, opts Options) error {
	if reg == nil {
		return errors.New("ratekeeper: metrics: nil registerer")
	}
	if s == nil {
		return errors.New("ratekeeper: metrics: nil policy set")
	}
	ns := opts.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "policy", name), help, labels, opts.ConstLabels)
	}
	c := &setCollector{
		set:      s,
		reloads:  desc("reloads_total", "Reloads of the policy file by result (success, failure); a failed reload keeps the running policies.", "result"),
		lastOK:   desc("last_reload_successful", "0 when the latest reload of the policy file failed, else 1."),
		loadedAt: desc("loaded_timestamp_seconds", "Unix time at which the running policy configuration was applied."),
		mode:     desc("mode", "1 for the mode (enforce, dry_run, off) each policy runs in, 0 for the others.", "policy", "mode"),
		override: desc("mode_overridden", "1 while a policy's mode was set in code and overrides the file's.", "policy"),
	}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("ratekeeper: metrics: register: %w", err)
	}
	return nil
}

// setCollector reads a Set's status at scrape time.
type setCollector struct {
	set                                       *policy.Set
	reloads, lastOK, loadedAt, mode, override *prometheus.Desc
}

func (c *setCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.reloads, c.lastOK, c.loadedAt, c.mode, c.override} {
		ch <- d
	}
}

var modes = []policy.Mode{"enforce", "dry_run", "off"}

func (c *setCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.set.Status()
	ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(s.Reloads), "success")
	ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(s.Failures), "failure")
	ch <- prometheus.MustNewConstMetric(c.lastOK, prometheus.GaugeValue, boolValue(s.LastError == nil))
	ch <- prometheus.MustNewConstMetric(c.loadedAt, prometheus.GaugeValue, float64(s.LoadedAt.UnixNano())/1e9)
	for _, p := range s.Policies {
		for _, m := range modes {
			ch <- prometheus.MustNewConstMetric(c.mode, prometheus.GaugeValue, boolValue(p.Mode == m), p.Name, string(m))
		}
		ch <- prometheus.MustNewConstMetric(c.override, prometheus.GaugeValue, boolValue(p.Overridden), p.Name)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
