package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A payments service makes "never twice" its rule with one option: a key
// whose server died mid-charge is refused with ErrOutcomeUnknown until an
// operator resolves it. Its capture operation recovers instead: it asks
// the ledger what the dead attempt did, and answers with that, or runs
// again when the ledger has nothing.
func ExampleWithAbandonedClaims() {
	memory := memorystore.New()
	defer memory.Close()
	ledger := map[string]string{"order_7": "cap_1"} // captures, by order
	idem := idempotency.NewServer(memory,
		idempotency.WithAbandonedClaims(idempotency.AbandonBlock),
		idempotency.WithOperationPolicy("payments.capture", idempotency.MethodPolicy{
			Abandoned: idempotency.AbandonRecover,
			Recover: func(ctx context.Context, req proto.Message) (proto.Message, error) {
				if id, ok := ledger[req.(*wrapperspb.StringValue).GetValue()]; ok {
					return wrapperspb.String(id), nil // the dead attempt captured
				}
				return nil, idempotency.ErrRerun // it did nothing: run again
			},
		}))

	order := wrapperspb.String("order_7")
	crashed(idem, memory, "payments.charge", "evt_1", order)
	crashed(idem, memory, "payments.capture", "evt_2", order)

	charge := func(ctx context.Context) (*wrapperspb.StringValue, error) {
		return wrapperspb.String("ch_2"), nil // never runs
	}
	_, _, err := idempotency.Do(context.Background(), idem, "payments.charge", "evt_1", order, charge)
	fmt.Println("charge:", errors.Is(err, idempotency.ErrOutcomeUnknown))

	capture, _, err := idempotency.Do(context.Background(), idem, "payments.capture", "evt_2", order,
		func(ctx context.Context) (*wrapperspb.StringValue, error) {
			return wrapperspb.String("cap_2"), nil // runs only if the ledger has nothing
		})
	fmt.Println("capture:", capture.GetValue(), err)
	// Output:
	// charge: true
	// capture: cap_1 <nil>
}

// crashed leaves the key of op as a server that died holding its claim
// leaves it: claimed with req's fingerprint, kept past its lease, the
// lease over.
func crashed(idem *idempotency.Server, s store.Store, op, key string, req proto.Message) {
	sk, err := idem.StoreKey(op, "", key)
	if err != nil {
		log.Fatal(err)
	}
	fp, err := idempotency.Fingerprint(op, req)
	if err != nil {
		log.Fatal(err)
	}
	cl, err := s.Claim(context.Background(), sk, fp, time.Minute, store.ClaimOptions{Keep: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Abandon(context.Background(), sk, cl.Token); err != nil {
		log.Fatal(err)
	}
}
