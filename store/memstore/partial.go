package memstore

// grant evaluates a [store.Request.Partial] request under its shard's
// lock and returns its grant (package store, "Partial grants"): it
// evaluates one unit first, and when that fits, the largest cost up to
// the request's that every limit admits (one unit plus the fewest left
// after it); the verdict and out are then those of that cost, which
// o.cost holds. When one unit does not fit (or the key is blocked) the
// grant is 0 and the verdict is that of one unit.
func (o *op) grant(out []outcome) int64 {
	want := o.cost
	o.cost = 1
	o.evaluate(out)
	if !o.v.allowed || o.v.blocked {
		return 0
	}
	g := want
	for i := range out {
		g = min(g, out[i].rem1+1)
	}
	if g > 1 {
		o.cost = g
		o.v = verdict{}
		clear(out)
		o.evaluate(out)
	}
	return g
}
