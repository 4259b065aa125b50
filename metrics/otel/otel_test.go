package otelratekeeper_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/metrics"
	otelratekeeper "github.com/ratekeeper/ratekeeper/metrics/otel"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// switchStore is a memory store that fails every take while down is set.
type switchStore struct {
	store.Store
	down atomic.Bool
}

func (s *switchStore) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	if s.down.Load() {
		return store.Decision{}, &store.BackendError{Op: "take", Kind: "timeout", Err: context.DeadlineExceeded}
	}
	return s.Store.Take(ctx, req)
}

func newSwitchStore(t *testing.T) *switchStore {
	t.Helper()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &switchStore{Store: st}
}

func newRecorder(t *testing.T) (*otelratekeeper.Recorder, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	rec, err := otelratekeeper.New(otelratekeeper.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	return rec, reader
}

// serve sends one request from addr through h and returns its status.
func serve(h http.Handler, addr string) int {
	return serveCtx(context.Background(), h, addr)
}

// serveCtx sends one request from addr with the context ctx through h and
// returns its status.
func serveCtx(ctx context.Context, h http.Handler, addr string) int {
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api", nil)
	r.RemoteAddr = addr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// TestSpan: with Observe as a limiter's observer, each decision of the
// HTTP middleware becomes attributes and an event on the span of its own
// request's context, without the identity; a request without a span
// records none.
func TestSpan(t *testing.T) {
	rec, _ := newRecorder(t)
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")
	lim, err := middleware.New(newSwitchStore(t), keyfunc.RemoteIP, store.PerMinute(1),
		middleware.Options{Name: "api", Logger: quiet, Observer: rec.Observe})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	// Each request runs in its own span, as a tracing middleware in front
	// of the limiter starts one.
	request := func(name string) int {
		ctx, span := tracer.Start(context.Background(), name)
		defer span.End()
		return serveCtx(ctx, h, "203.0.113.7:1")
	}
	if code := request("first"); code != http.StatusOK {
		t.Fatalf("first request: %d", code)
	}
	if code := serve(h, "198.51.100.1:1"); code != http.StatusOK { // no span
		t.Fatalf("request without a span: %d", code)
	}
	if code := request("second"); code != http.StatusTooManyRequests {
		t.Fatalf("second request: %d", code)
	}

	ended := exporter.GetSpans()
	if len(ended) != 2 || ended[0].Name != "first" || ended[1].Name != "second" {
		t.Fatalf("got spans %v, want first and second", ended.Snapshots())
	}
	wantAllowed := map[attribute.Key]attribute.Value{
		"ratekeeper.policy":    attribute.StringValue("api"),
		"ratekeeper.outcome":   attribute.StringValue("allowed"),
		"ratekeeper.limit":     attribute.Int64Value(1),
		"ratekeeper.remaining": attribute.Int64Value(0),
	}
	wantLimited := map[attribute.Key]attribute.Value{
		"ratekeeper.policy":    attribute.StringValue("api"),
		"ratekeeper.outcome":   attribute.StringValue("limited"),
		"ratekeeper.limit":     attribute.Int64Value(1),
		"ratekeeper.remaining": attribute.Int64Value(0),
	}
	for i, want := range []map[attribute.Key]attribute.Value{wantAllowed, wantLimited} {
		s := ended[i]
		if len(s.Events) != 1 {
			t.Fatalf("span %s: got %d events, want 1", s.Name, len(s.Events))
		}
		e := s.Events[0]
		if e.Name != "ratekeeper.decision" {
			t.Errorf("span %s: event named %q", s.Name, e.Name)
		}
		got := attrMap(e.Attributes)
		retry, hasRetry := got["ratekeeper.retry_after"]
		delete(got, "ratekeeper.retry_after")
		if i == 0 && hasRetry {
			t.Errorf("span %s: retry_after on an admission", s.Name)
		}
		if i == 1 && (!hasRetry || retry.AsFloat64() < 59 || retry.AsFloat64() > 60) {
			t.Errorf("span %s: retry_after %v (present %v), want about 60", s.Name, retry.AsFloat64(), hasRetry)
		}
		if !sameAttrs(got, want) {
			t.Errorf("span %s: event attributes %v, want %v", s.Name, got, want)
		}
		// The span's attributes hold its decision.
		if got, want := attrMap(s.Attributes)["ratekeeper.outcome"], want["ratekeeper.outcome"]; got != want {
			t.Errorf("span %s: outcome %q, want %q", s.Name, got.AsString(), want.AsString())
		}
		for _, kv := range append(s.Attributes, e.Attributes...) {
			if strings.Contains(kv.Value.String(), "203.0.113.7") {
				t.Errorf("span %s: attribute %s holds the identity", s.Name, kv.Key)
			}
		}
	}
}

// TestNoSpan: without a recording span Observe records the metrics only.
func TestNoSpan(t *testing.T) {
	rec, reader := newRecorder(t)
	rec.Observe(context.Background(), limiter.Event{Decision: limiter.Decision{Policy: "api", Outcome: limiter.OutcomeAllowed}})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if got := sumOf(t, &rm, "ratekeeper.decisions", map[string]string{"policy": "api", "outcome": "allowed"}); got != 1 {
		t.Errorf("decisions %v, want 1", got)
	}
}

// TestSameAsPrometheus: the same traffic through one limiter gives every
// series of the Prometheus collector the same value in the OpenTelemetry
// instruments.
func TestSameAsPrometheus(t *testing.T) {
	rec, reader := newRecorder(t)
	reg := prometheus.NewRegistry()
	col, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := newSwitchStore(t)
	limits := store.Limit{Name: "burst", Rate: 2, Period: time.Minute, Block: time.Minute}
	observe := func(ctx context.Context, e limiter.Event) {
		col.Observe(ctx, e)
		rec.Observe(ctx, e)
	}
	lim, err := middleware.New(st, keyfunc.RemoteIP, limits, middleware.Options{Name: "api", Logger: quiet,
		BreakerThreshold: 2, BreakerCooldown: time.Hour, Observer: observe})
	if err != nil {
		t.Fatal(err)
	}
	web, err := middleware.New(newSwitchStore(t), keyfunc.RemoteIP, store.PerMinute(1), middleware.Options{Name: "web", Observer: observe})
	if err != nil {
		t.Fatal(err)
	}
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	h := lim.Handler(next)
	for range 4 { // allowed, allowed, blocked (a block starts), blocked
		serve(h, "203.0.113.7:1")
	}
	for range 2 { // allowed, limited
		serve(web.Handler(next), "203.0.113.7:1")
	}
	serve(h, "198.51.100.1:1")
	st.down.Store(true)
	for range 3 { // two store errors open the breaker; the third is skipped
		serve(h, "198.51.100.2:1")
	}
	// An in-flight refusal, whose slot the store keeps: it reports the
	// store's state as the rate decisions do.
	observe(context.Background(), limiter.Event{Decision: limiter.Decision{Policy: "cap", Outcome: limiter.OutcomeInFlight}})

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	compared := compareWithPrometheus(t, families, &rm)
	// api: decisions (allowed, blocked, failed_open), blocks,
	// store_errors, latency, degraded, unavailable; web: decisions
	// (allowed, limited), latency, unavailable; cap: decisions
	// (in_flight), unavailable.
	if compared != 14 {
		t.Errorf("compared %d series, want 14", compared)
	}
	for _, want := range []string{"ratekeeper.blocks", "ratekeeper.store_errors", "ratekeeper.degraded_requests", "ratekeeper.store_unavailable"} {
		if !hasInstrument(&rm, want) {
			t.Errorf("no %s recorded", want)
		}
	}
}

// compareWithPrometheus checks that every series of the gathered
// Prometheus families has the same value in rm, and returns how many it
// compared.
func compareWithPrometheus(t *testing.T, families []*dto.MetricFamily, rm *metricdata.ResourceMetrics) int {
	t.Helper()
	compared := 0
	for _, f := range families {
		name := otelName(f.GetName())
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			compared++
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				if got, want := sumOf(t, rm, name, labels), m.GetCounter().GetValue(); got != want {
					t.Errorf("%s%v = %v, want %v as %s", name, labels, got, want, f.GetName())
				}
			case dto.MetricType_GAUGE:
				if got, want := gaugeOf(t, rm, name, labels), m.GetGauge().GetValue(); got != want {
					t.Errorf("%s%v = %v, want %v as %s", name, labels, got, want, f.GetName())
				}
			case dto.MetricType_HISTOGRAM:
				dp := histogramOf(t, rm, name, labels)
				ph := m.GetHistogram()
				if dp.Count != ph.GetSampleCount() {
					t.Errorf("%s%v count %d, want %d", name, labels, dp.Count, ph.GetSampleCount())
				}
				var cum uint64
				for i, b := range ph.GetBucket() {
					cum += dp.BucketCounts[i]
					if dp.Bounds[i] != b.GetUpperBound() || cum != b.GetCumulativeCount() {
						t.Errorf("%s%v bucket %d: le %v count %d, want le %v count %d", name, labels, i, dp.Bounds[i], cum, b.GetUpperBound(), b.GetCumulativeCount())
					}
				}
			default:
				t.Errorf("%s: unexpected type %v", f.GetName(), f.GetType())
			}
		}
	}
	return compared
}

// otelName returns the instrument name of a Prometheus series name.
func otelName(prom string) string {
	rest := strings.TrimPrefix(prom, "ratekeeper_")
	rest = strings.TrimSuffix(rest, "_total")
	rest = strings.TrimSuffix(rest, "_seconds")
	return "ratekeeper." + rest
}

func TestNewInvalidNamespace(t *testing.T) {
	_, err := otelratekeeper.New(otelratekeeper.Options{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
		Namespace:     "no spaces allowed",
	})
	if err == nil {
		t.Fatal("New with an invalid namespace: got nil error")
	}
}

func attrMap(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func sameAttrs(a, b map[attribute.Key]attribute.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// matches reports whether set holds exactly labels.
func matches(set attribute.Set, labels map[string]string) bool {
	if set.Len() != len(labels) {
		return false
	}
	for k, v := range labels {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.AsString() != v {
			return false
		}
	}
	return true
}

func find(rm *metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

func hasInstrument(rm *metricdata.ResourceMetrics, name string) bool {
	_, ok := find(rm, name)
	return ok
}

func sumOf(t *testing.T, rm *metricdata.ResourceMetrics, name string, labels map[string]string) float64 {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		t.Fatalf("no instrument %s", name)
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok || !sum.IsMonotonic {
		t.Fatalf("%s is %T, want a monotonic int64 sum", name, m.Data)
	}
	for _, dp := range sum.DataPoints {
		if matches(dp.Attributes, labels) {
			return float64(dp.Value)
		}
	}
	t.Fatalf("%s has no point %v", name, labels)
	return 0
}

func gaugeOf(t *testing.T, rm *metricdata.ResourceMetrics, name string, labels map[string]string) float64 {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		t.Fatalf("no instrument %s", name)
	}
	g, ok := m.Data.(metricdata.Gauge[int64])
	if !ok {
		t.Fatalf("%s is %T, want an int64 gauge", name, m.Data)
	}
	for _, dp := range g.DataPoints {
		if matches(dp.Attributes, labels) {
			return float64(dp.Value)
		}
	}
	t.Fatalf("%s has no point %v", name, labels)
	return 0
}

func histogramOf(t *testing.T, rm *metricdata.ResourceMetrics, name string, labels map[string]string) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		t.Fatalf("no instrument %s", name)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T, want a float64 histogram", name, m.Data)
	}
	for _, dp := range h.DataPoints {
		if matches(dp.Attributes, labels) {
			return dp
		}
	}
	t.Fatalf("%s has no point %v", name, labels)
	return metricdata.HistogramDataPoint[float64]{}
}

// capableStore has every capability the series of a store are read from.
type capableStore struct {
	store.Store
	policy string
}

var _ store.Refunder = capableStore{}

func (capableStore) Evictions() uint64                                                  { return 7 }
func (capableStore) Refunds() uint64                                                    { return 3 }
func (capableStore) Unrefunded() uint64                                                 { return 1 }
func (capableStore) Settle(context.Context, store.Request, store.Decision, int64) error { return nil }
func (s capableStore) EvictionPolicy() string                                           { return s.policy }

// TestStoreSeries: given the store, its capabilities' series have the
// values of the Prometheus collector's.
func TestStoreSeries(t *testing.T) {
	st := capableStore{Store: newSwitchStore(t), policy: "allkeys-lru"}
	reader := sdkmetric.NewManualReader()
	if _, err := otelratekeeper.New(otelratekeeper.Options{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), Store: st,
	}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg, metrics.Options{Store: st}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	compared := compareWithPrometheus(t, families, &rm)
	if compared != 4 {
		t.Errorf("compared %d series, want 4", compared)
	}
}
