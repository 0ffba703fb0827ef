package httpidempotency_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// With the middleware around a router, a request sent before its route
// existed gets the router's 404 (or 405 for a method the route lacks),
// and one refused by an authentication layer inside the middleware its
// 401 or 403: none of them is kept, so the same key after the deploy, or
// with credentials, runs the handler, whose answer is then kept. The
// router's 307 to the path with its trailing slash is not kept either:
// the client follows it with the same key, to the handler.
func TestRoutingAnswersNotKept(t *testing.T) {
	t.Parallel()
	var mux atomic.Pointer[http.ServeMux]
	before := http.NewServeMux()
	before.HandleFunc("GET /orders", func(http.ResponseWriter, *http.Request) {})
	mux.Store(before)
	var orders atomic.Int64 // runs of the route's handler itself
	auth := func(next http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			switch r.Header.Get("Authorization") {
			case "":
				w.WriteHeader(http.StatusUnauthorized)
			case "Bearer good":
				next(w, r)
			default:
				w.WriteHeader(http.StatusForbidden)
			}
		}
	}
	e := newEnv(t, setup{handler: func(w http.ResponseWriter, r *http.Request) { mux.Load().ServeHTTP(w, r) }})
	send := func(path, key, authorization string) response {
		req := e.request(t, http.MethodPost, path, "{}", key)
		req.Header.Set("Authorization", authorization)
		return e.send(t, req)
	}
	want := func(r response, status int, replayed bool) {
		t.Helper()
		if r.Status != status || (r.Header.Get(httpidempotency.ReplayedHeader) == "true") != replayed {
			t.Fatalf("%d, replayed %q; want %d, replayed %v", r.Status, r.Header.Get(httpidempotency.ReplayedHeader), status, replayed)
		}
	}
	want(send("/orders", "k1", "Bearer good"), http.StatusMethodNotAllowed, false)
	want(send("/refunds", "k2", "Bearer good"), http.StatusNotFound, false)

	after := http.NewServeMux() // the deploy
	route := auth(func(w http.ResponseWriter, r *http.Request) { orders.Add(1); created(w, r) })
	after.HandleFunc("POST /orders", route)
	after.HandleFunc("POST /refunds", route)
	after.HandleFunc("POST /tree/", route)
	mux.Store(after)
	want(send("/orders", "k1", "Bearer good"), http.StatusCreated, false)
	want(send("/refunds", "k2", "Bearer good"), http.StatusCreated, false)

	want(send("/orders", "k3", ""), http.StatusUnauthorized, false)
	want(send("/orders", "k3", "Bearer stale"), http.StatusForbidden, false)
	want(send("/orders", "k3", "Bearer good"), http.StatusCreated, false)
	want(send("/orders", "k3", "Bearer good"), http.StatusCreated, true)
	// The client follows the 307 (POST /tree to /tree/) with the key.
	want(send("/tree", "k4", "Bearer good"), http.StatusCreated, false)
	if n := orders.Load(); n != 4 {
		t.Fatalf("the route's handler ran %d times, want 4", n)
	}
}
