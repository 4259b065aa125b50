package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// nilClient returns a client for a port nothing listens on; tests that use
// it must not reach the network.
func nilClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		wantErr    bool
		wantPrefix string
		wantTO     time.Duration
		wantBatch  int
		wantDeny   bool
	}{
		{name: "zero value", opts: Options{}, wantPrefix: defaultPrefix, wantTO: defaultTimeout, wantBatch: defaultMaxBatch, wantDeny: true},
		{name: "custom", opts: Options{Prefix: "app", Timeout: time.Second, MaxBatch: 1, DenyCacheSize: -1}, wantPrefix: "app", wantTO: time.Second, wantBatch: 1},
		{name: "brace in prefix", opts: Options{Prefix: "a{b"}, wantErr: true},
		{name: "closing brace in prefix", opts: Options{Prefix: "a}"}, wantErr: true},
		{name: "negative timeout", opts: Options{Timeout: -time.Second}, wantErr: true},
		{name: "negative batch", opts: Options{MaxBatch: -1}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.opts
			s, err := newRedis(nilClient(), tt.opts)
			if tt.wantErr {
				if err == nil {
					t.Fatal("got nil error, want one")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.prefix != tt.wantPrefix || s.timeout != tt.wantTO || s.pipes.maxBatch != tt.wantBatch || (s.deny != nil) != tt.wantDeny {
				t.Fatalf("got prefix %q timeout %s batch %d deny cache %v, want %q %s %d %v",
					s.prefix, s.timeout, s.pipes.maxBatch, s.deny != nil, tt.wantPrefix, tt.wantTO, tt.wantBatch, tt.wantDeny)
			}
			if !reflect.DeepEqual(tt.opts, before) {
				t.Fatalf("options changed to %+v, want %+v", tt.opts, before)
			}
		})
	}
	if _, err := newRedis(nil, Options{}); err == nil {
		t.Fatal("newRedis(nil): got nil error, want one")
	}
}

func TestNonceUnique(t *testing.T) {
	a, err := newRedis(nilClient(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := newRedis(nilClient(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for i := 0; i < 1000; i++ {
		for _, s := range []*redisStore{a, b} {
			n := s.nonce()
			if seen[n] {
				t.Fatalf("nonce %q repeated", n)
			}
			if strings.ContainsAny(n, ":,{}") {
				t.Fatalf("nonce %q contains a separator", n)
			}
			seen[n] = true
		}
	}
}

func TestInvalidRequestNoIO(t *testing.T) {
	// The client points nowhere: any I/O would surface as a backend error.
	s, err := newRedis(nilClient(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ok := store.Limit{Rate: 1, Period: time.Second}
	reqs := []struct {
		name string
		req  store.Request
		want error
	}{
		{"empty key", store.Request{Limits: []store.Limit{ok}}, store.ErrInvalidRequest},
		{"no limits", store.Request{Key: "k"}, store.ErrInvalidRequest},
		{"bad limit", store.Request{Key: "k", Limits: []store.Limit{{Rate: 1}}}, store.ErrInvalidLimit},
		{"cost", store.Request{Key: "k", Limits: []store.Limit{ok}, Cost: 2}, store.ErrCostExceedsCapacity},
		{"count denied on gcra", store.Request{Key: "k", Limits: []store.Limit{ok}, CountDenied: true}, store.ErrInvalidRequest},
		{"block max below block", store.Request{Key: "k", Limits: []store.Limit{{Rate: 1, Period: time.Second, Block: time.Minute, BlockMax: time.Second}}}, store.ErrInvalidLimit},
	}
	ctx := context.Background()
	for _, tt := range reqs {
		t.Run(tt.name, func(t *testing.T) {
			ops := map[string]func() error{
				"take":  func() error { _, err := s.Take(ctx, tt.req); return err },
				"peek":  func() error { _, err := s.Peek(ctx, tt.req); return err },
				"reset": func() error { return s.Reset(ctx, tt.req) },
			}
			if tt.want == store.ErrCostExceedsCapacity {
				delete(ops, "reset") // Reset ignores the cost
			}
			for op, call := range ops {
				err := call()
				if !errors.Is(err, tt.want) {
					t.Fatalf("%s: got %v, want %v", op, err, tt.want)
				}
				if errors.Is(err, store.ErrStoreUnavailable) {
					t.Fatalf("%s: got a backend error %v, want a validation error", op, err)
				}
			}
		})
	}
}

func TestCancelledContextNoIO(t *testing.T) {
	s, err := newRedis(nilClient(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Take(ctx, store.Request{Key: "k", Limits: []store.Limit{store.PerSecond(1)}})
	var be *store.BackendError
	if !errors.As(err, &be) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want a BackendError wrapping context.Canceled", err)
	}
	if be.Op != "take" || be.Kind != "other" {
		t.Fatalf("got op %q kind %q, want take/other", be.Op, be.Kind)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"deadline", context.DeadlineExceeded, "timeout"},
		{"wrapped deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), "timeout"},
		{"pool timeout", redis.ErrPoolTimeout, "timeout"},
		{"net timeout", &net.OpError{Op: "read", Err: timeoutErr{}}, "timeout"},
		{"cancelled", context.Canceled, "other"},
		{"error reply", redis.ErrNoScript, "script"},
		{"bad reply", fmt.Errorf("%w: x", errBadReply), "script"},
		{"eof", io.EOF, "connection"},
		{"unexpected eof", io.ErrUnexpectedEOF, "connection"},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "connection"},
		{"reset", syscall.ECONNRESET, "connection"},
		{"closed client", redis.ErrClosed, "connection"},
		{"other", errors.New("boom"), "other"},
		{"busy", itemError("BUSY Redis is busy running a script"), "busy"},
		{"busy budget", errBusyBudget, "busy"},
		{"cluster down", itemError("CLUSTERDOWN The cluster is down"), "clusterdown"},
		{"cluster down budget", errDownBudget, "clusterdown"},
		{"out of memory", itemError("OOM command not allowed when used memory > 'maxmemory'."), "oom"},
		{"read-only replica", itemError("READONLY You can't write against a read only replica."), "readonly"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err); got != tt.want {
				t.Fatalf("classify(%v): got %q, want %q", tt.err, got, tt.want)
			}
			be := backendError("take", tt.err)
			if !errors.Is(be, store.ErrStoreUnavailable) || !errors.Is(be, tt.err) {
				t.Fatalf("backendError(%v) does not match ErrStoreUnavailable and its cause", tt.err)
			}
		})
	}
}

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func ints(v ...int64) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// replyOf builds a script reply without an override: the nine head
// integers before the override code, the code 0, the per-limit integers,
// the scope and an empty override.
func replyOf(scope string, v ...int64) []any {
	x := append(append(append([]int64{}, v[:9]...), 0), v[9:]...)
	return append(ints(x...), scope, "")
}

// replyOv builds a script reply: integers (the override code included),
// the scope and the override as stored.
func replyOv(scope, ov string, v ...int64) []any {
	return append(ints(v...), scope, ov)
}

func TestDecodeReply(t *testing.T) {
	one := []store.Limit{{Rate: 10, Period: time.Second}}
	two := []store.Limit{{Name: "a", Rate: 10, Period: time.Second}, {Name: "b", Rate: 5, Period: time.Minute}}
	logTwo := []store.Limit{{Name: "a", Algorithm: store.SlidingWindowLog, Rate: 10, Period: time.Second},
		{Name: "b", Algorithm: store.SlidingWindowLog, Rate: 5, Period: time.Minute}}
	tests := []struct {
		name    string
		v       any
		limits  []store.Limit
		want    store.Decision
		wantErr bool
	}{
		{name: "allowed", v: replyOf("", 1, 0, 9, 100000, 0, 0, 0, 0, 0, 9, 100000), limits: one,
			want: store.Decision{Allowed: true, Capacity: 10, Remaining: 9, ResetAfter: 100 * time.Millisecond, NextAfter: 100 * time.Millisecond, LimitID: "gcra/1s"}},
		{name: "denied second limit", v: replyOf("", 0, 1, 0, 60000000, 12000000, 0, 0, 0, 0, 4, 1, 0, 60000000), limits: two,
			want: store.Decision{Capacity: 5, ResetAfter: time.Minute, NextAfter: 12 * time.Second, RetryAfter: 12 * time.Second, LimitID: "b", Index: 1,
				PerLimit: []store.LimitState{{Remaining: 4, ResetAfter: time.Microsecond, NextAfter: time.Microsecond}, {ResetAfter: time.Minute, NextAfter: 12*time.Second + time.Microsecond}}}},
		{name: "duplicate", v: replyOf("", 1, 0, 9, 1, 0, 0, 0, 1, 0, 9, 1), limits: one,
			want: store.Decision{Allowed: true, Capacity: 10, Remaining: 9, ResetAfter: time.Microsecond, NextAfter: time.Microsecond, LimitID: "gcra/1s", Duplicate: true}},
		{name: "block started", v: replyOf("b", 0, -1, 0, 900000000, 900000000, 1, 1, 0, 0, 3, 5, 0, 7), limits: two,
			want: store.Decision{Capacity: 5, ResetAfter: 15 * time.Minute, NextAfter: 15 * time.Minute, RetryAfter: 15 * time.Minute, LimitID: "b", Index: 1,
				Blocked: true, BlockStarted: true,
				PerLimit: []store.LimitState{{Remaining: 3, ResetAfter: 5 * time.Microsecond, NextAfter: time.Microsecond}, {ResetAfter: 7 * time.Microsecond, NextAfter: time.Microsecond}}}},
		{name: "blocked by a limit not in the request", v: replyOf("login", 0, -1, 0, 2000, 2000, 1, 0, 0, 0, 10, 0), limits: one,
			want: store.Decision{Capacity: 10, ResetAfter: 2 * time.Millisecond, NextAfter: 2 * time.Millisecond, RetryAfter: 2 * time.Millisecond, LimitID: "login", Index: -1, Blocked: true}},
		{name: "repaired", v: replyOf("", 1, 0, 9, 100000, 0, 0, 0, 0, 1, 9, 100000), limits: one,
			want: store.Decision{Allowed: true, Capacity: 10, Remaining: 9, ResetAfter: 100 * time.Millisecond, NextAfter: 100 * time.Millisecond, LimitID: "gcra/1s", Repaired: true}},
		{name: "nil", v: nil, limits: one, wantErr: true},
		{name: "string", v: "OK", limits: one, wantErr: true},
		{name: "short", v: replyOf("", 1, 0, 9, 1, 0, 0, 0, 0, 0, 9), limits: one, wantErr: true},
		{name: "long", v: replyOf("", 1, 0, 9, 1, 0, 0, 0, 0, 0, 9, 1, 0), limits: one, wantErr: true},
		{name: "no scope", v: append(ints(1, 0, 9, 1, 0, 0, 0, 0, 0, 0, 9, 1, 0), ""), limits: one, wantErr: true},
		{name: "no override", v: append(ints(1, 0, 9, 1, 0, 0, 0, 0, 0, 0, 9, 1), ""), limits: one, wantErr: true},
		{name: "string element", v: []any{int64(1), "0", int64(9), int64(1), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(9), int64(1), "", ""}, limits: one, wantErr: true},
		{name: "nil element", v: []any{int64(1), int64(0), nil, int64(1), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(9), int64(1), "", ""}, limits: one, wantErr: true},
		{name: "allowed flag 2", v: replyOf("", 2, 0, 9, 1, 0, 0, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "index out of range", v: replyOf("", 1, 1, 9, 1, 0, 0, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "negative index", v: replyOf("", 1, -1, 9, 1, 0, 0, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "remaining above capacity", v: replyOf("", 1, 0, 11, 1, 0, 0, 0, 0, 0, 11, 1), limits: one, wantErr: true},
		{name: "negative remaining", v: replyOf("", 1, 0, -1, 1, 0, 0, 0, 0, 0, -1, 1), limits: one, wantErr: true},
		{name: "negative reset", v: replyOf("", 1, 0, 9, -1, 0, 0, 0, 0, 0, 9, -1), limits: one, wantErr: true},
		{name: "huge reset", v: replyOf("", 1, 0, 9, 1<<60, 0, 0, 0, 0, 0, 9, 1<<60), limits: one, wantErr: true},
		{name: "retry on allowed", v: replyOf("", 1, 0, 9, 1, 5, 0, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "negative retry", v: replyOf("", 0, 0, 0, 1, -5, 0, 0, 0, 0, 0, 1), limits: one, wantErr: true},
		{name: "blocked flag 2", v: replyOf("x", 0, -1, 0, 5, 5, 2, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "head disagrees with limit", v: replyOf("", 1, 0, 8, 1, 0, 0, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "blocked and allowed", v: replyOf("x", 1, -1, 0, 5, 5, 1, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "blocked with an index", v: replyOf("x", 0, 0, 0, 5, 5, 1, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "blocked without time", v: replyOf("x", 0, -1, 0, 0, 0, 1, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "blocked reset differs from retry", v: replyOf("x", 0, -1, 0, 4, 5, 1, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "blocked with remaining", v: replyOf("x", 0, -1, 1, 5, 5, 1, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "blocked without scope", v: replyOf("", 0, -1, 0, 5, 5, 1, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "scope without block", v: replyOf("x", 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 1), limits: one, wantErr: true},
		{name: "started without block", v: replyOf("", 0, 0, 0, 1, 5, 0, 1, 0, 0, 0, 1), limits: one, wantErr: true},
		{name: "refused duplicate", v: replyOf("", 0, 0, 0, 1, 5, 0, 0, 1, 0, 0, 1), limits: one, wantErr: true},
		{name: "scope not a string", v: append(ints(0, -1, 0, 5, 5, 1, 0, 0, 0, 0, 9, 1), int64(3), ""), limits: one, wantErr: true},
		{name: "override not a string", v: append(ints(1, 0, 9, 1, 0, 0, 0, 0, 0, 0, 9, 1), "", int64(0)), limits: one, wantErr: true},
		{name: "scaled", v: replyOv("", "scale:10", 1, 0, 99, 1000, 0, 0, 0, 0, 0, 1, 99, 1000), limits: one,
			want: store.Decision{Allowed: true, Capacity: 100, Remaining: 99, ResetAfter: time.Millisecond, NextAfter: time.Millisecond, LimitID: "gcra/1s", Override: store.OverrideScale}},
		{name: "scaled down to the cost", v: replyOv("", "scale:0.01", 0, 0, 0, 1000, 1000, 0, 0, 0, 0, 1, 0, 1000), limits: one,
			want: store.Decision{Capacity: 1, ResetAfter: time.Millisecond, NextAfter: time.Millisecond, RetryAfter: time.Millisecond, LimitID: "gcra/1s", Override: store.OverrideScale}},
		{name: "exempt", v: replyOv("", "exempt", 1, 0, 10, 0, 0, 0, 0, 0, 0, 2, 10, 0), limits: one,
			want: store.Decision{Allowed: true, Capacity: 10, Remaining: 10, LimitID: "gcra/1s", Override: store.OverrideExempt}},
		{name: "suspended", v: replyOv("", "suspend", 0, 0, 0, 5000, 5000, 0, 0, 0, 0, 3, 0, 5000), limits: one,
			want: store.Decision{Capacity: 10, ResetAfter: 5 * time.Millisecond, NextAfter: 5 * time.Millisecond, RetryAfter: 5 * time.Millisecond, LimitID: "gcra/1s", Override: store.OverrideSuspend}},
		{name: "remaining above the scaled capacity", v: replyOv("", "scale:2", 1, 0, 21, 1000, 0, 0, 0, 0, 0, 1, 21, 1000), limits: one, wantErr: true},
		{name: "override code without value", v: replyOv("", "", 1, 0, 9, 1, 0, 0, 0, 0, 0, 1, 9, 1), limits: one, wantErr: true},
		{name: "override value without code", v: replyOv("", "exempt", 1, 0, 9, 1, 0, 0, 0, 0, 0, 0, 9, 1), limits: one, wantErr: true},
		{name: "override code disagrees", v: replyOv("", "exempt", 0, 0, 0, 5, 5, 0, 0, 0, 0, 3, 0, 5), limits: one, wantErr: true},
		{name: "unknown override code", v: replyOv("", "exempt", 1, 0, 9, 1, 0, 0, 0, 0, 0, 7, 9, 1), limits: one, wantErr: true},
		{name: "malformed scale", v: replyOv("", "scale:x", 1, 0, 9, 1, 0, 0, 0, 0, 0, 1, 9, 1), limits: one, wantErr: true},
		{name: "exempt refused", v: replyOv("", "exempt", 0, 0, 0, 5, 5, 0, 0, 0, 0, 2, 0, 5), limits: one, wantErr: true},
		{name: "suspend admitted", v: replyOv("", "suspend", 1, 0, 9, 1, 0, 0, 0, 0, 0, 3, 9, 1), limits: one, wantErr: true},
		{name: "repaired flag 2", v: replyOf("", 1, 0, 9, 1, 0, 0, 0, 0, 2, 9, 1), limits: one, wantErr: true},
		{name: "log next", v: append(replyOf("", 0, 1, 0, 50000000, 40000000, 0, 0, 0, 0, 7, 900000, 0, 50000000), int64(300000), int64(20000000)), limits: logTwo,
			want: store.Decision{Capacity: 5, ResetAfter: 50 * time.Second, NextAfter: 20 * time.Second, RetryAfter: 40 * time.Second, LimitID: "b", Index: 1,
				PerLimit: []store.LimitState{{Remaining: 7, ResetAfter: 900 * time.Millisecond, NextAfter: 300 * time.Millisecond}, {ResetAfter: 50 * time.Second, NextAfter: 20 * time.Second}}}},
		{name: "log without next", v: replyOf("", 0, 1, 0, 50000000, 40000000, 0, 0, 0, 0, 7, 900000, 0, 50000000), limits: logTwo, wantErr: true},
		{name: "log next 0 below capacity", v: append(replyOf("", 0, 1, 0, 50000000, 40000000, 0, 0, 0, 0, 7, 900000, 0, 50000000), int64(0), int64(20000000)), limits: logTwo, wantErr: true},
		{name: "log next while full", v: append(replyOf("", 1, 1, 5, 0, 0, 0, 0, 0, 0, 10, 0, 5, 0), int64(1), int64(0)), limits: logTwo, wantErr: true},
		{name: "log next not an integer", v: append(replyOf("", 0, 1, 0, 50000000, 40000000, 0, 0, 0, 0, 7, 900000, 0, 50000000), int64(300000), "x"), limits: logTwo, wantErr: true},
		{name: "log exempt without next", v: replyOv("", "exempt", 1, 0, 10, 0, 0, 0, 0, 0, 0, 2, 10, 0, 5, 0), limits: logTwo,
			want: store.Decision{Allowed: true, Capacity: 10, Remaining: 10, LimitID: "a", Override: store.OverrideExempt,
				PerLimit: []store.LimitState{{Remaining: 10}, {Remaining: 5}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := decodeReply(tt.v, tt.limits, 1)
			if tt.wantErr {
				if !errors.Is(err, errBadReply) {
					t.Fatalf("got %v, want errBadReply", err)
				}
				if classify(err) != "script" {
					t.Fatalf("got kind %q, want script", classify(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := r.decision(tt.limits)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCommandLayout(t *testing.T) {
	s, err := newRedis(nilClient(), Options{Prefix: "rk"})
	if err != nil {
		t.Fatal(err)
	}
	const base = "rk:{k}:"
	plain := store.Limit{Name: "p", Algorithm: store.FixedWindow, Rate: 5, Period: time.Second}
	blocking := store.Limit{Name: "b", Algorithm: store.FixedWindow, Rate: 3, Period: time.Minute, Block: time.Hour}
	escalating := blocking
	escalating.BlockMax = 4 * time.Hour
	long := strings.Repeat("i", 129)
	tests := []struct {
		name     string
		mode     string
		req      store.Request
		wantLean bool
		wantKeys []string
		wantArgs []any
	}{
		{"lean peek", modePeek, store.Request{Key: "k", Limits: []store.Limit{plain}}, true,
			[]string{base + "f:p"},
			[]any{"peek", int64(1), int64(5), int64(1000000), int64(5)}},
		{"lean take, cost 3", modeTake, store.Request{Key: "k", Limits: []store.Limit{plain}, Cost: 3}, true,
			[]string{base + "f:p"},
			[]any{"take", int64(3), int64(5), int64(1000000), int64(5)}},
		{"block without escalation", modeTake, store.Request{Key: "k", Limits: []store.Limit{plain, blocking}, Cost: 2}, false,
			[]string{base + "block", base + "block", base + "block", base + "block", base + "f:p", base + "f:b"},
			[]any{"take", int64(2), "", "0", "", int64(0), int64(0), 2, "0",
				int64(5), int64(1000000), int64(5), 0, 0, "",
				int64(3), int64(60000000), int64(3), int64(3600000), int64(0), "b"}},
		{"escalation, dedup, counted refusals", modeTake, store.Request{Key: "k", Limits: []store.Limit{escalating}, CountDenied: true, DedupID: "order-7"}, false,
			[]string{base + "block", base + "strikes", base + "dedup", base + "block", base + "f:b"},
			[]any{"take", int64(1), "", "1", "=order-7", int64(3), int64(60000000), 1, "0", int64(3), int64(60000000), int64(3), int64(3600000), int64(14400000), "b"}},
		{"long dedup id", modePeek, store.Request{Key: "k", Limits: []store.Limit{plain}, DedupID: long}, false,
			[]string{base + "f:p", base + "f:p", base + "dedup", base + "f:p", base + "f:p"},
			[]any{"peek", int64(1), "", "0", hashKey(long), int64(3), int64(1000000), 1, "0", int64(5), int64(1000000), int64(5), 0, 0, ""}},
		{"dedup bound", modeTake, store.Request{Key: "k", Limits: []store.Limit{escalating}, DedupID: "a", DedupReplays: 1, DedupWindow: 2500 * time.Microsecond}, false,
			[]string{base + "block", base + "strikes", base + "dedup", base + "block", base + "f:b"},
			[]any{"take", int64(1), "", "0", "=a", int64(1), int64(2500), 1, "0", int64(3), int64(60000000), int64(3), int64(3600000), int64(14400000), "b"}},
		{"overrides", modeTake, store.Request{Key: "k", Limits: []store.Limit{plain}, ApplyOverride: true}, true,
			[]string{base + "f:p", base + "o"},
			[]any{"take", int64(1), int64(5), int64(1000000), int64(5)}},
		{"overrides with a block", modeTake, store.Request{Key: "k", Limits: []store.Limit{blocking}, ApplyOverride: true}, false,
			[]string{base + "block", base + "block", base + "block", base + "o", base + "f:b"},
			[]any{"take", int64(1), "", "0", "", int64(0), int64(0), 1, "1", int64(3), int64(60000000), int64(3), int64(3600000), int64(0), "b"}},
		{"two plain limits name only their state keys", modeTake, store.Request{Key: "k", Limits: []store.Limit{plain, {Name: "q", Algorithm: store.FixedWindow, Rate: 9, Period: time.Minute}}}, false,
			[]string{base + "f:p", base + "f:p", base + "f:p", base + "f:p", base + "f:p", base + "f:q"},
			[]any{"take", int64(1), "", "0", "", int64(0), int64(0), 2, "0", int64(5), int64(1000000), int64(5), 0, 0, "", int64(9), int64(60000000), int64(9), 0, 0, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.req.Validate(); err != nil {
				t.Fatal(err)
			}
			cmd := s.command(tt.mode, &tt.req, contract.Cost(&tt.req))
			if got := cmd.variant != full; got != tt.wantLean {
				t.Fatalf("got lean %v, want %v", got, tt.wantLean)
			}
			keys := cmd.keys()
			if fmt.Sprintf("%q", keys) != fmt.Sprintf("%q", tt.wantKeys) {
				t.Fatalf("got keys %q, want %q", keys, tt.wantKeys)
			}
			// The state keys come last in the full layout, first (before
			// the override key) in the lean one with overrides.
			state := tt.wantKeys[len(tt.wantKeys)-len(tt.req.Limits)]
			if cmd.variant == leanOverride {
				state = tt.wantKeys[0]
			}
			if cmd.key != state {
				t.Fatalf("got slot key %q, want the first state key %q", cmd.key, state)
			}
			args := cmd.args[3+len(keys):]
			if fmt.Sprintf("%#v", args) != fmt.Sprintf("%#v", tt.wantArgs) {
				t.Fatalf("got args %#v, want %#v", args, tt.wantArgs)
			}
		})
	}
}

func TestDedupField(t *testing.T) {
	at := strings.Repeat("a", maxDedupIDLen)
	over := at + "a"
	tests := []struct{ id, want string }{
		{"x", "=x"},
		{"#", "=#"},
		{"~abc", "=~abc"},
		{at, "=" + at},
		{over, hashKey(over)},
	}
	for _, tt := range tests {
		if got := dedupField(tt.id); got != tt.want {
			t.Errorf("dedupField(%.20q): got %.30q, want %.30q", tt.id, got, tt.want)
		}
	}
	if dedupField(over) == dedupField(over+"b") {
		t.Fatal("distinct long ids share a field")
	}
}

// panicHook makes every command panic, as a faulty hook might.
type panicHook struct{}

func (panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (panicHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { panic("hook failure") }
}
func (panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestClientPanicIsAnError(t *testing.T) {
	c := nilClient()
	c.AddHook(panicHook{})
	s, err := newRedis(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Take(context.Background(), store.Request{Key: "k", Limits: []store.Limit{store.PerSecond(1)}})
	if !errors.Is(err, store.ErrStoreUnavailable) || !strings.Contains(err.Error(), "hook failure") {
		t.Fatalf("got %v, want a backend error carrying the panic", err)
	}
}

// keys returns the call's KEYS.
func (c *command) keys() []string {
	n := c.args[2].(int)
	keys := make([]string, n)
	for i := range keys {
		switch k := c.args[3+i].(type) {
		case *string: // a plain request's key, in its call's room
			keys[i] = *k
		default:
			keys[i] = k.(string)
		}
	}
	return keys
}

// TestDecodeLeanNext checks the time until one unit more in lean replies:
// the sixth integer of the sliding window log and counter (after the
// override's code and value with overrides), derived for the other
// algorithms, and never later than a refusal's retry after.
func TestDecodeLeanNext(t *testing.T) {
	gcra := newLimitInfo(store.Limit{Rate: 10, Period: time.Second})
	log := newLimitInfo(store.Limit{Algorithm: store.SlidingWindowLog, Rate: 10, Period: time.Second})
	tests := []struct {
		name    string
		v       any
		li      *limitInfo
		ov      bool
		want    time.Duration
		wantErr bool
	}{
		{name: "gcra derived", v: ints(1, 7, 300000, 0, 0), li: gcra, want: 100001 * time.Microsecond},
		{name: "gcra full", v: ints(1, 10, 0, 0, 0), li: gcra, want: 0},
		{name: "gcra refused, capped at retry", v: ints(0, 0, 1000000, 100000, 0), li: gcra, want: 100 * time.Millisecond},
		{name: "gcra with a sixth integer", v: ints(1, 7, 300000, 0, 0, 5), li: gcra, wantErr: true},
		{name: "log", v: ints(1, 7, 1000000, 0, 0, 400000), li: log, want: 400 * time.Millisecond},
		{name: "log full", v: ints(1, 10, 0, 0, 0, 0), li: log, want: 0},
		{name: "log without next", v: ints(1, 7, 1000000, 0, 0), li: log, wantErr: true},
		{name: "log next 0 below capacity", v: ints(1, 7, 1000000, 0, 0, 0), li: log, wantErr: true},
		{name: "log negative next", v: ints(1, 7, 1000000, 0, 0, -1), li: log, wantErr: true},
		{name: "log with override", v: append(append(ints(1, 7, 1000000, 0, 0), int64(0), ""), int64(250000)), li: log, ov: true, want: 250 * time.Millisecond},
		{name: "log exempt", v: append(ints(1, 10, 0, 0, 0), int64(2), "exempt"), li: log, ov: true, want: 0},
		{name: "log suspended", v: append(ints(0, 0, 5000, 5000, 0), int64(3), "suspend"), li: log, ov: true, want: 5 * time.Millisecond},
		{name: "gcra with override", v: append(ints(1, 7, 300000, 0, 0), int64(0), ""), li: gcra, ov: true, want: 100001 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d store.Decision
			var err error
			if tt.ov {
				d, err = decodeLeanOverride(tt.v, tt.li.l, 1, tt.li)
			} else {
				d, err = decodeLean(tt.v, tt.li)
			}
			if tt.wantErr {
				if !errors.Is(err, errBadReply) {
					t.Fatalf("got %v, want errBadReply", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.NextAfter != tt.want {
				t.Fatalf("got NextAfter %s, want %s", d.NextAfter, tt.want)
			}
		})
	}
}

// TestLeanCommandAllocations bounds what building a lean call allocates
// for a key that needs escaping: the key alone. The arguments go in the
// room of the pooled call that sends them, the key as a pointer to the
// call's copy; the script's SHA, the mode and the limit's numbers are
// converted once.
func TestLeanCommandAllocations(t *testing.T) {
	s, err := newRedis(nilClient(), Options{Prefix: "rk"})
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []store.Algorithm{store.GCRA, store.TokenBucket, store.FixedWindow, store.SlidingWindowCounter} {
		req := store.Request{Key: "ip:10.0.0.1", Limits: []store.Limit{{Algorithm: alg, Rate: 5, Period: time.Second}}}
		c := s.command(modeTake, &req, 1)
		if c.variant != lean || c.key != "rk:{ip%3A10.0.0.1}:"+s.limits.get(req.Limits[0]).suffix {
			t.Fatalf("%s: variant %v, key %q", alg, c.variant, c.key)
		}
		p := c.pooled
		if p == nil || &c.args[0] != &p.argv[0] || c.args[3] != any(&p.key) || p.key != c.key {
			t.Fatalf("%s: the arguments are not in the call's room: %#v", alg, c.args)
		}
		if c.take() != p || c.pooled != nil {
			t.Fatalf("%s: take did not hand over the call whose room holds the arguments", alg)
		}
		// Under the race detector sync.Pool drops a quarter of what it
		// is given, and a call made anew is two allocations (the call and
		// its channel): half an allocation per call on average, which
		// AllocsPerRun's whole number leaves out.
		if n := testing.AllocsPerRun(400, func() {
			c := s.command(modeTake, &req, 1)
			c.drop()
		}); n > 1 {
			t.Errorf("%s: %v allocations per lean call, want at most 1 (the key)", alg, n)
		}
	}
	// A sliding window log take's nonce is the call's too: the key and the
	// nonce are all it allocates.
	req := store.Request{Key: "ip:10.0.0.1", Limits: []store.Limit{{Algorithm: store.SlidingWindowLog, Rate: 5, Period: time.Second}}}
	c := s.command(modeTake, &req, 1)
	if p := c.pooled; c.variant != lean || p == nil || c.args[len(c.args)-1] != any(&p.nonce) || p.nonce == "" {
		t.Fatalf("sliding window log: variant %v, arguments %#v", c.variant, c.args)
	}
	if n := testing.AllocsPerRun(400, func() {
		c := s.command(modeTake, &req, 1)
		c.drop()
	}); n > 2 {
		t.Errorf("sliding window log: %v allocations per lean take, want at most 2 (the key and the nonce)", n)
	}
}

// TestLeanCallStringsReachRedis: a plain request's key, which its call
// holds as a *string, reaches Redis as the key itself (the script's state
// is under it, and a Reset of the request finds it), and so does a
// sliding window log take's nonce.
func TestLeanCallStringsReachRedis(t *testing.T) {
	srv := requireServer(t)
	c := newClient(t, srv, nil)
	s, err := newRedis(c, Options{Prefix: randomPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := store.Request{Key: "ip:10.0.0.1", Limits: []store.Limit{{Algorithm: store.GCRA, Rate: 5, Period: time.Second}}}
	if d, err := s.Take(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("Take: %+v, %v", d, err)
	}
	key := keyOf(s.prefix, req.Key, s.limits.get(req.Limits[0]).suffix)
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS %q: %d, %v; want the state under the key", key, n, err)
	}
	if err := s.Reset(ctx, req); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	// A sliding window log take's nonce, held as a *string too, is in the
	// member the take adds: "<µs>:<nonce>:1", the nonce the store's base
	// and a counter.
	req.Limits[0].Algorithm = store.SlidingWindowLog
	if d, err := s.Take(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("log Take: %+v, %v", d, err)
	}
	key = keyOf(s.prefix, req.Key, s.limits.get(req.Limits[0]).suffix)
	members, err := c.ZRange(ctx, key, 0, -1).Result()
	if err != nil || len(members) != 1 {
		t.Fatalf("ZRANGE %q: %q, %v; want one member", key, members, err)
	}
	if parts := strings.Split(members[0], ":"); len(parts) != 3 || !strings.HasPrefix(parts[1], s.nonceBase) || parts[2] != "1" {
		t.Fatalf("log member %q: want <µs>:%s<counter>:1", members[0], s.nonceBase)
	}
}
