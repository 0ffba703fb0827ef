package connectidempotency

import (
	"maps"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// A connect-go call's headers are gRPC metadata to the interceptors: the
// same names, in lower case, with the values of binary ("-bin") keys
// decoded from base64, as gRPC carries them. What the interceptors set
// goes back the other way.

// incomingMD returns h as the incoming metadata of a gRPC call: every
// header, so the interceptors find the key and the resume point under
// their names, and a scope function ([idempotency.WithScope]) reads what a
// grpc-go server's would.
func incomingMD(h http.Header) metadata.MD {
	md := make(metadata.MD, len(h))
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		key := lower(k)
		if strings.HasSuffix(key, "-bin") {
			vs = decodeBinary(vs)
		}
		if had, ok := md[key]; ok { // two spellings of one name
			vs = append(had[:len(had):len(had)], vs...)
		}
		md[key] = vs
	}
	return md
}

// lower returns k in lower case: from [lowerNames] for the names most
// requests carry, without an allocation.
func lower(k string) string {
	if l, ok := lowerNames[k]; ok {
		return l
	}
	return strings.ToLower(k)
}

// lowerNames maps the header names connect-go's protocols and common
// layers send, as net/http spells them, to their lower case.
var lowerNames = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Authorization", "Baggage", "Connect-Accept-Encoding",
		"Connect-Content-Encoding", "Connect-Protocol-Version", "Connect-Timeout-Ms",
		"Content-Encoding", "Content-Length", "Content-Type", "Grpc-Accept-Encoding",
		"Grpc-Encoding", "Grpc-Timeout", "Idempotency-Key", "Idempotency-Resume-After", "Te",
		"Traceparent", "Tracestate", "User-Agent", "X-Forwarded-For", "X-Grpc-Web",
		"X-Request-Id", "X-User-Agent",
	} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

// responseMD returns the headers a handler set, h (or some of them, a
// response's header and its trailer), as metadata to record, with those of
// the protocols left out as connect-go leaves them out of what a handler
// sets (Content-Type, Grpc-Status and the like): they belong to the
// retry's own answer. It appends to md, which may be nil.
func responseMD(md metadata.MD, hs ...http.Header) metadata.MD {
	for _, h := range hs {
		for k, vs := range h {
			if len(vs) == 0 || isProtocolHeader(k) {
				continue
			}
			if md == nil {
				md = make(metadata.MD, len(h))
			}
			key := lower(k)
			if strings.HasSuffix(key, "-bin") {
				vs = decodeBinary(vs)
			}
			md[key] = append(md[key], vs...)
		}
	}
	return md
}

// addMD adds md to h, the values of binary keys encoded in base64 as
// connect-go sends them.
func addMD(h http.Header, md metadata.MD) {
	for k, vs := range md {
		binary := strings.HasSuffix(k, "-bin")
		for _, v := range vs {
			if binary {
				v = connect.EncodeBinaryHeader([]byte(v))
			}
			h.Add(k, v)
		}
	}
}

func decodeBinary(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		if b, err := connect.DecodeBinaryHeader(v); err == nil {
			v = string(b)
		}
		out[i] = v
	}
	return out
}

// protocolHeaders are the headers connect-go's protocols set themselves,
// which it does not take from a handler (its own list).
var protocolHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true, "Host": true,
	"User-Agent": true, "Trailer": true, "Date": true,
	"Accept-Encoding": true, "Trailer-": true, "Connect-Content-Encoding": true,
	"Connect-Accept-Encoding": true, "Connect-Timeout-Ms": true, "Connect-Protocol-Version": true,
	"Grpc-Encoding": true, "Grpc-Accept-Encoding": true, "Grpc-Timeout": true,
	"Grpc-Status": true, "Grpc-Message": true, "Grpc-Status-Details-Bin": true,
}

func isProtocolHeader(k string) bool {
	return protocolHeaders[http.CanonicalHeaderKey(k)]
}

// stripMarker removes the replay marker from h, under either of its names
// ([idempotency.ReplayedKey], [ReplayedHeader]) and any spelling: only a
// replay sets it, never a handler.
func stripMarker(hs ...http.Header) {
	for _, h := range hs {
		for k := range h {
			if isMarker(k) {
				delete(h, k)
			}
		}
	}
}

func isMarker(k string) bool {
	return strings.EqualFold(k, idempotency.ReplayedKey) || strings.EqualFold(k, ReplayedHeader)
}

// ReplayedHeader is the name of the replay marker on the Connect
// protocol: the HTTP header ([httpidempotency.ReplayedHeader]) that
// httpidempotency and gatewayidempotency answers carry, so that one HTTP
// client reads one name from every server. On gRPC and gRPC-Web the
// marker is the gRPC metadata [idempotency.ReplayedKey], as grpc-go
// servers send it.
const ReplayedHeader = httpidempotency.ReplayedHeader

// markerName returns the name the replay marker goes under on protocol, a
// connect.Peer's Protocol.
func markerName(protocol string) string {
	if protocol == connect.ProtocolConnect {
		return ReplayedHeader
	}
	return idempotency.ReplayedKey
}

// addReplayMD is addMD with the replay marker of md, if any, under
// marker ([markerName]).
func addReplayMD(h http.Header, md metadata.MD, marker string) {
	if vs, ok := md[idempotency.ReplayedKey]; ok && marker != idempotency.ReplayedKey {
		md = maps.Clone(md)
		delete(md, idempotency.ReplayedKey)
		h[http.CanonicalHeaderKey(marker)] = append(h[http.CanonicalHeaderKey(marker)], vs...)
	}
	addMD(h, md)
}

// clientMD returns h, a response's header or trailer, appended to md
// (which may be nil) as the client interceptors read metadata: the replay
// marker of the Connect protocol ([ReplayedHeader]) under its gRPC name,
// [idempotency.ReplayedKey].
func clientMD(md metadata.MD, h http.Header) metadata.MD {
	md = responseMD(md, h)
	if vs, ok := md[strings.ToLower(ReplayedHeader)]; ok {
		delete(md, strings.ToLower(ReplayedHeader))
		md[idempotency.ReplayedKey] = append(md[idempotency.ReplayedKey], vs...)
	}
	return md
}

// Replayed reports whether h, the header of a connect-go response or the
// metadata of a *connect.Error (its Meta), carries the replay marker
// ([ReplayedHeader]: true on the Connect protocol, [idempotency.ReplayedKey]:
// true on gRPC and gRPC-Web): the answer came from the store, not from a
// run of the handler. A response carries it in its header, an error in its
// metadata. A client that calls through [NewClientInterceptor] sees the
// marker of the attempt that answered.
func Replayed(h http.Header) bool {
	return h.Get(ReplayedHeader) == "true" || h.Get(idempotency.ReplayedKey) == "true"
}
