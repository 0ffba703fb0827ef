package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

// Do[*dynamicpb.Message] replays into a dynamic message of the stored
// type, the same bytes, when the message's generated type is linked in
// too: the caller asked for a dynamic message.
func TestDoDynamicReplays(t *testing.T) {
	t.Parallel()
	f := newFnFixture(t)
	md := (&testingv1.DoResponse{}).ProtoReflect().Descriptor()
	var runs atomic.Int64
	fn := func(context.Context) (*dynamicpb.Message, error) {
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().ByName("payload"), protoreflect.ValueOfString("p"))
		m.Set(md.Fields().ByName("execution"), protoreflect.ValueOfInt64(runs.Add(1)))
		return m, nil
	}
	first, _, err := idempotency.Do(t.Context(), f.srv, "op", "k", nil, fn)
	if err != nil {
		t.Fatal(err)
	}
	again, replayed, err := idempotency.Do(t.Context(), f.srv, "op", "k", nil, fn)
	if err != nil || !replayed || runs.Load() != 1 {
		t.Fatalf("replay: %v, replayed %v, fn ran %d times", err, replayed, runs.Load())
	}
	a, _ := proto.MarshalOptions{Deterministic: true}.Marshal(first)
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(again)
	if string(a) != string(b) || again.Descriptor().FullName() != md.FullName() {
		t.Fatalf("replayed %v (%s), want %v", again, again.Descriptor().FullName(), first)
	}
}

// A function that returns a nil message and no error answers with the
// empty message of its type, on the first call as on every replay (the
// stored bytes decode into it), as a gRPC handler's nil response reaches
// its client. A nil of no type (a nil interface, a nil dynamic message)
// cannot be stored: the first call gets it back, and a replay
// ErrResponseNotRetained, as for any outcome that cannot be kept.
func TestDoNilResponse(t *testing.T) {
	t.Parallel()
	t.Run("generated type", func(t *testing.T) {
		t.Parallel()
		f := newFnFixture(t)
		var runs atomic.Int64
		fn := func(context.Context) (*testingv1.DoResponse, error) { runs.Add(1); return nil, nil }
		for i := range 2 {
			resp, replayed, err := idempotency.Do(t.Context(), f.srv, "op", "k", nil, fn)
			if err != nil || replayed != (i == 1) || resp == nil || proto.Size(resp) != 0 {
				t.Fatalf("call %d: %v, replayed %v, %v; want the empty message", i+1, resp, replayed, err)
			}
		}
		if runs.Load() != 1 {
			t.Fatalf("fn ran %d times", runs.Load())
		}
	})
	for _, tc := range []struct {
		name string
		do   func(*idempotency.Server, *atomic.Int64) (bool, bool, error) // nil answer, replayed, error
	}{
		{"nil interface", func(s *idempotency.Server, runs *atomic.Int64) (bool, bool, error) {
			resp, replayed, err := idempotency.Do(t.Context(), s, "op", "k", nil, func(context.Context) (proto.Message, error) { runs.Add(1); return nil, nil })
			return resp == nil, replayed, err
		}},
		{"nil dynamic message", func(s *idempotency.Server, runs *atomic.Int64) (bool, bool, error) {
			resp, replayed, err := idempotency.Do(t.Context(), s, "op", "k", nil, func(context.Context) (*dynamicpb.Message, error) { runs.Add(1); return nil, nil })
			return resp == nil, replayed, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFnFixture(t)
			var runs atomic.Int64
			if isNil, replayed, err := tc.do(f.srv, &runs); !isNil || replayed || err != nil {
				t.Fatalf("first call: nil %v, replayed %v, %v; want its nil back", isNil, replayed, err)
			}
			if _, replayed, err := tc.do(f.srv, &runs); !replayed || !errors.Is(err, idempotency.ErrResponseNotRetained) {
				t.Fatalf("second call: replayed %v, %v; want ErrResponseNotRetained", replayed, err)
			}
			if runs.Load() != 1 || f.events.Count(idempotency.DecisionNotRetained) != 1 {
				t.Fatalf("fn ran %d times, events %v", runs.Load(), f.events.All())
			}
		})
	}
}

// A record of one message is not decoded into another by a Do under the
// same operation: Do[*BytesValue] after Do[*StringValue] is
// ErrRecordCorrupt, and the function does not run. A record whose message
// this process does not know (renamed since: here written by a server on
// another package's descriptors) still decodes into Resp, as a method's
// does under its namespace (decision 70).
func TestDoOtherResponseType(t *testing.T) {
	t.Parallel()
	old := dynamicFilesOf(t, "dyn.v1", "Payments", nil)
	charge := mustFind[protoreflect.MessageDescriptor](t, old, "dyn.v1.ChargeResponse")
	for _, tc := range []struct {
		name  string
		first func(context.Context, store.Store) error
		known bool // the first call's message is one the second call's process knows
	}{
		{"another message", func(ctx context.Context, st store.Store) error {
			_, _, err := idempotency.Do(ctx, idempotency.NewServer(st), "op", "k", nil, func(context.Context) (*wrapperspb.StringValue, error) {
				return wrapperspb.String("ch_1"), nil
			})
			return err
		}, true},
		{"a message renamed since", func(ctx context.Context, st store.Store) error {
			_, _, err := idempotency.Do(ctx, idempotency.NewServer(st, idempotency.WithDescriptors(old)), "op", "k", nil, func(context.Context) (*dynamicpb.Message, error) {
				m := dynamicpb.NewMessage(charge)
				m.Set(charge.Fields().ByName("id"), protoreflect.ValueOfString("ch_1"))
				return m, nil
			})
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := memStore(t)
			if err := tc.first(t.Context(), mem); err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int64
			resp, replayed, err := idempotency.Do(t.Context(), idempotency.NewServer(mem), "op", "k", nil, func(context.Context) (*wrapperspb.BytesValue, error) {
				runs.Add(1)
				return wrapperspb.Bytes(nil), nil
			})
			if tc.known && (!errors.Is(err, idempotency.ErrRecordCorrupt) || resp != nil || runs.Load() != 0) {
				t.Fatalf("Do[*BytesValue] on a StringValue's record: %v, %v, fn ran %d times; want ErrRecordCorrupt", resp, err, runs.Load())
			}
			if !tc.known && (err != nil || !replayed || string(resp.GetValue()) != "ch_1" || runs.Load() != 0) {
				t.Fatalf("Do[*BytesValue] on a renamed message's record: %v, replayed %v, %v, fn ran %d times; want its bytes replayed", resp, replayed, err, runs.Load())
			}
		})
	}
}
