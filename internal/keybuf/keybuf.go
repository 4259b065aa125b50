// Package keybuf lends a request's own memory for its store key: the
// middleware's light path keeps a [Buffer] in the one allocation it makes
// per request, and the decision core builds the key there instead of in
// an allocation of its own, when the store copies a key in lent memory
// before keeping it ([Copier]).
//
// Memory is lent once and written once, by the borrower: a string made
// over it never changes for as long as anything refers to it. A lender
// may lend the same memory again (a Buffer set back to its zero value)
// once the request's decision is answered and nothing the decision left
// behind holds the key: a store copies a lent key before keeping it
// beyond the call ([Copier]), and the middleware gives a request's state
// back only when neither the decision nor the context went anywhere.
//
// The same memory carries the instant of the request's decision
// ([Buffer.Stamp], [Since]): the decision core reads the clock once for its
// Reset time, and the memory store, which reads the same clock, takes
// that reading instead of a second one of its own.
package keybuf

import (
	"context"
	"time"
	"unsafe"
)

// Size is the length of the longest key a Buffer holds.
const Size = 32

// Buffer is memory for one store key, and the instant the decision core
// read its clock for the request. Its zero value is ready to lend.
type Buffer struct {
	b       [Size]byte
	lent    bool
	stamped bool
	at      time.Duration // since base, when stamped
}

// base is the reading of the clock the instants of Buffers count from,
// so that a Buffer holds no pointer (a time.Time's Location): the
// middleware clears its Buffers for every request.
var base = time.Now()

// Stamp records t, a reading of the monotonic clock (as time.Now's), as
// the instant of the request's decision: a store that reads the same
// clock takes it instead of reading it again ([Since]). Only the decision
// core stamps, and only when its clock is the real one.
func (b *Buffer) Stamp(t time.Time) { b.at, b.stamped = t.Sub(base), true }

// Since returns how long after t0 (a reading of the monotonic clock, as
// time.Now's) the instant ctx's decision was stamped with
// ([Buffer.Stamp]) falls, or false when ctx lends no Buffer or its Buffer
// holds no instant.
func Since(ctx context.Context, t0 time.Time) (time.Duration, bool) {
	l, ok := ctx.(Lender)
	if !ok {
		return 0, false
	}
	b := l.KeyBuffer()
	if !b.stamped {
		return 0, false
	}
	return b.at - t0.Sub(base), true
}

// Lend returns the buffer's memory, empty with capacity [Size], the first
// time it is called, and nil after: what was lent is never lent again.
func (b *Buffer) Lend() []byte {
	if b.lent {
		return nil
	}
	b.lent = true
	return b.b[:0]
}

// Lender is implemented by a request's context that lends its [Buffer].
// Only the module can name Buffer, so no context outside it lends one.
type Lender interface {
	KeyBuffer() *Buffer
	// Unlent returns the context the lender wraps, which its lent
	// memory is not part of (see [Unlent]).
	Unlent() context.Context
}

// Unlent returns the context a store may keep past a call made with ctx:
// ctx itself, or, when ctx lends memory, the context it wraps. A lender
// goes back to a pool once its request's decision is answered and then
// serves another request, so a store that keeps a call's context beyond
// the call (a call still in flight when its caller was answered, whose
// round trip runs client hooks with the context's values) must keep the
// wrapped context instead: it is the request's own, never reused.
func Unlent(ctx context.Context) context.Context {
	if l, ok := ctx.(Lender); ok {
		return l.Unlent()
	}
	return ctx
}

// Copier is implemented by a store that copies a key held in memory a
// request's context lends ([Holds]) before keeping it beyond the call:
// the memory and Redis stores. Only the module can name Buffer, so no
// store outside it claims to.
type Copier interface {
	CopiesLentKeys(*Buffer)
}

// Holds reports whether key is held in the memory ctx lends: a store must
// copy such a key before keeping it, or it would keep the request's whole
// state alive.
func Holds(ctx context.Context, key string) bool {
	l, ok := ctx.(Lender)
	if !ok || len(key) == 0 {
		return false
	}
	b := l.KeyBuffer()
	p, start := uintptr(unsafe.Pointer(unsafe.StringData(key))), uintptr(unsafe.Pointer(&b.b[0]))
	return p >= start && p < start+Size
}
