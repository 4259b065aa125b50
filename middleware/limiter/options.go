package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
)

// Options configures a [Limiter]. The zero value of every field is its
// default; [New] validates the whole and names the field in its error. New
// copies what it keeps: changing Options afterwards changes nothing.
type Options struct {
	// Name names the policy (default "default"). It appears in metrics,
	// logs and refusals, and namespaces the storage key ([StoreKey]), so
	// two limiters with different names never share counters. Names are 1
	// to 64 characters from [A-Za-z0-9_.-].
	//
	// Limiters given the same name on one store share one quota: that is
	// how replicas, or two routes that should count together, share a
	// limit on purpose. Without a name they would share it by accident, so
	// New refuses a limiter without a name on a store (or fallback store)
	// that another live limiter without a name already uses: name every
	// limiter but one. A limiter no longer referenced anywhere does not
	// count.
	Name string
	// Limits are the limits of a limiter without tiers: a request must
	// pass all of them and is recorded in all or none (for example 10 per
	// minute and 100 per hour). All limits use the same algorithm. Give
	// either Limits or Tiers.
	Limits []store.Limit
	// Tiers are classes of client, each with its own limits; a [Request]
	// names its tier. Give either Limits or Tiers.
	Tiers []Tier
	// LimitsFunc, when set, chooses the limits per request and tier (for
	// example from the caller's plan, read from configuration that changes
	// without a deploy); ctx is the context given to [Limiter.Decide]. It
	// is called for requests of tiers that have limits and that do not name
	// their own ([Request].Limits); a nil or empty result keeps the tier's
	// configured limits. How a change of limits applies to a client's
	// existing state is defined by the store package: a raised limit
	// applies at once, a cut one counts what was already used.
	//
	// Each distinct result is validated and compiled once and reused (up
	// to 64 distinct results per tier; beyond that, results are compiled
	// per request). Limit names become the "scope" label of block metrics:
	// keep them to a fixed set. It must be fast and safe for concurrent
	// use; an error or invalid limits are a configuration mistake found at
	// request time ([OutcomeRejected], logged at error level, throttled).
	LimitsFunc func(ctx context.Context, tier string) ([]store.Limit, error)
	// CountDenied records refused attempts too, so that a client hammering
	// a login route stays over its threshold. Window algorithms only. A
	// refusal's RetryAfter counts the attempt it recorded, so a client that
	// stops and retries then is admitted: unless the policy is a single
	// fixed window, each refusal peeks at the store after its take (see
	// package store, "Blocks, counted refusals and de-duplication").
	CountDenied bool
	// Overrides applies per-client overrides ([store.Override]) set in the
	// store for this policy's clients with [Limiter.SetOverride], the admin
	// API or the command-line tool: a raised or cut limit, an exempt client
	// admitted without counting, a suspended client refused until the
	// override ends. The store reads the override in the same atomic step
	// as the decision, so a policy with overrides runs the full decision
	// script on Redis (one more key read, about as costly as a block);
	// policies without them never read it. The store must implement
	// [store.OverrideStore] (both stores of this module do). Overrides live
	// in the store: while it fails, the fallback store decides without
	// them, under the configured limits.
	Overrides bool
	// DryRun runs the policy in shadow mode: it decides and records, but a
	// refusal is reported as [OutcomeDryRun] and the request is admitted.
	DryRun bool
	// MaxWait, when > 0, lets [Limiter.Wait] admit a request that would be
	// refused but fits within MaxWait: its place is reserved at once and
	// Wait returns when its turn comes (package store, "Waiting instead of
	// refusing"). Decide never waits. Zero refuses at once, as before.
	// Needs GCRA or token-bucket limits and a store (and Fallback) that
	// implements [store.Waiter]; not with Overrides. Limits of another
	// algorithm from LimitsFunc or Request.Limits are refused at request
	// time ([OutcomeRejected]) when the request waits.
	MaxWait time.Duration
	// FailureMode chooses [FailOpen] (the default) or [FailClosed].
	FailureMode FailureMode
	// Fallback decides, when set, with this store (typically a memory
	// store private to the process) whenever the main store fails or the
	// breaker skips it: each instance then enforces the limits on its own
	// traffic instead of failing open or closed. The failure mode applies
	// only if the fallback fails too. Such decisions are reported with
	// [Event].Fallback.
	Fallback store.Store
	// BreakerThreshold and BreakerCooldown configure the circuit breaker
	// that keeps a dead store from costing every request a full store
	// timeout: after BreakerThreshold consecutive failures (default 5) the
	// limiter stops calling the store for BreakerCooldown (default 1
	// second), applying the failure mode at once, then lets one probe
	// request through; a successful probe closes the breaker. A negative
	// threshold disables the breaker. Opening and closing are logged at
	// info level. With a store that tells which node serves a request
	// ([store.NodeLocator], the Redis store on a Cluster client) there is
	// one breaker per node, at most 64, so one failing master applies the
	// failure mode only to its own keys. Failures that belong to one key,
	// and answers of a node that is up, do not count: a bounded store
	// refusing a new key (kind "capacity"), a script error about the key's
	// own data (one whose chain holds an error with a KeyScoped method
	// returning true, as the Redis store reports WRONGTYPE), a Redis busy
	// running another script (kind "busy") and a Cluster master answering
	// CLUSTERDOWN while another shard fails over (kind "clusterdown"). A store that repaired a key's state reports
	// [store.Decision].Repaired, which the limiter logs at warn level (at
	// most once per second) and shows observers.
	BreakerThreshold int
	BreakerCooldown  time.Duration
	// DedupReplays and DedupWindow bound de-duplication ([Request].DedupID):
	// a request whose id was admitted and counted for the same identity is
	// a replay ([store.Decision].Duplicate) at most DedupReplays times
	// (default 3) within DedupWindow of that admission (default a minute;
	// at most the longest period of the request's limits). A replay is
	// counted like any request (a second store call, made for replays
	// only): the store admits it without recording it, and the limiter
	// then charges it, so a client is served at most its limit whatever
	// ids it sends; a replay the limits refuse is refused. Negative values
	// make New fail.
	DedupReplays int
	DedupWindow  time.Duration
	// Headers chooses the rate-limit header fields prepared for each limit
	// set ([Decision].Headers); default: the X-RateLimit-* set with epoch
	// resets, and Retry-After on refusals (see [headers.Options]).
	Headers headers.Options
	// Logger is the structured logger (default slog.Default()). Lines are
	// logged with the decision's context. Store failures are logged at warn
	// level at most once per second per limiter; the breaker opening and
	// closing and the start of a block at info level; each decision at
	// debug level with a keyed hash of the identity. Identities and error
	// details never reach a refusal.
	Logger *slog.Logger
	// LogSecret keys the hash of identities in logs (HMAC-SHA256), so that
	// replicas sharing the secret log the same hash for the same client and
	// one client can be followed across instances. Without it each process
	// uses a random secret: hashes correlate lines within one process only.
	// Either way the hash cannot be reversed by hashing every IPv4
	// address. Keep the secret as private as the logs are not.
	LogSecret []byte
	// Observer, when set, is told about every decision, with the context
	// given to [Limiter.Decide] (the request's, where a tracer keeps its
	// span): see the metrics package's Collector.Observe. It must be fast
	// and safe for concurrent use; it is not called for peeks.
	Observer func(context.Context, Event)
	// RefusalHook, when set, is called for every refusal (limited,
	// blocked or in flight, and refusals dry-run admits) with the decision's context,
	// the decision and the identity as the caller gave it, for example to
	// feed an admin summary of the most limited clients (package
	// middleware/admin's Top). Unlike Observer, the hook sees identities:
	// keep what it stores bounded and private. It runs on the caller's
	// goroutine, so it must be fast and safe for concurrent use.
	RefusalHook func(ctx context.Context, d Decision, identity string)
	// InFlight caps the requests of one identity that run at once (see
	// [InFlight] and [Limiter.Acquire]); off by default. The store must
	// keep in-flight caps ([store.SlotStore]: the memory, Redis and hybrid
	// stores do). A limiter may have a cap and no Limits or Tiers: it
	// then limits concurrency alone, and Decide admits every request as
	// [OutcomeUnlimited].
	InFlight InFlight
	// Clock tells the time for [Decision].Reset and the breaker's cooldown
	// (default time.Now); the store keeps its own clock.
	Clock func() time.Time
}

// Defaults of the options.
const (
	defaultName             = "default"
	defaultBreakerThreshold = 5
	defaultBreakerCooldown  = time.Second
)

// Tier is one class of client with its own limits.
type Tier struct {
	// Name identifies the tier: [A-Za-z0-9_.-], unique within a limiter. It
	// is appended to the policy name ("api/authenticated") in refusals,
	// metrics and storage keys, so tiers never share counters with each
	// other or with any other policy.
	Name string
	// Limits apply to the tier's requests, all-or-nothing. Required unless
	// Unlimited or Suspended.
	Limits []store.Limit
	// Unlimited tiers (trusted clients) are admitted without a decision
	// ([OutcomeUnlimited]) and, over HTTP, without rate-limit headers.
	Unlimited bool
	// Suspended tiers are always refused ([OutcomeSuspended]); over HTTP
	// with 403 and a JSON body whose error is "suspended".
	Suspended bool
}

// validate checks o for a limiter on store s; the message of its error
// names the field.
func (o *Options) validate(s store.Store) error {
	if s == nil {
		return errors.New("ratekeeper: limiter: nil store")
	}
	if o.Name != "" {
		if err := validName("Options.Name", o.Name); err != nil {
			return err
		}
	}
	switch {
	case o.FailureMode != FailOpen && o.FailureMode != FailClosed:
		return fmt.Errorf("ratekeeper: limiter: Options.FailureMode: unknown failure mode %d", int(o.FailureMode))
	case o.DedupReplays < 0 || int64(o.DedupReplays) > math.MaxInt32:
		return fmt.Errorf("ratekeeper: limiter: Options.DedupReplays must be 0 to 2³¹−1, got %d", o.DedupReplays)
	case o.DedupWindow < 0:
		return fmt.Errorf("ratekeeper: limiter: Options.DedupWindow must be >= 0, got %s", o.DedupWindow)
	case o.BreakerThreshold > maxBreakerThreshold:
		return fmt.Errorf("ratekeeper: limiter: Options.BreakerThreshold must be <= %d, got %d", maxBreakerThreshold, o.BreakerThreshold)
	case o.BreakerCooldown < 0:
		return fmt.Errorf("ratekeeper: limiter: Options.BreakerCooldown must be >= 0, got %s", o.BreakerCooldown)
	case len(o.Limits) > 0 && len(o.Tiers) > 0:
		return errors.New("ratekeeper: limiter: give Options.Limits or Options.Tiers, not both")
	case len(o.Limits) == 0 && len(o.Tiers) == 0 && o.InFlight.Max == 0:
		return errors.New("ratekeeper: limiter: Options.Limits, Options.Tiers or Options.InFlight is required")
	}
	if err := o.InFlight.validate("Options.InFlight", s); err != nil {
		return err
	}
	if err := o.validateWait(s); err != nil {
		return err
	}
	if o.Overrides {
		if _, ok := s.(store.OverrideStore); !ok {
			return fmt.Errorf("ratekeeper: limiter: Options.Overrides needs a store that keeps overrides (store.OverrideStore); %T does not", s)
		}
	}
	for i, t := range o.Tiers {
		if err := validName(fmt.Sprintf("Options.Tiers[%d].Name", i), t.Name); err != nil {
			return err
		}
		if t.Unlimited && t.Suspended {
			return fmt.Errorf("ratekeeper: limiter: tier %q is both Unlimited and Suspended", t.Name)
		}
		if !t.Unlimited && !t.Suspended && len(t.Limits) == 0 {
			return fmt.Errorf("ratekeeper: limiter: tier %q has no Limits", t.Name)
		}
	}
	return nil
}

func validName(field, n string) error {
	if n == "" || len(n) > 64 {
		return fmt.Errorf("ratekeeper: limiter: %s must be 1 to 64 characters, got %q", field, n)
	}
	for i := 0; i < len(n); i++ {
		b := n[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-' || b == '.') {
			return fmt.Errorf("ratekeeper: limiter: %s %q: only [A-Za-z0-9_.-] allowed", field, n)
		}
	}
	return nil
}
