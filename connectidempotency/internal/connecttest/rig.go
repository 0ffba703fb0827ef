package connecttest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"connectrpc.com/connect"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
)

// Protocol is one way a connect-go client reaches a connect-go server: a
// wire protocol (Connect, gRPC or gRPC-Web) over HTTP/1.1 or HTTP/2.
type Protocol struct {
	// Name names the protocol's subtests: "Connect/HTTP1".
	Name string
	// HTTP2 serves HTTP/2 (over TLS); else HTTP/1.1 in clear text.
	HTTP2 bool
	// Options are the client's: connect.WithGRPC(), connect.WithGRPCWeb(),
	// or none for the Connect protocol.
	Options []connect.ClientOption
}

// Protocols lists every protocol the adapter's tests run over: the
// Connect protocol and gRPC-Web over both HTTP versions, gRPC over HTTP/2,
// which it needs.
var Protocols = []Protocol{
	{Name: "Connect/HTTP1"},
	{Name: "Connect/HTTP2", HTTP2: true},
	{Name: "GRPC/HTTP2", HTTP2: true, Options: []connect.ClientOption{connect.WithGRPC()}},
	{Name: "GRPCWeb/HTTP1", Options: []connect.ClientOption{connect.WithGRPCWeb()}},
	{Name: "GRPCWeb/HTTP2", HTTP2: true, Options: []connect.ClientOption{connect.WithGRPCWeb()}},
}

// Server is a connect-go server a test started, and the HTTP client that
// reaches it.
type Server struct {
	// URL is the server's base URL.
	URL string
	// HTTP is a client of the server's HTTP version; behind a proxy, it
	// dials the proxy.
	HTTP *http.Client
	// Proxy is the fault proxy between the two, nil without one.
	Proxy *faultproxy.Proxy
}

// Serve serves h with httptest over p's HTTP version until the test ends.
func Serve(tb testing.TB, h http.Handler, p Protocol) *Server {
	tb.Helper()
	ts := httptest.NewUnstartedServer(h)
	if p.HTTP2 {
		ts.EnableHTTP2 = true
		ts.StartTLS()
	} else {
		ts.Start()
	}
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tb.Cleanup(ts.Close)
	tb.Cleanup(tr.CloseIdleConnections) // before ts.Close: cleanups run last first
	return &Server{URL: ts.URL, HTTP: &http.Client{Transport: tr}}
}

// ServeProxied serves h as [Serve] does, behind a fault proxy: the client
// dials the proxy, and cutting its connections is a real network cut.
func ServeProxied(tb testing.TB, h http.Handler, p Protocol) *Server {
	tb.Helper()
	s := Serve(tb, h, p)
	u, err := url.Parse(s.URL)
	if err != nil {
		tb.Fatalf("connecttest: %v", err)
	}
	proxy, err := faultproxy.New(u.Host)
	if err != nil {
		tb.Fatalf("connecttest: proxy: %v", err)
	}
	tb.Cleanup(func() { _ = proxy.Close() })
	var d net.Dialer
	tr := s.HTTP.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, proxy.Addr())
	}
	s.Proxy = proxy
	return s
}
