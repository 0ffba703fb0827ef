package httpidempotency

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/clientretry"
)

// maxPeekBytes bounds what [Transport] reads of a 409's body to tell this
// library's in-flight problem (a few hundred bytes) from any other 409.
const maxPeekBytes = 16 << 10

// maxDrainBytes bounds what it reads of a retried response's body, so that
// its connection can be used again; a longer body is closed unread.
const maxDrainBytes = 64 << 10

// retry makes up to maxAttempts attempts of req, the first one with first
// (req carrying its key).
func (t *transport) retry(req, first *http.Request) (*http.Response, error) {
	ctx := req.Context()
	rewindable := first.Body == nil || first.Body == http.NoBody || first.GetBody != nil
	r := first
	for attempt := 1; ; attempt++ {
		resp, err := t.base.RoundTrip(r)
		if attempt >= t.c.maxAttempts || ctx.Err() != nil {
			return resp, err
		}
		pushback, retry := retryable(resp, err)
		if !retry {
			return resp, err
		}
		delay, ok := clientretry.Delay(ctx, t.c.backoff, attempt, pushback, t.c.maxPushback)
		if !ok {
			return resp, err // no retry asked for, or it could not start in time
		}
		if !rewindable {
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrNotRewindable, err)
			}
			return resp, err
		}
		next, rerr := rewound(r)
		if rerr != nil {
			if err != nil {
				err = fmt.Errorf("%w (not retried: rewinding the request body failed: %v)", err, rerr)
			}
			return resp, err
		}
		discard(resp)
		if werr := clientretry.Wait(ctx, delay); werr != nil {
			if next.Body != nil {
				_ = next.Body.Close()
			}
			return nil, werr
		}
		if t.c.onRetry != nil {
			t.c.onRetry(req, attempt+1, resp, err)
		}
		r = next
	}
}

// rewound returns a copy of r for another attempt, with its body from
// r.GetBody.
func rewound(r *http.Request) (*http.Request, error) {
	next := r.WithContext(r.Context()) // a shallow copy
	if r.GetBody == nil {
		return next, nil // no body, or http.NoBody
	}
	body, err := r.GetBody()
	if err != nil {
		return nil, err
	}
	next.Body = body
	return next, nil
}

// retryable reports whether the answer of an attempt, resp or err, is
// retried, and the wait its Retry-After asks for.
func retryable(resp *http.Response, err error) (time.Duration, bool) {
	if err != nil {
		return 0, !permanent(err)
	}
	if resp.Header.Get(ReplayedHeader) == "true" {
		return 0, false // a stored answer: a retry gets it again
	}
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
	case http.StatusConflict:
		if !inFlight(resp) {
			return 0, false
		}
	default:
		return 0, false
	}
	return retryAfter(resp.Header)
}

// permanent reports whether err, a failed attempt's error, is one that a
// retry cannot fix: the server's certificate was refused, or it does not
// speak TLS.
func permanent(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &unknown) ||
		errors.As(err, &hostname) || errors.As(err, &invalid)
}

// inFlight reports whether a 409 is this library's problem with reason
// [idempotency.ErrKeyInUse]. It reads the start of the body and puts it
// back, so the caller can read the whole body still.
func inFlight(resp *http.Response) bool {
	media, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || media != ProblemContentType || resp.Body == nil {
		return false
	}
	head, rerr := io.ReadAll(io.LimitReader(resp.Body, maxPeekBytes+1))
	resp.Body = &peeked{Reader: io.MultiReader(bytes.NewReader(head), errReader{rerr}, resp.Body), Closer: resp.Body}
	if rerr != nil || len(head) > maxPeekBytes {
		return false
	}
	var p struct{ Type, Reason string }
	return json.Unmarshal(head, &p) == nil && p.Type == ProblemType && p.Reason == idempotency.ErrKeyInUse.Reason
}

// peeked is a response body whose start was read and put back.
type peeked struct {
	io.Reader
	io.Closer
}

// errReader returns its error, or io.EOF for a nil one.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// retryAfter returns the wait a response's Retry-After asks for: a number
// of seconds, or an HTTP date taken relative to the response's Date (the
// server's clock) when it has one, else to this client's clock; 0 when
// there is none or the date has passed. It reports false for a value that
// is neither, which ends the retries, as a malformed pushback does for the
// gRPC client (gRFC A6).
func retryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, true
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) || err == nil && n > math.MaxInt64/uint64(time.Second):
			return math.MaxInt64, true // longer than any cap
		case err != nil:
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	now := time.Now()
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return max(at.Sub(now), 0), true
}

// discard reads the rest of a retried response's body, up to a bound, and
// closes it, so that its connection can carry the next attempt.
func discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrainBytes)
	_ = resp.Body.Close()
}
