package killtest

import (
	"context"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
)

// Answer is what a call of the binary's method got.
type Answer struct {
	// PID is the process whose handler ran for the key: a replay names
	// the process that stored the outcome.
	PID int
	// Replayed is whether the answer came from the store ([idempotency.Replayed]).
	Replayed bool
	// Wire is the response in its wire form (deterministic), to compare
	// a replay with the first answer byte for byte.
	Wire []byte
}

// Client calls the binary's method on one process.
type Client struct {
	conn *grpc.ClientConn
}

// Dial returns a client of the process at addr, through the idempotency
// client interceptor with opts, closed when tb ends.
func Dial(tb testing.TB, addr string, opts ...idempotency.ClientOption) *Client {
	tb.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(idempotency.UnaryClientInterceptor(opts...)))
	if err != nil {
		tb.Fatalf("killtest: dialling %s: %v", addr, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return &Client{conn: conn}
}

// Charge calls the method with key, within ctx.
func (c *Client) Charge(ctx context.Context, key string) (Answer, error) {
	var replayed bool
	resp := new(wrapperspb.StringValue)
	err := c.conn.Invoke(ctx, killpoint.Method, wrapperspb.String(key), resp,
		idempotency.WithKey(key), idempotency.ReplayedInto(&replayed))
	if err != nil {
		return Answer{}, err
	}
	pid, err := strconv.Atoi(resp.GetValue())
	if err != nil {
		return Answer{}, err
	}
	wire, err := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
	if err != nil {
		return Answer{}, err
	}
	return Answer{PID: pid, Replayed: replayed, Wire: wire}, nil
}
