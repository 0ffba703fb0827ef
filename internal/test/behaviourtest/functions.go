package behaviourtest

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// operation is the op of Do and Once.
const operation = "behaviour.op"

// callIDValue is the context key that carries a call's id to Do's and
// Once's function, whose context keeps the caller's values.
type callIDValue struct{}

// fnEntry calls Do or Once.
type fnEntry struct {
	srv  *idempotency.Server
	env  *Env
	once bool
}

func newDo(_ *testing.T, e *Env) Caller {
	return &fnEntry{srv: idempotency.NewServer(e.Store, e.Opts...), env: e}
}

func newOnce(_ *testing.T, e *Env) Caller {
	return &fnEntry{srv: idempotency.NewServer(e.Store, e.Opts...), env: e, once: true}
}

// exec runs the work for the call on ctx and returns its answer as Do's
// function does.
func (f *fnEntry) exec(ctx context.Context) (*testingv1.DoResponse, error) {
	return f.env.Work(ctx, ctx.Value(callIDValue{}).(string))
}

func (f *fnEntry) Call(ctx context.Context, key string, req int, id string) (r Result) {
	stop := context.AfterFunc(ctx, func() { f.env.Left(id) })
	defer stop()
	ctx = context.WithValue(ctx, callIDValue{}, id)
	defer func() {
		if p := recover(); p != nil {
			r = Result{Code: "panic"}
		}
	}()
	var resp *testingv1.DoResponse
	var err error
	if f.once {
		r.ranKnown = true
		r.Ran, err = idempotency.Once(ctx, f.srv, operation, key, Request(req), func(ctx context.Context) error {
			_, err := f.exec(ctx)
			return err
		})
		// Once has no replayed flag: an outcome read from the store is
		// its ran false with nil, the stored status, or the outcome that
		// was not retained.
		_, isStatus := status.FromError(err)
		r.Replayed = !r.Ran && (isStatus || errors.Is(err, idempotency.ErrResponseNotRetained))
	} else {
		resp, r.Replayed, err = idempotency.Do(ctx, f.srv, operation, key, Request(req), f.exec)
	}
	r.Reason = idempotency.Reason(err)
	st, isStatus := status.FromError(err)
	switch {
	case err == nil:
		r.Code = "OK"
		r.Answer, _ = proto.MarshalOptions{Deterministic: true}.Marshal(resp)
	case isStatus:
		r.Code = st.Code().String()
		r.Answer, _ = proto.Marshal(st.Proto())
	default:
		r.Code = "error"
	}
	return r
}
