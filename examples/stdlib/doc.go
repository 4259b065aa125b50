// Command stdlib is the ratekeeper example service on http.ServeMux.
//
//	go run ./examples/stdlib                # in-memory store, :8080
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/stdlib
//	go run ./examples/stdlib token alice    # print a demo JWT for "alice"
//
// Routes: GET /healthz and GET /metrics (never limited, no rate-limit
// headers), GET /api/ping (anonymous: 10/min per IP, burst 10; with
// "Authorization: Bearer <token>": 100/min per subject), GET /api/search
// (5 units of the same quota), GET /api/export (per IP: 1/s, burst 2; a
// request over the rate waits up to 2 s for its turn; at most 2 at once,
// a third gets 503), POST /login (5/min blocks 15 min, 20/day blocks
// 24 h, per IP).
//
// The limits come from the policy file examples/internal/demo/policies.yaml,
// embedded in the binary. To change them without a rebuild, run a copy:
//
//	cp examples/internal/demo/policies.yaml /tmp/policies.yaml
//	POLICY_FILE=/tmp/policies.yaml go run ./examples/stdlib
//	# edit /tmp/policies.yaml, then
//	kill -HUP <pid>                          # or set POLICY_WATCH=2s
//
// The pid is the one the service logs in its "listening" line: under
// `go run` it differs from the go command's own pid, and a SIGHUP sent to
// the go command ends it instead of reloading. A reload keeps clients'
// counters; a file that fails validation is logged and the running
// policies stay.
//
// Behind a reverse proxy (nginx, a load balancer) every client arrives
// from the proxy's address: set TRUSTED_PROXIES to the proxies' addresses
// or CIDR prefixes, comma-separated, and the service keys each client by
// the address the proxies append to X-Forwarded-For (nginx:
// proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for). A peer
// that is not listed is keyed by its own address, whatever it sends; a
// client whose address is listed is taken for a proxy and names its own
// key, so list the proxies, not their clients' networks.
//
// With REDIS_URL set and Redis down at start, the service starts anyway:
// each policy applies its failure mode (api fails open, login fails
// closed) until Redis answers, and the log says when it does.
//
// With ADMIN_TOKEN set (at least 16 bytes) the admin API (package
// middleware/admin) is served under /admin/ to requests with
// "Authorization: Bearer <token>": list the policies, show or reset a
// client, switch a policy's mode, list blocked clients (with Redis), the
// clients refused most, and per-client overrides (the login policy allows
// them). Without it there is no /admin/.
package main
