// Command ratekeeper operates the Redis state of ratekeeper's limiters
// directly, with the Redis store's own key layout and scripts (package
// redisstore): it shows what a client has left, resets a client, gives a
// client an override or removes it, lists blocked clients and validates
// policy files.
//
//	ratekeeper inspect --redis-url redis://redis:6379/0 --policy-file policies.yaml --policy login 203.0.113.7
//	ratekeeper inspect --policy api --tier authenticated --rate 100 --period 1m alice
//	ratekeeper reset --policy-file policies.yaml --policy login 203.0.113.7
//	ratekeeper override set --policy api --kind raise --scale 10 --ttl 24h 203.0.113.7
//	ratekeeper override set --policy api --kind suspend --ttl 1h 198.51.100.9
//	ratekeeper override clear --policy api 203.0.113.7
//	ratekeeper blocks --policy login --count 50 --output json
//	ratekeeper check policies.yaml
//
// # Identities and limits
//
// A client is named as the application's key function names it (the
// address "203.0.113.7", the subject "alice") under a policy, and a tier
// for a policy with tiers: the command builds the store key the
// middleware uses, "<policy>[/<tier>]:<identity>". An IPv6 client of an
// IP key function is named by its prefix ("2001:db8:1:2::/64" by default);
// an address in a form no IP key function gives ("::ffff:203.0.113.7",
// "2001:DB8::1", "203.0.113.07", an unmasked prefix) is refused with the
// form they give, exit status 2. A policy that shares
// another's quota ("share") uses the shared policy's counters. The limits
// come from the policy file (--policy-file, checked first as check does),
// or from flags (--rate, --period, --algorithm, --burst, --name, --block,
// --block-max) that must match the running configuration: the store keys
// state by limit name, or by algorithm and period for an unnamed limit.
//
// inspect reads with the store's Peek and records nothing; it shows the
// state as it is (nothing used: everything remaining and a reset of now). reset deletes
// the client's state under those limits and its block, strikes and
// de-duplication ids, and fails when nothing was stored. A process that
// cached a refusal of the client (the Redis and hybrid stores' deny
// caches) keeps refusing it for at most 250 ms more.
//
// override set stores the client's override (store.Override) under the
// same key and hash tag as its state, with --ttl as its TTL: --kind raise
// (--scale above 1) or cut (--scale between 0 and 1) multiplies every
// limit's rate and capacity, exempt admits without counting, suspend
// refuses (the middleware answers 403) until it ends. It applies to
// policies with overrides: true, from the client's next request. With
// --policy-file, a policy that shares another's quota gives the override
// to the shared policy's client, and a policy without overrides: true is
// refused (the override would change nothing). override clear removes it, and fails when
// there was none. inspect shows an active override and reads the state
// under it.
//
// blocks scans the block keys under --prefix with SCAN (never KEYS),
// --count at a time, and decodes their identities; --cursor continues a
// listing. With --cluster every master of the cluster is scanned.
// Identities long enough to be stored hashed cannot be decoded and are
// not listed.
//
// # Flags and output
//
// --redis-url (default $RATEKEEPER_REDIS_URL, else
// redis://127.0.0.1:6379/0), --cluster, --prefix (default "rk"),
// --timeout (default 5s) and --output table|json. Errors go to standard
// error; the exit status is 0 on success, 1 when the command fails
// (Redis unreachable, nothing to reset, an invalid file) and 2 for a
// wrong command line.
package main
