// Package redisstore is the Redis [store.Store]: every decision is one
// atomic Lua script (package [github.com/ratekeeper/ratekeeper/lua]) run
// with the server's clock, so that any number of processes sharing a Redis
// share exact limits. It works with a single node, Sentinel and Redis
// Cluster through a go-redis [redis.UniversalClient].
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	s, err := redisstore.New(rdb, redisstore.Options{})
//	if err != nil { ... }
//	d, err := s.Take(ctx, store.Request{Key: ip, Limits: []store.Limit{store.PerMinute(60)}})
//
// The decisions are those of package [store], computed with the same
// arithmetic as [github.com/ratekeeper/ratekeeper/store/memstore], and the
// store passes the conformance suite in
// [github.com/ratekeeper/ratekeeper/store/storetest].
//
// # Keys
//
// State of request key k lives under "<prefix>:{<enc k>}:<tag>:<limit>":
// tag is g (GCRA), t (token bucket), c (sliding window counter) or f (fixed
// window), and limit is "~" and the period for a limit with the default ID
// ("<algorithm>/<period>", whose algorithm the tag names; "~" and the
// calendar for a calendar limit's, "<algorithm>/<calendar>"), else the
// encoded ID; the sliding window log keeps one sorted set per key and set of
// limits, "<prefix>:{<enc k>}:l:" followed by those parts, sorted and
// joined by ':'. The default prefix is "rk", so a GCRA identity costs
// about as much Redis memory as go-redis/redis_rate's. What all limits of
// k share has one key each: "<prefix>:{<enc k>}:block" (the block; its
// value is the scope, its TTL the block's remaining time), ":strikes" (the
// escalation counter) and ":dedup" (one hash of remembered
// de-duplication ids, each with its expiry in microseconds, so that
// Reset can delete them all; Redis 7.0 has no per-field TTL, so
// expired ids are pruned as the hash grows). The key encoding makes k and the
// IDs safe: the braces make the encoded key the Redis Cluster hash tag, so
// all keys of one decision are in one slot. StateKeys lists a
// request's per-limit state keys. Every key has a TTL in milliseconds that
// ends when its state stops mattering (a block: its duration; strikes: the
// block's duration plus BlockMax; remembered ids: the longest period);
// nothing needs a sweeper, and no key is written per request.
//
// A stacked decision (TakeMulti) adds one key per part while it
// may be refunded: "<prefix>:{<enc k>}:receipt:<nonce>", the take's time,
// then "refunded"; it expires once no refund can come (a few store
// Timeouts, at least a second, at most the part's longest period).
//
// An in-flight cap ([store.SlotStore]) of key k is one sorted set,
// "<prefix>:{<enc k>}:if", a member per holder id scored with the end of
// its lease in microseconds on the server's TIME; every call drops the
// ended leases first and gives the set the TTL of its longest lease (or
// deletes it when empty), so a crashed holder's slot frees itself and the
// key never outlives its last lease. Acquire, Release and each key of a
// Renew are one call of the "slots" script (package lua, "In-flight
// caps").
//
// # Blocks, counted refusals and de-duplication
//
// The script checks the block first, then a remembered
// [store.Request.DedupID], then the limits, exactly as package store
// orders them. A block is started with SET NX, so however many refusals
// race exactly one reports [store.Decision.BlockStarted]. A block's times
// come from its key's TTL and so have millisecond resolution: a blocked
// request's RetryAfter is the key's PTTL, which is never shorter than the
// block's true remaining time. De-duplication ids of up to 128 bytes are
// stored as given (readable in Redis, like keys); longer ones as their
// SHA-256.
//
// Keys such as IP addresses or user IDs are stored readable unless long
// enough to be hashed; hash them before they reach the store if Redis must
// not hold them in the clear.
//
// # Time budget and batching
//
// Every call returns within [Options.Timeout] (or the caller's earlier
// deadline), whatever the client's configuration. Calls are queued per
// node (a lock-free queue) and sent by up to four goroutines per node, each
// taking everything queued (at most [Options.MaxBatch] calls) as one
// pipeline: a lone call goes out at once, a crowd shares round trips. On
// a single Redis server (a *redis.Client), the plain calls of one
// algorithm in a pipeline travel as one script call, the algorithm's lean
// batch (package lua), which decides each as alone and in order, and so
// do the stacked calls of one lean stacked script (its stacked batch); a
// Cluster or Ring client sends one script call per decision, since one
// command there names keys of one slot or shard, and so does a store with
// [Options.OneCallEach] (for a proxy that routes a script by its first
// key). A
// sending goroutine that finds the queue empty waits a second for the
// next call before it exits, so that a lone caller wakes it instead of
// starting one per call. For ten seconds after a round trip that took
// longer than a fifth of the Timeout (a distant or overloaded server), up
// to sixteen goroutines per node send: a call that finds every pipeline in
// flight waits for one to come back before its own round trip starts,
// which on a slow server would cost it the budget. They never outnumber
// the connections of the client's pool (PoolSize, which go-redis makes 10
// per GOMAXPROCS), less the one held for lone calls (below): a sender
// beyond them would wait for a connection with its calls taken.
// Callers wait on their own timer, so a stalled socket (go-redis does not
// cut a socket read at the context deadline unless ContextTimeoutEnabled
// is set) holds the sending goroutine, never the request. A call made
// while nothing is queued or in flight for its node (a lone call) is sent
// from its caller's goroutine instead, which saves waking two goroutines
// (the sender, then the caller). Through a plain *redis.Client it goes
// through one connection of the client's pool that the stores on the
// client hold together, one call at a time (taken with EphemeralConn, so
// the client's hooks, as they were when it was taken, see its commands),
// and whose socket deadlines are capped at each call's: the store wraps
// the connections the client opens after New (a dial hook) and finds the
// held one's socket by an ECHO of a nonce; a connection it tries that the
// client opened before the first store on it is closed, so that the pool
// opens a wrapped one in its place. A lone call through the held
// connection polls its socket for the reply for up to [Options.LoneSpin]
// (100 µs) before it sleeps, which on a host whose cores go idle between
// calls saves the caller's two wake-ups, often more than a nearby
// server's round trip; it polls only while most polls catch their reply.
// Before each call the store peeks at the held connection's socket, to
// find a connection the server has closed; while that peek finds nothing
// to read, go-redis's own peeks for push notifications during the call
// look at nothing instead of making a system call each.
// Until the store holds a connection, and after a call through it fails
// other than by a reply of the server's, another is sought in the
// background, and lone calls are sent through the client's pool by their
// callers when the client cuts socket I/O and the wait for a pooled
// connection at the context's deadline (ContextTimeoutEnabled), as they
// always are through such a Cluster or Ring client, and queued
// otherwise. When the caller's context can never be cancelled, a lone
// call's deadline context and timer are reused from one call to the
// next, so a go-redis hook on the client must not keep the context it is
// given after the command returns. A call through the held connection
// ends with its reply or at its deadline (the caller's, when earlier
// than the budget); a caller's context canceled without a deadline does
// not cut it short, as it does a queued call's wait; a lone call while
// another store's is in flight through it is
// queued. A call whose deadline passes before it is sent is not sent. An
// abandoned command may still complete in Redis; the request is then recorded once, and the
// caller has already seen a timeout; a batch still reads replies that
// come up to a second after its calls' budgets, so that a slow reply does
// not cost its connection (a new one pays a handshake of two round trips).
// Detecting a dead Redis and skipping
// it quickly (a circuit breaker) is the caller's job; the middleware
// package does it.
//
// # Warm-up
//
// A first call on a new connection pays the connection's handshake (HELLO
// and CLIENT SETINFO: two round trips), and the first call of a script the
// server does not hold pays EVALSHA, NOSCRIPT and EVAL: on a server whose
// replies take 40 ms, neither fits a 50 ms budget. So [New] warms up
// before it returns, for at most [Options.WarmUp] (default one second): on
// every node (each master of a cluster, each shard of a ring) it opens
// sixteen connections of the client's pool at once, and up to sixteen of
// go-redis's pipeline pool (PipelinePoolSize, ten by default), and loads
// every built-in script with SCRIPT LOAD. A warm-up that fails (Redis
// down) or runs out of time is logged and is not an error. When a node
// answers NOSCRIPT later (a restart, SCRIPT FLUSH), the call is sent again
// as EVAL at once, as before, and every script is loaded again on that
// node in the background (at most once a second), so that the calls after
// it are one round trip again, even through a client whose EVAL is cut at
// the deadline. go-redis closes idle connections after ConnMaxIdleTime (30
// minutes by default); set MinIdleConns to keep them.
//
// # The deny cache
//
// A refusal of a lean request (one limit, no block, no counted refusals,
// no de-duplication id, no overrides) of cost 1 is remembered until its
// RetryAfter, measured from before the call was sent; later requests of
// the same key, limit and cost are refused from memory
// ([store.Decision.Cached]), also while they wait in the queue or when
// their budget runs out, so a burst for one identity is decided by its
// first refusal. The cached answer is the one Redis gave: nothing remains
// until the retry time, and the waits count down from when the refusal
// came back. The script read its clock between the call's sending and
// its answer, so a wait counted so never ends before Redis's (a client
// that waits it is not refused again for it) and never exceeds what Redis
// answered. A request of another cost has another wait and
// asks Redis, and a refusal of a larger cost is not cached, since the
// units remaining grow while its wait runs. Only time frees capacity, so
// the cache refuses nothing Redis would admit, except after a
// Reset made through another process: a cached refusal answers for at
// most 250 ms before Redis is asked again, so such a reset applies here
// within 250 ms. [Options.DenyCacheSize] bounds it.
//
// Requests of the suppressed strategy (package store/suppressed) are never lean:
// they always run the full script, with the request's random value
// ([Options.Rand]) as an argument, and their refusals are not cached,
// since a refused request still counts as offered load and the next draw
// may admit the next one.
//
// # Settlements
//
// A request with store.Request.Reserve runs the reservation script (package
// lua, "Reservations"), which reports the server's time of the take; Settle
// runs the refund script once, in mode "settle" for GCRA and the token
// bucket and "settle_window" for the window algorithms, on the request's
// state keys. It writes no key of its own and gives every key it writes
// the TTL a take would.
//
// # Re-sent commands
//
// go-redis re-sends a command after a broken connection (and after a read
// timeout shorter than the caller's deadline), up to MaxRetries (3 by
// default) times, although Redis may already have run it. The store sends
// script calls with the command's NoRetry flag set, so go-redis never
// re-sends them: a call whose reply is lost fails once, as a connection or
// timeout error, and its request was recorded once or not at all. Errors
// that mean the script did not run (NOSCRIPT, MOVED, ASK, TRYAGAIN,
// CLUSTERDOWN, LOADING, READONLY, MASTERDOWN, BUSY) are retried within the
// budget: EVALSHA falls back to EVAL when Redis lost its script cache
// (restart, SCRIPT FLUSH), inside pipelines too; TRYAGAIN on a script
// naming several keys is resolved as "Slot migration" describes.
//
// # Redis Cluster
//
// All keys of a decision share one hash slot, so every script runs on one
// node. When a master fails, go-redis's ClusterClient keeps sending its
// slots' commands to the dead address: a refused connection is not a MOVED
// reply, and its periodic topology reload comes only every 60 seconds by
// default. The store therefore calls the client's ReloadState in the
// background after a connection or timeout error, at most once per
// [Options.ClusterReload] (default one second), so that calls reach the
// promoted replica soon after the failover instead of failing for up to a
// minute. Until then the calls fail as connection or timeout errors. In
// tests (Redis 7.0, cluster-node-timeout 1 s, go-redis v9.23), requests for
// a killed master's key succeeded again about half a second after its
// replica's promotion; with ClusterReload disabled they kept failing until
// go-redis's periodic reload, almost a minute later. State replicated
// before the failure is kept; replication is asynchronous, so the last
// requests recorded before a crash can be lost, and as many more are then
// admitted. Failovers also switch to another server's clock: a clock that
// runs behind makes window algorithms keep their newer windows (stricter,
// never looser) and bucket algorithms wait for the lost time.
//
// Meanwhile the other masters answer CLUSTERDOWN (unless
// cluster-require-full-coverage is off). Such a call is sent again to the
// same node after a short pause while its budget lasts, never through the
// ClusterClient: on the first command it routes itself, the ClusterClient
// fetches Redis's command table from nodes it picks at random, and a dead
// master among them holds the call past its budget, and the node's queue
// behind it. The warm-up has it fetch that table while every node is up.
// A call whose budget runs out after its node answered CLUSTERDOWN fails
// as kind clusterdown, as the reply itself would.
//
// # Slot migration
//
// While a slot moves from one master (the source, MIGRATING) to another
// (the target, IMPORTING), as redis-cli --cluster reshard or rebalance
// does it, Redis runs a command only on the node that holds every key it
// names. A single-key decision follows ASK to the target and runs there,
// so lean requests need nothing more. A decision naming several distinct
// keys (several limits, a blocking limit, a de-duplication id, overrides,
// a stack) is refused with TRYAGAIN when its keys are split between the
// nodes or some of them exist nowhere (a block key when the client is not
// blocked, an override key when it has none, every key of a new client).
// The store then resolves it within the call's budget, never running the
// script until Redis has said it did not run it:
//
//  1. It sends the source one EXISTS per key. A missing key is answered
//     with ASK and the target's address.
//  2. When the source holds some of the keys, it has the source hand them
//     to the target: MIGRATE host port "" 0 timeout KEYS ..., without
//     REPLACE, which is what the resharding tool does with every key of
//     the slot anyway. This needs the MIGRATE command in the store's ACL
//     (MIGRATE authenticates to the target with the client's username and
//     password, when set in its options) and costs the source one short
//     MIGRATE (100 ms at most, whatever is left of the budget); when it
//     fails the store waits and retries instead, as before. A MIGRATE
//     whose outcome is unknown (IOERR, or no reply) may have restored a
//     key on the target while the source kept it: the store then deletes
//     the target's copy of every key the source still holds (Redis
//     answers nothing else while a MIGRATE runs, so the source's answer
//     is final), and the source stays the key's one holder.
//  3. When the source holds none of them (it creates no key in a
//     migrating slot, so each is on the target or nowhere), it sends the
//     target, in one pipeline on one connection, ASKING and SET key
//     placeholder NX PX 2000 for each key, ASKING and the script, then a
//     compare-and-delete of each placeholder the script left. The
//     placeholder is a short value starting with a NUL byte, which the
//     scripts read as an absent key (package lua, "Slot migration"); no
//     repair is reported for it.
//
// Otherwise (every key on the source, MOVED, an error) the call is sent
// again after a short pause, while its budget allows. In tests (Redis
// 7.0, a three-master cluster, a slot of 3,000 keys moved and moved back
// under load, four goroutines), no decision of these shapes failed as a
// rule, where 1 to 8 % of them failed with TRYAGAIN before; what fails
// now is a call whose 50 ms budget a stalled machine runs out, as
// anywhere. A failed MIGRATE leaves those keys to the resharding
// tool, and decisions naming them wait for it. A placeholder left behind
// (the connection broke before the compare-and-delete) lives two seconds;
// should a take meet it on a node that has meanwhile become the source of
// another migration of the slot, the take fails: inside a script, Redis
// refuses a write on a migrating source to a key the script deleted. The
// target's node client is one the ClusterClient made, so its options
// (TLS, credentials, timeouts) apply. Reset deletes a client's
// keys in one DEL; when that is refused with TRYAGAIN (after the call's
// budget of retries), it deletes them one DEL at a time, each on the node
// that holds it: the end state is the same, though not reached in one
// step.
//
// # Errors
//
// Invalid requests fail before any I/O with the error of
// [store.Request.Validate]. Backend failures are *[store.BackendError] values
// matching [store.ErrStoreUnavailable], of kind timeout (deadline, network
// or pool timeout), connection (refused, reset, closed), busy (Redis
// answered BUSY, running a script past its busy-reply-threshold, until
// the budget ran out), clusterdown (a Cluster node answered CLUSTERDOWN
// until the budget ran out: the node is up, but the cluster does not
// serve every slot), oom (Redis refused a write at maxmemory, under
// maxmemory-policy noeviction), readonly (a replica, or a master being
// failed over, answered READONLY until the budget ran out), script
// (another error reply or a reply the store cannot decode) or other (a
// cancelled context among them). The middleware's breakers count neither
// busy nor clusterdown; they count oom and readonly, which every call
// meets until the server is fixed or the failover ends.
//
// State the scripts cannot read is not an error: a key of the wrong type
// (written by another application, or by hand) or with malformed state is
// replaced and the request decided as for a fresh key, reported as
// [store.Decision.Repaired] (package lua, "Unreadable state"). A script
// error that is still about one key's data (WRONGTYPE or a malformed-state
// error from a user script) carries a KeyScoped method that returns true:
// the middleware's circuit breaker, which stands for every key, does not
// count it. A key without a TTL gets one on its next decision.
package redisstore
