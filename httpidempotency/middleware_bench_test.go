package httpidempotency_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

// benchBody is the body every benchmark request sends.
const benchBody = `{"customer":"benchmark","amount_cents":4200}`

// BenchmarkMiddleware compares a bare handler ([created]) with the same
// handler behind the middleware on a memory store, executed (a new key
// every request) and replayed (one key, stored before the timer starts),
// at 1 and 64 concurrent callers, two ways:
//
//   - server rows send each request to a real httptest server over
//     loopback TCP, so they include net/http's client and server and the
//     network stack;
//   - recorder rows call the handler's ServeHTTP with an
//     httptest.ResponseRecorder and no network, so the middleware's own
//     cost stands out.
//
// Every row sends the same body and key header, so the middleware is the
// only difference: compare each row with bare of the same way and callers
// in the same run. A row's store is new for every b.N tried.
func BenchmarkMiddleware(b *testing.B) {
	ways := []struct {
		name string
		send func(b *testing.B, h http.Handler) sender
	}{{"server", serverSender}, {"recorder", recorderSender}}
	for _, way := range ways {
		for _, row := range []string{"bare", "executed", "replay"} {
			b.Run(way.name+"/"+row, func(b *testing.B) {
				benchtest.ForCallers(b, func(b *testing.B, callers int) {
					var h http.Handler = http.HandlerFunc(created)
					if row != "bare" {
						mem := testkit.NewMemoryStore(b)
						h = httpidempotency.Middleware(idempotency.NewServer(mem))(h)
					}
					benchRequests(b, way.send(b, h), callers, row == "replay")
				})
			})
		}
	}
}

// A sender sends one request of the benchmark with key and returns the
// answer's status and its [httpidempotency.ReplayedHeader].
type sender func(ctx context.Context, key string) (status int, replayed string, err error)

// serverSender serves h on a new httptest server and sends each request
// to it, with a client that keeps a connection per caller.
func serverSender(b *testing.B, h http.Handler) sender {
	hs := httptest.NewServer(h)
	b.Cleanup(hs.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: slices.Max(benchtest.Callers)}
	b.Cleanup(tr.CloseIdleConnections) // before hs.Close: cleanups run last first
	client := &http.Client{Transport: tr}
	return func(ctx context.Context, key string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/orders", strings.NewReader(benchBody))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set(httpidempotency.KeyHeader, key)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get(httpidempotency.ReplayedHeader), err
	}
}

// recorderSender calls h.ServeHTTP with a new request and recorder each
// time.
func recorderSender(_ *testing.B, h http.Handler) sender {
	return func(ctx context.Context, key string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(benchBody))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set(httpidempotency.KeyHeader, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Header().Get(httpidempotency.ReplayedHeader), nil
	}
}

// benchRequests sends b.N requests from callers goroutines, each with a
// new key, or with replay one key sent once before the timer starts; it
// fails an answer that is not 201, or not marked as a replay exactly when
// it should be.
func benchRequests(b *testing.B, send sender, callers int, replay bool) {
	ctx := context.Background()
	keyOf := benchtest.Keys(replay)
	want := ""
	if replay {
		want = "true"
		if status, replayed, err := send(ctx, keyOf(0)); err != nil || status != http.StatusCreated || replayed != "" {
			b.Fatalf("first request: %d, replayed %q, %v", status, replayed, err)
		}
	}
	runtime.GC() // no garbage of the rows before this one
	b.ResetTimer()
	benchtest.Parallel(b, callers, func(i int64) {
		if status, replayed, err := send(ctx, keyOf(i)); err != nil || status != http.StatusCreated || replayed != want {
			b.Errorf("%d, replayed %q, %v; want 201, replayed %q", status, replayed, err, want)
		}
	})
}
