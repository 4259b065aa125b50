// Package integration holds the tests that run ratekeeper against a real
// Redis server started in a container with testcontainers-go: the store
// conformance suite, exactness under concurrency across several middleware
// instances, key expiry, multi-instance sharing, identity tiers, abuse
// blocks, de-duplication, multi-window limits, failure modes (Redis paused,
// stopped, restarted, script cache flushed), Redis Cluster and benchmarks.
//
// It is a separate module so that library users never download
// testcontainers-go; a replace directive points it at the repository root.
//
// # Running
//
// The tests need Docker and an image that runs redis-server. On machines
// without registry access, build one from the host's Debian package first:
//
//	make redis-image   # ratekeeper/redis:local
//	make test-integration
//
// Environment:
//
//   - RATEKEEPER_REDIS_IMAGE: the image to run (default
//     "ratekeeper/redis:local"). Any image whose entrypoint is
//     redis-server works, the official redis:7 image included.
//   - TESTCONTAINERS_HOST_OVERRIDE: required, a loopback address such as
//     127.0.0.1. Without it testcontainers would dial the Docker network's
//     gateway address; the tests refuse to start instead.
//   - TESTCONTAINERS_RYUK_DISABLED=true: required; the reaper image cannot
//     be pulled here and every test cleans up its own containers.
//   - RATEKEEPER_REQUIRE_REDIS=1: a missing Docker daemon or image fails the
//     run instead of skipping the tests (CI sets it).
//
// TestRedisCluster needs no container: it starts a three-master Redis
// Cluster from the host's /usr/bin/redis-server processes on loopback ports
// and runs the conformance suite, one-slot-per-decision checks and the
// concurrency test through a ClusterClient.
//
// One Redis container serves the whole package run; every test works under
// its own random key prefix and nothing flushes the shared server. Tests
// that pause, stop or restart Redis start a container of their own.
package integration
