package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// txFixture is a store on a fresh file with a ledger table, reached by
// the interceptor through a recording fault store, to count its calls.
type txFixture struct {
	store  *sqlitestore.Store
	db     *sql.DB
	calls  *faultstore.Store
	events *testkit.Events
}

func (f *txFixture) ledgerRows(t *testing.T, payload string) int {
	t.Helper()
	return ledgerRows(t, f.db, payload)
}

// inTx runs f in a transaction of db, committed when f returns nil and
// rolled back otherwise.
func inTx(ctx context.Context, db *sql.DB, f func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// txStreams is the StreamService whose handlers write a ledger row of the
// fixture f in a transaction and record their outcome in it: Download
// sends Amount messages, then calls CompleteTx (CompleteErrorTx with
// FAILED_PRECONDITION when the payload is "declined"), sends the answer
// to refusals, and commits; Upload sums its requests and records the sum
// with CompleteTx.
type txStreams struct {
	testingv1.UnimplementedStreamServiceServer
	f        *txFixture
	refusals chan error
	runs     atomic.Int64
}

var declined = status.Error(codes.FailedPrecondition, "card declined")

func (s *txStreams) Download(req *testingv1.DoRequest, stream grpc.ServerStreamingServer[testingv1.DoResponse]) error {
	s.runs.Add(1)
	ctx := stream.Context()
	var herr error
	err := inTx(ctx, s.f.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO ledger (payload) VALUES (?)", req.GetPayload()); err != nil {
			return err
		}
		for i := range req.GetAmount() {
			if err := stream.Send(&testingv1.DoResponse{Payload: req.GetPayload(), Amount: i}); err != nil {
				return err
			}
		}
		var err error
		if req.GetPayload() == "declined" {
			herr, err = declined, s.f.store.CompleteErrorTx(ctx, tx, declined)
		} else {
			err = s.f.store.CompleteTx(ctx, tx, &testingv1.DoResponse{Payload: "done"})
		}
		s.refusals <- err
		return nil // committed, with or without the record
	})
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	return herr
}

func (s *txStreams) Upload(stream grpc.ClientStreamingServer[testingv1.DoRequest, testingv1.DoResponse]) error {
	s.runs.Add(1)
	ctx := stream.Context()
	resp := &testingv1.DoResponse{}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		resp.Amount += req.GetAmount()
	}
	err := inTx(ctx, s.f.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO ledger (payload) VALUES ('upload')"); err != nil {
			return err
		}
		return s.f.store.CompleteTx(ctx, tx, resp)
	})
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	return stream.SendAndClose(resp)
}

// newTxStreams serves txStreams over the tx fixture's store and ledger,
// behind a Server's stream interceptor over its recording store.
func newTxStreams(t *testing.T) (*txStreams, testingv1.StreamServiceClient) {
	t.Helper()
	st, db := newLedgerStore(t)
	f := &txFixture{store: st, db: db, calls: faultstore.New(st), events: &testkit.Events{}}
	svc := &txStreams{f: f, refusals: make(chan error, 4)}
	cc, _ := streamtest.Proxied(t, svc, idempotency.NewServer(f.calls, idempotency.WithObserver(f.events)))
	return svc, testingv1.NewStreamServiceClient(cc)
}

// download reads a whole Download answer: its messages, header, trailer
// and status.
func download(ctx context.Context, c testingv1.StreamServiceClient, req *testingv1.DoRequest) (msgs []*testingv1.DoResponse, header, trailer metadata.MD, err error) {
	stream, err := c.Download(ctx, req)
	if err != nil {
		return nil, nil, nil, err
	}
	for {
		m, rerr := stream.Recv()
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				err = rerr
			}
			break
		}
		msgs = append(msgs, m)
	}
	header, _ = stream.Header()
	return msgs, header, stream.Trailer(), err
}

// TestCompleteTxServerStream (as postgresstore's): a server-streaming handler cannot record its
// outcome in its transaction (the outcome is the stream, which the
// interceptor stores after the handler returns): CompleteTx and
// CompleteErrorTx refuse, naming the reason, before they write anything.
// The handler that commits its ledger row anyway leaves its stream to the
// interceptor, which stores it: the retry replays the three messages (and
// the stored error), never IDEMPOTENCY_RECORD_CORRUPT.
func TestCompleteTxServerStream(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{"ok", "declined"} {
		t.Run(payload, func(t *testing.T) {
			t.Parallel()
			svc, c := newTxStreams(t)
			ctx := keyed(t.Context(), "stream-"+payload)
			req := &testingv1.DoRequest{Payload: payload, Amount: 3}
			for i := range 2 {
				msgs, header, trailer, err := download(ctx, c, req)
				if payload == "declined" {
					if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "card declined" {
						t.Fatalf("call %d: %v, want the stored FAILED_PRECONDITION", i, err)
					}
				} else if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if len(msgs) != 3 || msgs[2].GetAmount() != 2 || replayed(header, trailer) != (i > 0) {
					t.Fatalf("call %d: %d messages, replayed %v; want 3, replayed on the retry", i, len(msgs), replayed(header, trailer))
				}
			}
			if err := <-svc.refusals; err == nil || !strings.Contains(err.Error(), "server-streaming") {
				t.Fatalf("CompleteTx in a server-streaming handler: %v, want a refusal naming the reason", err)
			}
			if n := svc.f.ledgerRows(t, payload); n != 1 || svc.runs.Load() != 1 {
				t.Fatalf("%d ledger rows, %d runs; want 1 and 1", n, svc.runs.Load())
			}
			if n := svc.f.calls.Count("complete"); n != 1 {
				t.Fatalf("the interceptor made %d Complete calls, want the stream's one", n)
			}
		})
	}
}

// TestCompleteTxClientStream (as postgresstore's): a client-streaming handler has one response,
// which it records in its transaction as a unary handler does: the retry
// replays it, the interceptor makes no store call after the handler.
func TestCompleteTxClientStream(t *testing.T) {
	t.Parallel()
	svc, c := newTxStreams(t)
	ctx := keyed(t.Context(), "upload")
	for i := range 2 {
		stream, err := c.Upload(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []int64{1, 2, 4} {
			if err := stream.Send(&testingv1.DoRequest{Amount: a}); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := stream.CloseAndRecv()
		header, _ := stream.Header()
		if err != nil || resp.GetAmount() != 7 || replayed(header, stream.Trailer()) != (i > 0) {
			t.Fatalf("call %d: %v, %v, replayed %v; want 7, replayed on the retry", i, resp, err, replayed(header, stream.Trailer()))
		}
	}
	if n := svc.f.ledgerRows(t, "upload"); n != 1 || svc.runs.Load() != 1 {
		t.Fatalf("%d ledger rows, %d runs; want 1 and 1", n, svc.runs.Load())
	}
	if c, r := svc.f.calls.Count("complete"), svc.f.calls.Count("release"); c != 0 || r != 0 {
		t.Fatalf("the interceptor made %d Complete and %d Release calls, want none", c, r)
	}
}

// replayed reports whether a call's header or trailer carries the replay
// marker.
func replayed(header, trailer metadata.MD) bool {
	return slices.Contains(append(header.Get(idempotency.ReplayedKey), trailer.Get(idempotency.ReplayedKey)...), "true")
}
