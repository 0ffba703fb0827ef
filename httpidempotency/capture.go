package httpidempotency

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"sort"
	"strings"

	httpv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/http/v1"
)

// recorder is the ResponseWriter a claimed handler writes to: everything
// goes through to the live client at once, and a copy of the status, the
// headers and up to max bytes of the body is kept for the store. A
// response that cannot be kept whole (a longer body, a Flush, a hijack,
// trailers) is marked so, never cut short.
type recorder struct {
	w      http.ResponseWriter
	max    int
	status int
	header http.Header // the headers as they were sent
	body   bytes.Buffer
	// lost: the response cannot be replayed as the client got it.
	lost bool
}

var (
	_ http.Flusher  = (*recorder)(nil)
	_ http.Hijacker = (*recorder)(nil)
)

// Header returns the live response's headers.
func (rec *recorder) Header() http.Header { return rec.w.Header() }

// WriteHeader sends the status and the headers, without [ReplayedHeader],
// and keeps them. An informational (1xx) status goes through but is not
// kept: a replay sends the final response only.
func (rec *recorder) WriteHeader(code int) {
	if rec.status != 0 || (code >= 100 && code < 200 && code != http.StatusSwitchingProtocols) {
		rec.w.WriteHeader(code) // net/http reports a superfluous call
		return
	}
	rec.w.Header().Del(ReplayedHeader)
	rec.status, rec.header = code, rec.w.Header().Clone()
	rec.w.WriteHeader(code)
}

// Write sends p and keeps what the client got of it, up to max bytes in
// all.
func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	n, err := rec.w.Write(p)
	switch {
	case rec.lost:
	case rec.body.Len()+n > rec.max:
		rec.lost = true
		rec.body = bytes.Buffer{}
	default:
		rec.body.Write(p[:n])
	}
	return n, err
}

// Flush sends what was written so far: the response is streamed, so it is
// not kept.
func (rec *recorder) Flush() { _ = rec.FlushError() }

// FlushError is Flush for http.ResponseController, reporting the error.
func (rec *recorder) FlushError() error {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	rec.lost = true
	return http.NewResponseController(rec.w).Flush()
}

// Hijack hands the connection to the handler: what it writes there is
// not kept.
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	rec.lost = true
	if rec.status == 0 {
		// The connection is the handler's now: outcome must not write a
		// header on it (net/http would log the attempt).
		rec.status = http.StatusOK
	}
	return http.NewResponseController(rec.w).Hijack()
}

// Unwrap returns the live ResponseWriter, for http.ResponseController's
// other methods (deadlines, full duplex).
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.w }

// outcome returns the response as the client got it, once the handler has
// returned; a handler that wrote nothing sends 200 now, as net/http would.
func (rec *recorder) outcome() *httpv1.Response {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	if rec.lost || hasTrailers(rec.header, rec.w.Header()) {
		return &httpv1.Response{NotRetained: true}
	}
	h := rec.header
	if _, set := h["Content-Type"]; !set && rec.body.Len() > 0 {
		// net/http sniffs the type of the first bytes it sends, the same
		// bytes a replay sends first: store what it sent.
		h.Set("Content-Type", http.DetectContentType(rec.body.Bytes()))
	}
	resp := &httpv1.Response{Status: int32(rec.status), Body: rec.body.Bytes()}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		resp.Headers = append(resp.Headers, &httpv1.Header{Name: name, Values: h[name]})
	}
	return resp
}

// hasTrailers reports whether the handler declared or set trailers, which
// the middleware does not keep.
func hasTrailers(sent, now http.Header) bool {
	if _, ok := sent["Trailer"]; ok {
		return true
	}
	for name := range now {
		if strings.HasPrefix(name, http.TrailerPrefix) {
			return true
		}
	}
	return false
}
