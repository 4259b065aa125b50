package grpclimit

import (
	"context"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// callRequest presents a call as the HTTP/2 request it travels in, so that
// the key functions of package keyfunc derive its identity by the same
// rules as for an HTTP request:
//
//   - RemoteAddr is the peer's address ("203.0.113.7:52100"); a peer that
//     is not an IP:port pair (a Unix socket, an in-memory listener) keeps
//     its own text, which keyfunc's address functions refuse.
//   - Header holds the request metadata under canonical header names
//     ("x-forwarded-for" becomes X-Forwarded-For, "authorization"
//     Authorization), binary ("-bin") entries as their decoded bytes;
//     Host is the ":authority".
//   - Method is POST, URL.Path, RequestURI and Pattern are the full
//     method name ("/pkg.Service/Method"), so keyfunc.Route keys by the
//     method.
//   - The context is the call's, for keyfunc.FromContextFunc.
func callRequest(ctx context.Context, fullMethod string) *http.Request {
	md, _ := metadata.FromIncomingContext(ctx)
	h := make(http.Header, len(md))
	host := ""
	for k, vs := range md {
		switch {
		case k == ":authority":
			if len(vs) > 0 {
				host = vs[0]
			}
		case strings.HasPrefix(k, ":"):
		default:
			h[textproto.CanonicalMIMEHeaderKey(k)] = vs
		}
	}
	r := &http.Request{
		Method:     http.MethodPost,
		URL:        &url.URL{Path: fullMethod},
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     h,
		Host:       host,
		RemoteAddr: peerAddr(ctx),
		RequestURI: fullMethod,
		Pattern:    fullMethod,
	}
	return r.WithContext(ctx)
}

// peerAddr returns the text of the call's peer address, "" without one.
func peerAddr(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	return p.Addr.String()
}
