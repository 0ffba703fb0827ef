package idempotency_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// The store floors: the "<store>-floor-executed" and "<store>-floor-replay"
// rows of BenchmarkUnary (redis), BenchmarkUnaryPostgres,
// BenchmarkUnaryMySQL and BenchmarkUnarySQLite. Each is a bare gRPC
// handler, no interceptor, that makes the least a store-backed
// interceptor must make of its store, each step as the store's fastest
// native statement:
//
//   - executed: the claim write (Redis SET NX PX; SQL INSERT that does
//     nothing on a conflict), the handler's work, the serialization of its
//     answer and the completion write (Redis SET; SQL UPDATE by key);
//   - replay: one read of the stored bytes (Redis GET; a prepared SQL
//     SELECT by key), their decoding and the replay marker.
//
// No fingerprint, no token, no lease, no expiry, no status or headers
// kept: not safe to use. The interceptor's rows of the same benchmark,
// divided by these, are what it costs above what its store must cost.

// errFloorMissing is a floor store's answer to a read of a key it has no
// stored bytes for.
var errFloorMissing = errors.New("floor: no stored answer")

// floorStore is what a floor row needs of a store: three native
// statements on a table (or keyspace) of the row's own.
type floorStore interface {
	// Read returns the bytes stored under key: one read statement. A key
	// with none is errFloorMissing.
	Read(ctx context.Context, key string) ([]byte, error)
	// Claim writes key's claim unless key has one, in one statement, and
	// reports whether it wrote it.
	Claim(ctx context.Context, key string) (bool, error)
	// Complete stores data under the claimed key: one write statement.
	Complete(ctx context.Context, key string, data []byte) error
}

// floorHandler is the floor rows' handler over fs. With replay it reads
// first, as a replay row's calls all find the stored answer (the first,
// which stores it, finds none and executes); otherwise it claims first, as
// an executed row's calls all carry new keys. Either path is then its
// store's least: one read, or a claim and a completion.
func floorHandler(fs floorStore, replay bool) testserver.HandlerFunc {
	return func(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		keys := md[idempotency.MetadataKey]
		if len(keys) != 1 {
			return nil, status.Error(codes.InvalidArgument, "floor: one key")
		}
		key := keys[0]
		if replay {
			resp, err := floorReplay(ctx, fs, key)
			if !errors.Is(err, errFloorMissing) {
				return resp, err
			}
		}
		won, err := fs.Claim(ctx, key)
		if err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		if !won {
			return floorReplay(ctx, fs, key)
		}
		resp, err := testserver.Echo(ctx, method, req)
		if err != nil {
			return nil, err
		}
		data, err := proto.Marshal(resp)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := fs.Complete(ctx, key, data); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		return resp, nil
	}
}

// floorReplay answers with key's stored answer, decoded, and marks it
// replayed; errFloorMissing when key has none.
func floorReplay(ctx context.Context, fs floorStore, key string) (*testingv1.DoResponse, error) {
	data, err := fs.Read(ctx, key)
	if errors.Is(err, errFloorMissing) {
		return nil, err
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &testingv1.DoResponse{}
	if err := proto.Unmarshal(data, resp); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := grpc.SetHeader(ctx, metadata.Pairs(idempotency.ReplayedKey, "true")); err != nil {
		return nil, err
	}
	return resp, nil
}

// floorCounter counts what a floor row reports per call (round trips,
// writes): reset runs just before each timer starts, report after the
// calls, with b.N.
type floorCounter struct {
	reset  func(b *testing.B)
	report func(b *testing.B)
}

// benchFloor runs the floor row of one path on fs at 1 and 64 callers,
// as benchCalls runs the interceptor's rows, with count's figures.
func benchFloor(b *testing.B, fs floorStore, replay bool, count floorCounter) {
	client := testserver.New(b, &testserver.Service{Handler: floorHandler(fs, replay)}).Client(b)
	benchtest.ForCallers(b, func(b *testing.B, callers int) {
		benchCalls(b, client, callers, replay, func() {
			if count.reset != nil {
				count.reset(b)
			}
		})
		if count.report != nil {
			count.report(b)
		}
	})
}
