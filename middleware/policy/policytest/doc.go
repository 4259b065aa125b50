// Package policytest checks, against any [store.Store], what package
// policy promises about reloads and switches: a policy file edited and
// reloaded (by [policy.Set.Reload] or by the watcher) changes a route's
// limit at the next request without resetting clients' counters, a file
// that fails validation keeps the running policies, and the modes
// enforce, dry_run and off behave as documented.
//
// The unit tests of package policy run it on the memory store; the
// integration tests run it on a real Redis:
//
//	func TestPolicyReload(t *testing.T) {
//		policytest.Run(t, redisStore)
//	}
//
// Every subtest writes its own file, uses a policy name with a random
// suffix and a client address of its own, so a store shared with other
// tests needs no flushing. The limits are per hour, so that the time a
// real store takes between requests changes no count.
//
// [store.Store]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/store#Store
package policytest
