// Command chi is the ratekeeper example service on a chi router, with the
// same routes and behaviour as examples/stdlib.
//
//	go run ./examples/chi                   # in-memory store, :8080
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/chi
//	go run ./examples/chi token alice       # print a demo JWT for "alice"
//	POLICY_FILE=/tmp/policies.yaml go run ./examples/chi   # limits from a file, reloaded on SIGHUP
//	ADMIN_TOKEN=<16 bytes or more> go run ./examples/chi    # the admin API under /admin/
//	TRUSTED_PROXIES=10.0.3.7 go run ./examples/chi          # behind the proxy 10.0.3.7: key clients by X-Forwarded-For
//
// See examples/stdlib for the policy file and its reloads, proxies, and
// starting while Redis is down.
package main
