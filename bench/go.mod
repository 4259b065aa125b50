module github.com/ratekeeper/ratekeeper/bench

go 1.26.0

replace github.com/ratekeeper/ratekeeper => ../

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-chi/httprate v0.16.1 // indirect
	github.com/go-redis/redis_rate/v10 v10.0.1 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/sethvargo/go-limiter v0.7.1 // indirect
	github.com/throttled/throttled/v2 v2.15.0 // indirect
	github.com/ulule/limiter/v3 v3.11.2 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)
