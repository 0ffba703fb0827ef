package behaviourtest

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// callIDHeader carries a call's id to the work; the middleware's
// fingerprint (method, target, body) does not cover it.
const callIDHeader = "Behaviour-Call"

// httpEntry posts to a handler behind the middleware over httptest,
// through a recovery middleware that answers a panic 500, as a server's
// own does, and sees the caller leave.
type httpEntry struct {
	url    string
	client *http.Client
}

func newHTTP(t *testing.T, e *Env) Caller {
	srv := idempotency.NewServer(e.Store, e.Opts...)
	work := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, a, text := e.work.exec(r.Context(), r.Header.Get(callIDHeader))
		code := http.StatusOK
		switch a {
		case refuse, bulkyRefuse:
			code = http.StatusUnprocessableEntity
		case flake:
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, text)
	})
	inner := httpidempotency.Middleware(srv)(work)
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(callIDHeader)
		stop := context.AfterFunc(r.Context(), func() { e.Left(id) })
		defer stop()
		defer func() {
			if p := recover(); p != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		inner.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(outer)
	t.Cleanup(ts.Close)
	return &httpEntry{url: ts.URL + "/op", client: ts.Client()}
}

func (h *httpEntry) Call(ctx context.Context, key string, req int, id string) Result {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, strings.NewReader("request "+strconv.Itoa(req)))
	if err != nil {
		panic(err)
	}
	r.Header.Set(httpidempotency.KeyHeader, key)
	r.Header.Set(callIDHeader, id)
	resp, err := h.client.Do(r)
	if err != nil {
		return Result{Code: "gone"}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Result{Code: "gone"}
	}
	code := strconv.Itoa(resp.StatusCode)
	res := Result{
		Replayed: resp.Header.Get(httpidempotency.ReplayedHeader) == "true",
		Code:     code,
		Retry:    resp.Header.Get("Retry-After") != "",
		Answer:   append([]byte(code+"\n"), body...),
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == httpidempotency.ProblemContentType {
		var p httpidempotency.Problem
		_ = json.Unmarshal(body, &p)
		res.Reason = p.Reason
	}
	return res
}
