// Package contract holds the parts of package store's contract that every
// store of this module applies the same way and that a user of a store
// never calls: the effective cost and de-duplication bound of a request,
// the capacity check of a request whose limits an override scaled, the
// stored form of an override and its scaling of a limit, and the rules
// and the deciding part of a stacked decision.
//
// Package store states the semantics; this package computes them once for
// the memory store, the Redis store, the hybrid store and the conformance
// suite. It is internal so that none of it is part of the public API.
package contract
