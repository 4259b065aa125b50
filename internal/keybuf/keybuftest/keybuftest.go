// Package keybuftest gives tests a context that lends key memory
// (keybuf.Lender), as the middleware's pooled request state does, so that
// a store's or the decision core's tests can check what they do with a
// key built in lent memory and with the context that lends it.
package keybuftest

import (
	"context"
	"unsafe"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
)

// Ctx is a context that lends a key buffer. Its zero value needs a
// Context before use.
type Ctx struct {
	context.Context
	b keybuf.Buffer
}

var _ keybuf.Lender = (*Ctx)(nil)

// KeyBuffer implements keybuf.Lender.
func (c *Ctx) KeyBuffer() *keybuf.Buffer { return &c.b }

// Unlent implements keybuf.Lender: the context Ctx wraps.
func (c *Ctx) Unlent() context.Context { return c.Context }

// Probe is a context key only a Ctx answers, with itself: a context that
// wraps a Ctx answers it too, so ctx.Value(Probe{}) != nil tells that ctx
// reaches the lender.
type Probe struct{}

// Value answers Probe with c and every other key as the wrapped context.
func (c *Ctx) Value(k any) any {
	if _, ok := k.(Probe); ok {
		return c
	}
	return c.Context.Value(k)
}

// Lent returns a Ctx over parent, key copied into the memory it lends
// (the string a decision core would build there) and that memory, which a
// test writes over as the lender's next request would.
func Lent(parent context.Context, key string) (ctx *Ctx, lent string, mem []byte) {
	ctx = &Ctx{Context: parent}
	mem = append(ctx.b.Lend(), key...)
	return ctx, unsafe.String(unsafe.SliceData(mem), len(mem)), mem
}
