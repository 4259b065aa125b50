// Command grpc is the example service of examples/stdlib that also serves
// gRPC, when asked, under the same policy file: GET /api/ping and the gRPC
// health check (grpc.health.v1.Health/Check) take one quota per client,
// the api policy's, classified by the file's "auth" classifier (a verified
// JWT subject, else the client address). It is a module of its own, so
// that the root module's graph holds no gRPC; run it from its directory:
//
//	cd examples/grpc
//	GRPC_ADDR=:9090 go run .                 # HTTP on :8080, gRPC on :9090
//	grpcurl -plaintext localhost:9090 grpc.health.v1.Health/Check
//	curl -i localhost:8080/api/ping          # the same client, the same quota
//
// or `make run-grpc` from the repository's root. Without GRPC_ADDR it
// serves HTTP alone, exactly as examples/stdlib does; every variable of
// that example (REDIS_URL, POLICY_FILE, ADMIN_TOKEN, ...) applies.
//
// The gRPC side follows the policy file as the HTTP side does: after a
// reload or a mode switch (the admin API's, or SIGHUP), the next call
// runs under the new policy, and in mode "off" calls pass undecided. A
// refused call ends with ResourceExhausted and a google.rpc.RetryInfo
// detail; every decided call carries ratelimit-limit, ratelimit-remaining
// and ratelimit-reset response metadata (see package grpclimit). Server
// reflection is served and never limited.
package main
