package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type refunder struct{ refunds, unrefunded uint64 }

func (r *refunder) Refunds() uint64    { return r.refunds }
func (r *refunder) Unrefunded() uint64 { return r.unrefunded }

func TestRegisterRefunds(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r := &refunder{}
	if err := RegisterRefunds(reg, r, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := RegisterRefunds(reg, r, Options{}); err == nil {
		t.Fatal("a second registration: got nil error, want one")
	}
	if err := RegisterRefunds(nil, r, Options{}); err == nil {
		t.Fatal("nil registerer: got nil error, want one")
	}
	r.refunds, r.unrefunded = 120, 2
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf.GetMetric()[0].GetCounter().GetValue()
	}
	if got["ratekeeper_stack_refunds_total"] != 120 || got["ratekeeper_stack_unrefunded_total"] != 2 {
		t.Fatalf("got %v, want 120 refunds and 2 unrefunded (read at scrape time)", got)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 2 {
		t.Fatalf("series: %d, %v; want 2", n, err)
	}
}
