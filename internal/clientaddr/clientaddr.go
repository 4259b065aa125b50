// Package clientaddr links package middleware to what package keyfunc
// keeps unexported: a request's client address found without
// [keyfunc.IPOptions.UsePeerOnMalformed], for an exemption, which must not
// judge a request whose client is unknown by its proxy's address.
//
// Package keyfunc sets Strict when it is initialised; the middleware
// imports keyfunc, so Strict is set before any use.
package clientaddr

import (
	"net/http"
	"net/netip"
)

// Strict returns the client address of r as c (a *keyfunc.ClientIP)
// finds it, failing where a trusted forwarding header cannot name the
// client even when c would key such a request by its peer.
var Strict func(c any, r *http.Request) (netip.Addr, error)
