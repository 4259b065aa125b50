package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Names of the refund counters, without the namespace.
const (
	nameRefunds    = "stack_refunds_total"
	nameUnrefunded = "stack_unrefunded_total"
)

// Refunder is implemented by stores that decide a stack of policies in
// several steps and refund earlier steps when a later one refuses, such as
// the Redis store on a Redis Cluster (its Refunds and Unrefunded methods).
type Refunder interface {
	Refunds() uint64
	Unrefunded() uint64
}

// RegisterRefunds registers two counters of s's stacked decisions, read
// from s whenever the registry is scraped:
// "<namespace>_stack_refunds_total", the parts refunded because a later
// step refused the request, and "<namespace>_stack_unrefunded_total", the
// parts whose refund failed (their units stay charged until they expire;
// a rising count means the store fails between the steps of a stack). It
// returns an error for a nil registerer or store, or when the names are
// registered already.
func RegisterRefunds(reg prometheus.Registerer, s Refunder, opts Options) error {
	if reg == nil || s == nil {
		return errors.New("ratekeeper: metrics: nil registerer or store")
	}
	ns := opts.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	cs := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: ns, Name: nameRefunds, ConstLabels: opts.ConstLabels,
			Help: "Parts of stacked decisions refunded because a later step refused the request.",
		}, func() float64 { return float64(s.Refunds()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: ns, Name: nameUnrefunded, ConstLabels: opts.ConstLabels,
			Help: "Parts of stacked decisions whose refund failed; their units stay charged until they expire.",
		}, func() float64 { return float64(s.Unrefunded()) }),
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("ratekeeper: metrics: register: %w", err)
		}
	}
	return nil
}
