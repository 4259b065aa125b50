// Command stdlib is the ratekeeper example service on http.ServeMux.
//
//	go run ./examples/stdlib                # in-memory store, :8080
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/stdlib
//	go run ./examples/stdlib token alice    # print a demo JWT for "alice"
//
// Routes: GET /healthz and GET /metrics (never limited, no rate-limit
// headers), GET /api/ping (anonymous: 10/min per IP, burst 10; with
// "Authorization: Bearer <token>": 100/min per subject), GET /api/search
// (5 units of the same quota), POST /login (5/min blocks 15 min, 20/day
// blocks 24 h, per IP).
//
// The limits come from the policy file examples/internal/demo/policies.yaml,
// embedded in the binary. To change them without a rebuild, run a copy:
//
//	cp examples/internal/demo/policies.yaml /tmp/policies.yaml
//	POLICY_FILE=/tmp/policies.yaml go run ./examples/stdlib
//	# edit /tmp/policies.yaml, then
//	kill -HUP <pid>                          # or set POLICY_WATCH=2s
//
// A reload keeps clients' counters; a file that fails validation is logged
// and the running policies stay.
//
// With ADMIN_TOKEN set (at least 16 bytes) the admin API (package
// middleware/admin) is served under /admin/ to requests with
// "Authorization: Bearer <token>": list the policies, show or reset a
// client, switch a policy's mode, list blocked clients (with Redis), the
// clients refused most, and per-client overrides (the login policy allows
// them). Without it there is no /admin/.
package main
