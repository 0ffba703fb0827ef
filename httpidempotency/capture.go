package httpidempotency

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"

	httpv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/http/v1"
)

// recorder is the ResponseWriter a handler behind the middleware writes
// to. It never lets [ReplayedHeader] out on a live answer, in any letter
// case. A keyed request's recorder (newRecorder) also keeps a copy of the
// answer for the store: its status, the headers the handler set (not
// those of the layers in front, which a retry's own layers set again),
// and up to max bytes of the body. A response that cannot be kept whole
// (a longer body, a Flush, a hijack, trailers) is marked so, never cut
// short.
type recorder struct {
	w      http.ResponseWriter
	keep   bool // keep a copy: the request is keyed
	max    int
	status int
	// outer is the headers of the layers in front, as they were when the
	// handler started; header is what the handler set, changed or removed
	// (nil values) of them, when it sent the status.
	outer, header http.Header
	// sniffed: net/http sniffed the live answer's Content-Type, as it
	// does for a body without a type, an encoding or a transfer coding.
	sniffed  bool
	trailers bool // the handler declared trailers
	body     bytes.Buffer
	// lost: the response cannot be replayed as a client got it.
	lost bool
	// gone is the first error of the live client's connection (or of a
	// layer in front). From then on the handler's writes go to the copy
	// alone and succeed: it runs on detached, and its whole answer is
	// the retry's.
	gone error
}

var (
	_ http.Flusher  = (*recorder)(nil)
	_ http.Hijacker = (*recorder)(nil)
)

// newRecorder returns the recorder of a keyed request's handler.
func newRecorder(w http.ResponseWriter, limit int) *recorder {
	rec := &recorder{w: w, keep: true, max: limit}
	if h := w.Header(); len(h) > 0 {
		rec.outer = h.Clone()
	}
	return rec
}

// Header returns the live response's headers.
func (rec *recorder) Header() http.Header { return rec.w.Header() }

// WriteHeader sends the status and the headers, without [ReplayedHeader],
// and keeps them. An informational (1xx) status goes through but is not
// kept: a replay sends the final response only.
func (rec *recorder) WriteHeader(code int) {
	h := rec.w.Header()
	stripReplayed(h)
	if rec.status != 0 || (code >= 100 && code < 200 && code != http.StatusSwitchingProtocols) {
		rec.w.WriteHeader(code) // net/http reports a superfluous call
		return
	}
	rec.status = code
	if rec.keep {
		rec.header = handlerHeaders(rec.outer, h)
		_, typed := h["Content-Type"]
		rec.sniffed = !typed && h.Get("Content-Encoding") == "" && h.Get("Transfer-Encoding") == ""
		_, rec.trailers = h["Trailer"]
	}
	rec.w.WriteHeader(code)
}

// stripReplayed removes [ReplayedHeader] from h in every letter case a
// handler can set through the map, as a header or a trailer (a declared
// one, or one named with [http.TrailerPrefix]).
func stripReplayed(h http.Header) {
	for name := range h {
		if strings.EqualFold(strings.TrimPrefix(name, http.TrailerPrefix), ReplayedHeader) {
			delete(h, name)
		}
	}
}

// handlerHeaders returns the headers of live that the handler set or
// changed since outer was taken, and those of outer it removed, with nil
// values; each a copy.
func handlerHeaders(outer, live http.Header) http.Header {
	if len(outer) == 0 {
		if h := live.Clone(); h != nil {
			return h
		}
		return http.Header{}
	}
	h := make(http.Header, len(live))
	for name, v := range live {
		if o, ok := outer[name]; !ok || !slices.Equal(o, v) {
			h[name] = slices.Clone(v)
		}
	}
	for name := range outer {
		if _, ok := live[name]; !ok {
			h[name] = nil
		}
	}
	return h
}

// Write sends p and keeps it, up to max bytes in all. A write the live
// connection refuses is kept whole and reported done: the copy is the
// retry's answer. net/http's refusals of the handler's own mistakes (a
// body where none is allowed, more than its Content-Length) are the live
// client's answer as well, and reach the handler.
func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	if !rec.keep {
		return rec.w.Write(p)
	}
	if rec.gone == nil {
		n, err := rec.w.Write(p)
		if err == nil || errors.Is(err, http.ErrBodyNotAllowed) || errors.Is(err, http.ErrContentLength) ||
			errors.Is(err, http.ErrHijacked) {
			rec.keepBody(p[:n])
			return n, err
		}
		rec.gone = err
		if rec.lost {
			return n, err
		}
	} else if rec.lost {
		return 0, rec.gone // nobody gets these bytes, now or on a retry
	}
	rec.keepBody(p)
	return len(p), nil
}

// keepBody adds p to the copy, or marks the response lost when the copy
// would pass max bytes.
func (rec *recorder) keepBody(p []byte) {
	switch {
	case rec.lost:
	case rec.body.Len()+len(p) > rec.max:
		rec.lost = true
		rec.body = bytes.Buffer{}
	default:
		rec.body.Write(p)
	}
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

// finish strips [ReplayedHeader] from the response when the handler
// returns or panics: net/http, or a recovery layer in front, sends the
// headers of a response not yet sent, and the trailers of any, as they
// are.
func (rec *recorder) finish() { stripReplayed(rec.w.Header()) }

// outcome returns the response as the handler answered it, once it has
// returned; a handler that wrote nothing sends 200 now, as net/http would.
func (rec *recorder) outcome() *httpv1.Response {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	if rec.lost || rec.trailers || hasTrailers(rec.w.Header()) {
		return &httpv1.Response{NotRetained: true}
	}
	h := rec.header
	if rec.sniffed && rec.body.Len() > 0 {
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

// hasTrailers reports whether the handler set trailers through the
// [http.TrailerPrefix], which the middleware does not keep.
func hasTrailers(now http.Header) bool {
	for name := range now {
		if strings.HasPrefix(name, http.TrailerPrefix) {
			return true
		}
	}
	return false
}
