// Package inprocess holds the in-process benchmarks of the HTTP
// middlewares: ratekeeper's on its memory store beside the peers' own
// in-memory middlewares, one request at a time through each, so that the
// cost of the middleware itself shows without Redis or a network. Run
//
//	go test -run '^$' -bench . -benchmem -cpu 1,2 ./inprocess
//
// Instruction counts, which a busy machine does not blur, come from the
// test binary under callgrind with a fixed -test.benchtime=Nx.
package inprocess
