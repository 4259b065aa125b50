// Command chi is the ratekeeper example service on a chi router, with the
// same routes and behaviour as examples/stdlib.
//
//	go run ./examples/chi                   # in-memory store, :8080
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/chi
//	go run ./examples/chi token alice       # print a demo JWT for "alice"
package main
