package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// jsonLog is a slog logger writing JSON lines into a buffer, at every
// level.
type jsonLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *jsonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *jsonLog) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// records decodes the lines written so far.
func (l *jsonLog) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	dec := json.NewDecoder(bytes.NewReader(l.buf.Bytes()))
	for dec.More() {
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestSlogObserverLogsEachDecision: through a real server, each decision
// is one record with the method, the operation, the decision, the store
// key, the store time and the error, at the decision's level; the
// client's key is left out.
func TestSlogObserverLogsEachDecision(t *testing.T) {
	t.Parallel()
	var log jsonLog
	f := newFixture(t, nil, idempotency.WithObserver(idempotency.NewSlogObserver(log.logger())))
	ctx := withKey(t.Context(), "customer-7-order-3")
	if _, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "a"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "b"})
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason)
	_, _ = f.Client.Required(t.Context(), &testingv1.DoRequest{})

	storeKey := f.Faults.Calls()[0].Key
	do, required := testingv1.TestService_Do_FullMethodName, testingv1.TestService_Required_FullMethodName
	want := []struct {
		level, method, decision, storeKey string
		err                               bool
	}{
		{"INFO", do, "executed", storeKey, false},
		{"INFO", do, "replayed", storeKey, false},
		{"WARN", do, "key_reused", storeKey, true},
		{"INFO", required, "key_missing", "", true},
	}
	recs := log.records(t)
	if len(recs) != len(want) {
		t.Fatalf("%d records %v, want %d", len(recs), recs, len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r["msg"] != "idempotency decision" || r["level"] != w.level || r["method"] != w.method ||
			r["operation"] != w.method || r["decision"] != w.decision {
			t.Errorf("record %d = %v; want %s %s %s", i, r, w.level, w.method, w.decision)
		}
		if got, _ := r["store_key"].(string); got != w.storeKey {
			t.Errorf("record %d store_key %q, want %q", i, got, w.storeKey)
		}
		if _, ok := r["store_time"]; !ok {
			t.Errorf("record %d has no store_time", i)
		}
		if _, ok := r["error"]; ok != w.err {
			t.Errorf("record %d error %v; want one: %v", i, r["error"], w.err)
		}
		if _, ok := r["key"]; ok {
			t.Errorf("record %d logs the client's key", i)
		}
	}
}

// TestSlogObserverOptions: WithSlogLevel moves decisions to another
// level (below the handler's, they are not written), WithSlogClientKey
// adds the client's key, and a store error carries its attempt.
func TestSlogObserverOptions(t *testing.T) {
	t.Parallel()
	ev := idempotency.Event{
		Method: "/shop.v1.Payments/Charge", Operation: "shop.charge", StoreKey: "sk", Key: "order-3",
		Decision: idempotency.DecisionStoreError, StoreTime: time.Millisecond, Attempt: 2, Err: errors.New("down"),
	}
	tests := []struct {
		name  string
		opts  []idempotency.SlogOption
		event idempotency.Event
		want  map[string]any // nil: no record
	}{
		{"defaults", nil, ev, map[string]any{
			"level": "WARN", "decision": "store_error", "store_key": "sk", "attempt": 2.0, "error": "down", "store_time": 1e6,
		}},
		{"client key", []idempotency.SlogOption{idempotency.WithSlogClientKey()}, ev, map[string]any{
			"level": "WARN", "key": "order-3",
		}},
		{"level raised", []idempotency.SlogOption{idempotency.WithSlogLevel(slog.LevelError, idempotency.DecisionStoreError)}, ev, map[string]any{
			"level": "ERROR",
		}},
		{"below the handler's level", []idempotency.SlogOption{
			idempotency.WithSlogLevel(slog.LevelDebug-4, idempotency.DecisionStoreError, idempotency.DecisionExecuted),
		}, ev, nil},
		{"cached replay", nil, idempotency.Event{Method: "m", Operation: "m", StoreKey: "sk", Decision: idempotency.DecisionReplayed, Cached: true}, map[string]any{
			"level": "INFO", "decision": "replayed", "cached": true,
		}},
		{"lease lost", nil, idempotency.Event{Method: "m", Decision: idempotency.DecisionLeaseLost}, map[string]any{"level": "ERROR"}},
		{"lease renewed", nil, idempotency.Event{Method: "m", Decision: idempotency.DecisionLeaseRenewed}, map[string]any{"level": "DEBUG"}},
		{"a decision this release does not know", []idempotency.SlogOption{idempotency.WithSlogLevel(slog.LevelWarn, 99)},
			idempotency.Event{Method: "m", Decision: 99}, map[string]any{"level": "WARN", "decision": "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var log jsonLog
			idempotency.NewSlogObserver(log.logger(), tt.opts...).Observe(context.Background(), tt.event)
			recs := log.records(t)
			if tt.want == nil {
				if len(recs) != 0 {
					t.Fatalf("records %v; want none", recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("records %v; want one", recs)
			}
			for k, v := range tt.want {
				if recs[0][k] != v {
					t.Errorf("%s = %v (%T), want %v; record %v", k, recs[0][k], recs[0][k], v, recs[0])
				}
			}
			if _, logged := recs[0]["key"]; logged != (tt.want["key"] != nil) {
				t.Errorf("key logged: %v; record %v", logged, recs[0])
			}
		})
	}
}

// TestSlogObserverNilLogger: a nil logger panics at construction, naming
// the constructor.
func TestSlogObserverNilLogger(t *testing.T) {
	t.Parallel()
	defer func() {
		if msg, _ := recover().(string); msg != "idempotency: NewSlogObserver: logger must not be nil" {
			t.Fatalf("panic %q", msg)
		}
	}()
	idempotency.NewSlogObserver(nil)
}

// TestSlogObserverPurge: a purge through the server is one record with
// the decision and the store key it names, and no empty method or
// operation attribute (a store key does not say which method it is).
func TestSlogObserverPurge(t *testing.T) {
	t.Parallel()
	var log jsonLog
	mem := memorystore.New()
	t.Cleanup(func() { _ = mem.Close() })
	srv := idempotency.NewServer(mem, idempotency.WithObserver(idempotency.NewSlogObserver(log.logger())))
	ctx := t.Context()
	if _, err := idempotency.Once(ctx, srv, "orders.ship", "o-1", nil, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	sk, err := srv.StoreKey("orders.ship", "", "o-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Purge(ctx, sk, store.PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	recs := log.records(t)
	last := recs[len(recs)-1]
	if last["decision"] != "purged" || last["store_key"] != sk {
		t.Fatalf("last record %v, want the purge of %s", last, sk)
	}
	for _, attr := range []string{"method", "operation"} {
		if v, ok := last[attr]; ok {
			t.Errorf("purge record has %s=%q; want it left out: %v", attr, v, last)
		}
	}
	if recs[0]["method"] != "orders.ship" || recs[0]["operation"] != "orders.ship" {
		t.Errorf("first record %v, want method and operation orders.ship", recs[0])
	}
}
