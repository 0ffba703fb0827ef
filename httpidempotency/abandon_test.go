package httpidempotency_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	httpv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/http/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// abandon makes key abandoned in e's store for a POST of body to path
// under operation op, as a server that died mid-handler leaves it, and
// returns its store key.
func (e *env) abandon(t *testing.T, op, path, body, key string) string {
	t.Helper()
	req := &httpv1.Request{Method: http.MethodPost, Target: path, Body: []byte(body)}
	return testkit.Abandon(t, e.store, e.srv, op, op, key, req)
}

// wantBlocked checks that r is the answer to a blocked key: 423 with the
// outcome-unknown problem, its own type, no Retry-After and no replay
// header, echoing the key.
func wantBlocked(t *testing.T, r response, key string) {
	t.Helper()
	var p httpidempotency.Problem
	if err := json.Unmarshal([]byte(r.Body), &p); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.Body, err)
	}
	if r.Status != http.StatusLocked || p.Status != http.StatusLocked || p.Type != httpidempotency.ProblemTypeOutcomeUnknown ||
		p.Reason != idempotency.ErrOutcomeUnknown.Reason || p.Title != "Locked" || p.Detail != idempotency.ErrOutcomeUnknown.Error() {
		t.Fatalf("got %d %s, want 423 with the outcome-unknown problem", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != httpidempotency.ProblemContentType {
		t.Fatalf("Content-Type %q", ct)
	}
	for _, h := range []string{"Retry-After", httpidempotency.ReplayedHeader} {
		if v, ok := r.Header[h]; ok {
			t.Fatalf("%s: %q on a blocked key's answer", h, v)
		}
	}
	if got := r.Header.Values(httpidempotency.KeyHeader); len(got) != 1 || got[0] != key {
		t.Fatalf("key header %q, want the request's %q", got, key)
	}
}

// TestAbandonedBlocked (decision 299): a key whose claim was abandoned,
// under AbandonBlock set for the whole server or for the middleware's
// operation alone, is answered 423 Locked with the problem type of its
// own and reason IDEMPOTENCY_OUTCOME_UNKNOWN, without Retry-After, every
// time; the handler never runs and the key stays abandoned. Another
// operation's policy does not reach the middleware's.
func TestAbandonedBlocked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		server  []idempotency.ServerOption
		blocked bool
	}{
		{"server-wide", []idempotency.ServerOption{idempotency.WithAbandonedClaims(idempotency.AbandonBlock)}, true},
		{"the operation's policy", []idempotency.ServerOption{idempotency.WithOperationPolicy("orders", idempotency.MethodPolicy{Abandoned: idempotency.AbandonBlock})}, true},
		{"another operation's policy", []idempotency.ServerOption{idempotency.WithOperationPolicy("refunds", idempotency.MethodPolicy{Abandoned: idempotency.AbandonBlock})}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, setup{server: tc.server, mw: []httpidempotency.Option{httpidempotency.WithOperation("orders")}})
			sk := e.abandon(t, "orders", "/orders", `{"sku":1}`, "k")
			if !tc.blocked {
				if r := e.post(t, "/orders", `{"sku":1}`, "k"); r.Status != http.StatusCreated {
					t.Fatalf("got %d %s, want the handler's 201", r.Status, r.Body)
				}
				e.wantRuns(t, 1)
				return
			}
			for range 2 {
				wantBlocked(t, e.post(t, "/orders", `{"sku":1}`, "k"), "k")
			}
			e.wantRuns(t, 0)
			testkit.WantState(t, e.store, sk, store.StateAbandoned)
			// Another body under the key is still a reused key.
			wantProblem(t, e.post(t, "/orders", `{"sku":2}`, "k"), http.StatusUnprocessableEntity, idempotency.ErrKeyReused.Reason)
		})
	}
}

// TestAbandonedRerun (decision 300): under AbandonRerun, the default, the
// handler runs again on an abandoned key and its request's claim says so
// (Attempt 2); its answer is stored and replayed as a first run's.
func TestAbandonedRerun(t *testing.T) {
	t.Parallel()
	var attempt atomic.Int64
	e := newEnv(t, setup{handler: func(w http.ResponseWriter, r *http.Request) {
		cl, _ := idempotency.ClaimFromContext(r.Context())
		attempt.Store(int64(cl.Attempt))
		created(w, r)
	}})
	e.abandon(t, httpidempotency.DefaultOperation, "/orders", "1", "k")
	if r := e.post(t, "/orders", "1", "k"); r.Status != http.StatusCreated || attempt.Load() != 2 {
		t.Fatalf("got %d %s under attempt %d, want the handler's 201 under attempt 2", r.Status, r.Body, attempt.Load())
	}
	if r := e.post(t, "/orders", "1", "k"); r.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("second call: %d %v, want a replay", r.Status, r.Header)
	}
	e.wantRuns(t, 1)
}

// TestAbandonedRecover (decision 300): under AbandonRecover with
// httpidempotency.Recover, the recovery runs instead of the handler, on
// the request as it came (method, target, body, headers) and under a claim
// that says Attempt 2. What it writes is the answer, stored and replayed
// to every retry; ErrRerun runs the handler; ErrOutcomeUnknown, or an
// answer whose status the middleware does not keep, leaves the key
// blocked (423), and a later retry recovers again.
func TestAbandonedRecover(t *testing.T) {
	t.Parallel()
	recovered := func(w http.ResponseWriter, r *http.Request) error {
		body, _ := io.ReadAll(r.Body)
		cl, _ := idempotency.ClaimFromContext(r.Context())
		if r.Method != http.MethodPost || r.URL.Path != "/orders" || string(body) != "1" || cl.Attempt < 2 ||
			r.Header.Get(httpidempotency.KeyHeader) != "k" {
			return errors.New("recovery of the wrong request")
		}
		w.Header().Set("Location", "/orders/1")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "recovered")
		return nil
	}
	for _, tc := range []struct {
		name string
		fn   func(calls int64) httpidempotency.RecoverFunc
		// want is the body of the first answer and of the replay; "" for
		// a blocked key on the first call, recovered on the second.
		want string
		runs int64
	}{
		{"recovered", func(int64) httpidempotency.RecoverFunc { return recovered }, "recovered", 0},
		{"rerun", func(int64) httpidempotency.RecoverFunc {
			return func(http.ResponseWriter, *http.Request) error { return idempotency.ErrRerun }
		}, `{"order":1}`, 1},
		{"unknown, then recovered", func(calls int64) httpidempotency.RecoverFunc {
			if calls == 1 {
				return func(http.ResponseWriter, *http.Request) error { return idempotency.ErrOutcomeUnknown }
			}
			return recovered
		}, "", 0},
		{"a status not kept, then recovered", func(calls int64) httpidempotency.RecoverFunc {
			if calls == 1 {
				return func(w http.ResponseWriter, _ *http.Request) error { w.WriteHeader(http.StatusBadGateway); return nil }
			}
			return recovered
		}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			rf := httpidempotency.Recover(func(w http.ResponseWriter, r *http.Request) error {
				return tc.fn(calls.Add(1))(w, r)
			})
			e := newEnv(t, setup{server: []idempotency.ServerOption{idempotency.WithOperationPolicy(httpidempotency.DefaultOperation,
				idempotency.MethodPolicy{Abandoned: idempotency.AbandonRecover, Recover: rf})}})
			sk := e.abandon(t, httpidempotency.DefaultOperation, "/orders", "1", "k")
			first := e.post(t, "/orders", "1", "k")
			want := tc.want
			if want == "" {
				wantBlocked(t, first, "k")
				testkit.WantState(t, e.store, sk, store.StateAbandoned)
				first = e.post(t, "/orders", "1", "k")
				want = "recovered"
			}
			if first.Status != http.StatusCreated || first.Body != want || first.Header.Get(httpidempotency.ReplayedHeader) != "" {
				t.Fatalf("first answer %d %v %q, want 201 %q, not a replay", first.Status, first.Header, first.Body, want)
			}
			again := e.post(t, "/orders", "1", "k")
			if again.Status != http.StatusCreated || again.Body != want || again.Header.Get(httpidempotency.ReplayedHeader) != "true" {
				t.Fatalf("retry %d %v %q, want the replay of %q", again.Status, again.Header, again.Body, want)
			}
			if want == "recovered" && again.Header.Get("Location") != "/orders/1" {
				t.Fatalf("replay without the recovery's header: %v", again.Header)
			}
			e.wantRuns(t, tc.runs)
			testkit.WantState(t, e.store, sk, store.StateCompleted)
		})
	}
}

// TestRecoverOutsideMiddleware: a RecoverFunc of Recover that runs for a
// Do call, not the middleware's, leaves the key abandoned with
// ErrMisconfigured instead of recovering a request it does not have.
func TestRecoverOutsideMiddleware(t *testing.T) {
	t.Parallel()
	rf := httpidempotency.Recover(func(http.ResponseWriter, *http.Request) error { return nil })
	_, err := rf(t.Context(), &httpv1.Request{})
	if !errors.Is(err, idempotency.ErrMisconfigured) || !strings.Contains(err.Error(), "Middleware") {
		t.Fatalf("got %v, want ErrMisconfigured naming the middleware", err)
	}
}

// TestTransportDoesNotRetryBlocked (decision 299): the Transport does not
// retry a blocked key's 423: exactly one request reaches the server, and
// the caller gets the problem.
func TestTransportDoesNotRetryBlocked(t *testing.T) {
	t.Parallel()
	var seen arrivals
	var rt retries
	e := newEnv(t, setup{server: []idempotency.ServerOption{idempotency.WithAbandonedClaims(idempotency.AbandonBlock)}, outer: seen.outer})
	e.abandon(t, httpidempotency.DefaultOperation, "/orders", "1", "k")
	client := newClient(t, httpidempotency.WithOnRetry(rt.hook))
	r := do(t, client, e.request(t, http.MethodPost, "/orders", "1", "k"))
	wantBlocked(t, r, "k")
	seen.wantKeys(t, 1, "k")
	if calls := rt.all(); len(calls) != 0 {
		t.Fatalf("retries %+v, want none", calls)
	}
	e.wantRuns(t, 0)
}

// TestAbandonedRecoverStoredError (decision 300): a recovery's gRPC status
// of a code the server stores is stored as the outcome and answered with
// its problem, then replayed, marked so; the handler never runs.
func TestAbandonedRecoverStoredError(t *testing.T) {
	t.Parallel()
	rf := httpidempotency.Recover(func(http.ResponseWriter, *http.Request) error {
		return status.Error(codes.InvalidArgument, "the order was refused")
	})
	e := newEnv(t, setup{server: []idempotency.ServerOption{idempotency.WithOperationPolicy(httpidempotency.DefaultOperation,
		idempotency.MethodPolicy{Abandoned: idempotency.AbandonRecover, Recover: rf})}})
	sk := e.abandon(t, httpidempotency.DefaultOperation, "/orders", "1", "k")
	for i, replayed := range []string{"", "true"} {
		r := e.post(t, "/orders", "1", "k")
		if r.Status != http.StatusBadRequest || !strings.Contains(r.Body, "the order was refused") ||
			r.Header.Get(httpidempotency.ReplayedHeader) != replayed {
			t.Fatalf("answer %d: %d %v %s; want the stored 400, replayed %q", i+1, r.Status, r.Header, r.Body, replayed)
		}
	}
	e.wantRuns(t, 0)
	testkit.WantState(t, e.store, sk, store.StateCompleted)
}
