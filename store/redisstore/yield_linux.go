package redisstore

import "syscall"

// yieldThread lets any other thread waiting for this thread's core run
// first (sched_yield(2)); with none waiting it returns at once.
//
// A poll (see poller.try) keeps its thread running while the reply is on
// its way. When the server runs on the same host, the kernel often wakes
// it on the core of the thread that just wrote to it, which is the
// polling one: without a yield the server waits for that thread's time
// slice to end before it can even read the call, and the poll that was
// to save a wake-up costs hundreds of microseconds instead.
func yieldThread() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
