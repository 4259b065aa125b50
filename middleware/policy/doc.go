// Package policy loads rate-limiting policies from a file, YAML or JSON,
// and runs them as middleware that follows the file: reload it, or switch
// one policy to dry-run or off, and the next request runs under the change,
// without a deploy and without resetting clients' counters.
//
// The file describes what a service would otherwise build in Go with
// [middleware.New] and [middleware.NewTiered]: named policies with their
// limits, tiers, exemptions, failure mode and headers. What is code stays
// code: the application registers its key functions and classifiers under
// names the file refers to ([Options]), and its router picks a policy by
// name for each route or group, so that the file can change limits but
// never routes:
//
//	set, err := policy.Load("policies.yaml", st, policy.Options{
//		Keys:        map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
//		Classifiers: map[string]middleware.Classifier{"auth": middleware.AuthOptions{Subject: jwt, Anonymous: keyfunc.RemoteIP}},
//	})
//	r.With(set.Handler("api")).Get("/api/ping", ping)          // chi
//	mux.Handle("POST /login", set.Handler("login")(login))      // http.ServeMux
//	go set.Watch(ctx, 2*time.Second)                            // or set.Reload() on SIGHUP
//
// # Format
//
// One schema, written in YAML or JSON (a file whose name ends in ".json"
// is read as JSON). Every field is checked: an unknown field, a value of
// the wrong type or out of range, a duplicate name or a missing field is
// an [Error] naming the file, the line and the field's path, and nothing
// is built.
//
//	version: 1                      # optional; 1 is the only version
//	policies:                       # required: policy name → policy
//	  api:                          # [A-Za-z0-9_.-], 1 to 64 characters
//	    classifier: auth            # a classifier of Options.Classifiers; needs tiers
//	    tiers:                      # tier name → exactly one of limits, unlimited, suspended
//	      anonymous:
//	        limits:
//	          - {rate: 10, period: 1m}
//	      authenticated:
//	        limits:
//	          - {name: minute, rate: 100, period: 1m, burst: 20}
//	          - {name: hour, rate: 2000, period: 1h}
//	      trusted: {unlimited: true}      # passes without a decision or headers
//	      suspended: {suspended: true}    # always 403
//	    headers: {dialect: both}
//	  search:
//	    share: api                  # takes its units from api's counters...
//	    cost: 5                     # ...5 per request
//	  login:
//	    key: ip                     # a key function of Options.Keys; needs limits
//	    limits:
//	      - name: minute
//	        algorithm: sliding_window_log
//	        threshold: 6            # refuse the 6th attempt: rate 5
//	        period: 1m
//	        block: 15m              # a refusal blocks the client for 15 minutes...
//	        block_max: 24h          # ...30m, 1h, ... up to 24h for repeat offences
//	    count_denied: true
//	    failure: closed
//	    headers: {dialect: omit}
//	    exempt:
//	      cidrs: [10.0.0.0/8]
//	      methods: [OPTIONS]
//	    mode: dry_run
//
// A policy has exactly one of:
//
//   - key: the name of a key function in [Options].Keys, with limits: a
//     list of 1 to 8 limits, all of one algorithm, that a request must all
//     pass (as [middleware.New] with [middleware.Options].Limits).
//   - classifier: the name of a classifier in [Options].Classifiers, with
//     tiers: a mapping from tier name to exactly one of limits,
//     "unlimited: true" or "suspended: true" (as [middleware.NewTiered]).
//     For an [middleware.AuthOptions] classifier, a tier is required for
//     every tier it can give a request: anonymous and authenticated, and
//     trusted and suspended when its Trusted and Suspended hooks are set.
//   - share: the name of another policy (one that does not share itself),
//     whose limiter and counters it uses, as [middleware.Limiter.WithCost]
//     does: a costly route charges several units of the same quota. A
//     sharing policy may set only cost and mode.
//
// Optional fields of a policy, each applying the middleware option named:
//
//   - cost: units per request, at least 1 and at most every limit's
//     capacity (default 1).
//   - mode: enforce (default), dry_run or off; see Switches.
//   - failure: open (default) or closed ([middleware.Options].FailureMode).
//   - local_fallback: true decides with Options.Fallback when the store
//     fails ([middleware.Options].Fallback).
//   - breaker: {threshold: 5, cooldown: 1s}; threshold 0 disables it
//     ([middleware.Options].BreakerThreshold).
//   - in_flight: {max: 10, lease: 30s, status: 503} caps the requests of
//     the policy's key that run at once (max, required, 1 to 2³⁰; lease 1s
//     to 24h, default 30s; status 429, the default, or 503); with key, it
//     may replace limits ([middleware.Options].InFlight and
//     InFlightStatus).
//   - headers: dialect x-ratelimit (default: X-RateLimit-*), ietf (the
//     IETF RateLimit and RateLimit-Policy fields only), both, or omit (only
//     Retry-After, on refusals); reset epoch (default) or delta; bucket:
//     true adds X-RateLimit-Bucket and X-RateLimit-Tier (see
//     [headers.Options]).
//   - problem_details: true answers refusals with RFC 9457
//     application/problem+json ([middleware.Options].ProblemDetails).
//   - count_denied: true records refused attempts too, for window
//     algorithms ([middleware.Options].CountDenied).
//   - overrides: true applies per-client overrides set through the admin
//     API, the command-line tool or [middleware.Limiter.SetOverride]
//     ([middleware.Options].Overrides); the store must keep overrides.
//   - max_wait: a duration such as 2s: a request that would be refused
//     but whose turn comes within it waits for its turn instead
//     ([middleware.Options].MaxWait); gcra or token_bucket limits only,
//     not with overrides.
//   - exempt: paths (exact, or a prefix ending in "/*"), cidrs (prefixes
//     or addresses, matched against the address Options.ClientIP finds)
//     and methods, whose requests pass without a decision
//     ([middleware.ExemptPaths], [middleware.ExemptCIDRs]).
//
// A field the file leaves out keeps the middleware's default, or what
// Options.Middleware set.
//
// A limit has:
//
//   - rate: units per period, at least 1; or threshold: N, a limit that
//     refuses the request that would bring the count to N (">=" rather
//     than ">"), which is rate N-1. One of the two is required.
//   - period: required unless calendar is set, a Go duration of whole
//     milliseconds ("1m", "24h", "250ms").
//   - calendar: day, week or month, instead of period: a quota counted in
//     the calendar's windows from local midnight (Monday's, the 1st's),
//     with the fixed_window algorithm (the default then), ending at the
//     real boundary ([store.Limit].Calendar).
//   - timezone: the IANA time zone of a calendar's windows
//     ("Europe/Berlin"); default UTC. Only with calendar.
//   - algorithm: gcra (default), token_bucket, sliding_window_log,
//     sliding_window_counter, fixed_window ([store.Algorithm]) or
//     suppressed, the strategy that sheds load between rate (the soft
//     limit) and burst (the hard limit): the policy's limiter then runs
//     on the store of package store/suppressed over the Set's store, with
//     a sliding window counter of the hard limit, and sends
//     X-RateLimit-Suppression. All limits of a policy, all its tiers
//     included, are suppressed or none is.
//   - burst: the capacity of gcra and token_bucket (default: rate); the
//     hard limit of suppressed, at least rate (default: 2·rate); the
//     window algorithms hold rate.
//   - block, block_max: a refusal blocks the client for block; with
//     block_max, repeat offences double it up to block_max
//     ([store.Limit].Block and BlockMax).
//   - name: the limit's identity, under which its counters are stored and
//     its blocks reported ("scope"). Default: the algorithm and period,
//     "gcra/1m0s". Name limits whose period may change: see Reloads.
//
// YAML anchors and aliases may repeat a value (a list of limits shared by
// two tiers, say); merge keys ("<<") are not supported. [Parse] validates a
// file without the application, for a CI step or a command-line tool, and
// returns its policies as [Policy] values: the one decoded form of the
// file, which the admin API and the command-line tool read too.
//
// # Reloads
//
// [Set.Reload] reads the file again; [Set.Watch] polls it and reloads it
// when its content changes. Either way the new file is validated and
// built in full before one atomic switch; a request in flight finishes
// under the policies it started with, and a file that fails validation
// leaves the running policies in place, is logged at error level and
// counted in [Set.Status] (and in the metrics of the metrics package's
// RegisterPolicySet). A reload may add and change policies, and remove
// those no route uses.
//
// Counters survive a reload when the policy, the tier and the limit keep
// their names, because the store keys them by those names: raise a rate
// and clients get the difference at once, cut it and what they already
// used counts against the new limit (see "Changing a limit" in package
// store). An unnamed limit is named after its algorithm and period, so
// changing its period starts it afresh.
//
// # Switches
//
// Every policy runs in a [Mode]: "enforce", "dry_run" (decide and count,
// set headers, never refuse) or "off" (bypass: no decision, no headers,
// nothing counted). The file sets it with "mode"; [Set.SetMode] switches
// it at once and overrides the file, across reloads, until SetMode(name,
// "") clears the override, so an emergency bypass is not undone by an
// unrelated edit. Every switch,
// from the file or from code, is logged at warn level with the policy and
// the modes before and after, and [Set.Status] reports each policy's mode
// and whether it is overridden.
package policy
