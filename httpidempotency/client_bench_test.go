package httpidempotency_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// BenchmarkTransport compares a bare http.Client that sets each request's
// key header itself with the same client over [httpidempotency.Transport],
// which mints the key (transport) or finds the caller's key header
// (transport-keyed), at 1 and 64 concurrent callers, two ways:
//
//   - server rows send each request to a real httptest server over
//     loopback TCP, whose handler ([created]) runs behind the middleware
//     on a memory store under a new key every request, so they include
//     net/http's client and server, the network stack and the middleware;
//   - stub rows send each request to a RoundTripper that answers 201 in
//     memory, so the transport's own cost stands out.
//
// Compare each row with bare of the same way and callers in the same run.
func BenchmarkTransport(b *testing.B) {
	ways := []struct {
		name string
		base func(b *testing.B) (http.RoundTripper, string)
	}{{"server", serverBase}, {"stub", stubBase}}
	for _, way := range ways {
		for _, row := range []string{"bare", "transport", "transport-keyed"} {
			b.Run(way.name+"/"+row, func(b *testing.B) {
				benchtest.ForCallers(b, func(b *testing.B, callers int) {
					base, url := way.base(b)
					rt, setKey := base, true
					switch row {
					case "transport":
						rt, setKey = httpidempotency.Transport(base), false
					case "transport-keyed":
						rt = httpidempotency.Transport(base)
					}
					benchRequests(b, clientSender(&http.Client{Transport: rt}, url, setKey), callers, false)
				})
			})
		}
	}
}

// serverBase serves [created] behind the middleware, on a new memory store,
// on a new httptest server, and returns a transport that keeps a
// connection per caller, and the server's URL.
func serverBase(b *testing.B) (http.RoundTripper, string) {
	mem := memorystore.New()
	b.Cleanup(func() { _ = mem.Close() })
	hs := httptest.NewServer(httpidempotency.Middleware(idempotency.NewServer(mem))(http.HandlerFunc(created)))
	b.Cleanup(hs.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: slices.Max(benchtest.Callers)}
	b.Cleanup(tr.CloseIdleConnections) // before hs.Close: cleanups run last first
	return tr, hs.URL
}

// stubBase returns a RoundTripper that reads the request body and answers
// 201 without a network.
func stubBase(*testing.B) (http.RoundTripper, string) {
	return stub{}, "http://stub.invalid"
}

type stub struct{}

func (stub) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, req.Body)
	_ = req.Body.Close()
	return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// clientSender sends each request of the benchmark with client, with the
// key header when setKey, and returns the answer's status and its
// [httpidempotency.ReplayedHeader].
func clientSender(client *http.Client, url string, setKey bool) sender {
	return func(ctx context.Context, key string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/orders", strings.NewReader(benchBody))
		if err != nil {
			return 0, "", err
		}
		if setKey {
			req.Header.Set(httpidempotency.KeyHeader, key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get(httpidempotency.ReplayedHeader), err
	}
}
