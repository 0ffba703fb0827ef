package idempotency_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestSealingRotationOverStores: on Redis and PostgreSQL, keys rotate in
// the middle of traffic without a second run or a wrong answer. Two
// servers share the store (each on a client or pool of its own), one
// sealing with k1 and still opening k2, the other sealing with k2 and
// still opening k1. Each key is claimed first by one of them (even keys
// by the k1 server, odd keys by the k2 server), whose handler is held
// while many goroutines call the same keys through both servers: every
// key runs once, every caller gets the one answer byte for byte (all but
// the first marked replayed), and each record names the key of the server
// that ran it. Then a server with k3 primary and k2 older, k1 dropped,
// refuses the k1 records as corrupt (INTERNAL, IDEMPOTENCY_RECORD_CORRUPT)
// without running them again, and replays the k2 ones.
func TestSealingRotationOverStores(t *testing.T) {
	t.Parallel()
	for name, stores := range map[string]func(t *testing.T) func() store.Store{
		"redis": func(t *testing.T) func() store.Store {
			srv := redistest.StartServer(t)
			return func() store.Store { return redisstore.New(srv.Client()) }
		},
		"postgres": func(t *testing.T) func() store.Store {
			table := newPGLedger(t).records()
			return func() store.Store {
				s := postgresstore.New(pgtest.Pool(t, 4), postgresstore.WithTable(table), postgresstore.WithSweepInterval(0))
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newStore := stores(t)
			k1, k2, k3 := sealedKey("k1", 1), sealedKey("k2", 2), sealedKey("k3", 3)
			var runs atomic.Int64
			var started wait.Signal
			release := make(chan struct{})
			handler := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				n := runs.Add(1)
				started.Notify()
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &testingv1.DoResponse{Payload: "secret of " + req.GetPayload(), Amount: req.GetAmount(), Execution: n}, nil
			}
			inFlight := idempotency.WithWaitForInFlight(time.Minute)
			var rigs [2]*testkit.Rig
			for i, keys := range [][]idempotency.SealingKey{{k1, k2}, {k2, k1}} {
				rigs[i] = testkit.Serve(t, testkit.Config{Handler: handler, Store: newStore(),
					Options: []idempotency.ServerOption{sealedWith(keys[0], keys[1]), inFlight}})
			}
			clients := [2]testingv1.TestServiceClient{rigs[0].Client(t), rigs[1].Client(t)}
			var releaseOnce sync.Once
			t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the servers stop

			const keys, callers = 8, 6
			answers := make([][]sealedAnswer, keys)
			var mu sync.Mutex
			call := func(c testingv1.TestServiceClient, k int) {
				var header metadata.MD
				resp, err := c.Do(withKey(t.Context(), fmt.Sprint("rotated-", k)), sealedRotationRequest(k), grpc.Header(&header))
				a := sealedFailure(err)
				if err == nil {
					a.bytes, a.err = proto.MarshalOptions{Deterministic: true}.Marshal(resp)
					a.replayed = idempotency.Replayed(header, nil)
				}
				mu.Lock()
				answers[k] = append(answers[k], a)
				mu.Unlock()
			}
			var wg sync.WaitGroup
			for k := range keys {
				wg.Go(func() { call(clients[k%2], k) })
			}
			started.Until(t, "every key's first call running", func() bool { return runs.Load() == keys })
			for c := range callers {
				for k := range keys {
					wg.Go(func() { call(clients[(c+k)%2], k) })
				}
			}
			releaseOnce.Do(func() { close(release) })
			wg.Wait()

			if n := runs.Load(); n != keys {
				t.Fatalf("the handlers ran %d times for %d keys", n, keys)
			}
			for k, as := range answers {
				executed := 0
				for i, a := range as {
					if a.err != nil || a.corrupt || !bytes.Equal(a.bytes, as[0].bytes) {
						t.Fatalf("key %d, answer %d: %+v; want %x", k, i, a, as[0].bytes)
					}
					if !a.replayed {
						executed++
					}
				}
				if len(as) != callers+1 || executed != 1 {
					t.Fatalf("key %d: %d answers, %d unmarked; want %d, 1 unmarked", k, len(as), executed, callers+1)
				}
			}
			sealedBy := func(k int) string {
				sk, err := rigs[0].Idempotency.StoreKey(testingv1.TestService_Do_FullMethodName, "", fmt.Sprint("rotated-", k))
				if err != nil {
					t.Fatal(err)
				}
				info, err := rigs[0].Store.(store.Inspector).Lookup(t.Context(), sk)
				if err != nil {
					t.Fatal(err)
				}
				id, _ := idempotency.SealedBy(info.Data)
				return id
			}
			for k := range keys {
				if id, want := sealedBy(k), []string{"k1", "k2"}[k%2]; id != want {
					t.Errorf("key %d sealed by %q, want %s, the primary key of the server that ran it", k, id, want)
				}
			}

			dropped := testkit.Serve(t, testkit.Config{Handler: handler, Store: newStore(),
				Options: []idempotency.ServerOption{sealedWith(k3, k2)}}).Client(t)
			for k := range keys {
				call(dropped, k)
				a := answers[k][len(answers[k])-1]
				if k%2 == 0 && !a.corrupt {
					t.Errorf("key %d, sealed by the dropped k1: %+v; want IDEMPOTENCY_RECORD_CORRUPT", k, a)
				}
				if k%2 == 1 && (a.err != nil || !a.replayed || !bytes.Equal(a.bytes, answers[k][0].bytes)) {
					t.Errorf("key %d, sealed by k2, which the keyring holds: %+v; want %x, replayed", k, a, answers[k][0].bytes)
				}
			}
			if n := runs.Load(); n != keys {
				t.Errorf("the handlers ran %d times after k1 was dropped, want %d", n, keys)
			}
		})
	}
}

// sealedRotationRequest is the request of key k of the rotation test.
func sealedRotationRequest(k int) *testingv1.DoRequest {
	return &testingv1.DoRequest{Payload: fmt.Sprint("charge-", k), Amount: int64(k)}
}
