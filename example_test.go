package idempotency_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// newPaymentsServer chains the idempotency interceptor into a gRPC server
// and registers the payments service (example_service_test.go). Any
// [store.Store] will do: memorystore for one process, redisstore for many.
func newPaymentsServer(st store.Store, opts ...idempotency.ServerOption) *grpc.Server {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(st, opts...),
	))
	registerPaymentsServer(srv, &paymentsServer{}) // yours: shopv1.RegisterPaymentsServiceServer
	return srv
}

// The server interceptor, chained into grpc.NewServer with the embedded
// memory store. A retry with the same key gets the stored answer, marked
// idempotency-replayed, and the handler does not run again.
func ExampleUnaryServerInterceptor() {
	// At most a million entries: about 700 MB with 200-byte responses.
	memory := memorystore.New(memorystore.WithMaxEntries(1_000_000))
	defer memory.Close()

	srv := newPaymentsServer(memory)
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", serveInMemory(srv),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	ctx := metadata.AppendToOutgoingContext(context.Background(), idempotency.MetadataKey, "charge-42")
	for _, attempt := range []string{"first", "retry"} {
		var header metadata.MD
		resp, err := charge(ctx, conn, 4200, grpc.Header(&header))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s, replayed %v\n", attempt, resp.GetValue(), header.Get(idempotency.ReplayedKey))
	}
	// Output:
	// first: ch_1, replayed []
	// retry: ch_1, replayed [true]
}

// Scope keys by the authenticated principal so that one tenant can never
// read another tenant's answer by sending the same key: here two tenants
// send the same key and each gets its own charge.
func ExampleWithScope() {
	memory := memorystore.New()
	defer memory.Close()

	srv := newPaymentsServer(memory,
		idempotency.WithScope(func(ctx context.Context) (string, error) {
			// In production: the principal your authentication step verified.
			md, _ := metadata.FromIncomingContext(ctx)
			if t := md.Get("tenant"); len(t) == 1 {
				return t[0], nil
			}
			return "", status.Error(codes.Unauthenticated, "no tenant")
		}),
	)
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", serveInMemory(srv),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	for _, tenant := range []string{"tenant-a", "tenant-b", "tenant-a"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(),
			"tenant", tenant, idempotency.MetadataKey, "order-7")
		resp, err := charge(ctx, conn, 700)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(tenant+":", resp.GetValue())
	}
	_, err = charge(metadata.AppendToOutgoingContext(context.Background(), idempotency.MetadataKey, "order-7"), conn, 700)
	fmt.Println("no tenant:", status.Code(err))
	// Output:
	// tenant-a: ch_1
	// tenant-b: ch_2
	// tenant-a: ch_1
	// no tenant: Unauthenticated
}

// The options are stated once, in NewServer. The gRPC server runs its
// interceptor, and once the services are registered its start-up check,
// Validate, checks every method the server serves with the same options.
// Here a method name mistyped in WithMethodPolicy (Chrage for Charge) is
// caught before the server takes traffic.
func ExampleNewServer() {
	memory := memorystore.New()
	defer memory.Close()

	idem := idempotency.NewServer(memory,
		idempotency.WithMethodPolicy("/shop.v1.PaymentsService/Chrage",
			idempotency.MethodPolicy{Mode: idempotency.ModeRequired}),
	)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idem.UnaryServerInterceptor()))
	registerPaymentsServer(srv, &paymentsServer{})

	if err := idem.Validate(srv); err != nil {
		fmt.Println(err) // in production: log.Fatal(err), before Serve
	}
	// Output:
	// idempotency: method /shop.v1.PaymentsService/Chrage: WithMethodPolicy names a method the server does not serve
}

// While a request message changes across a deploy, fingerprint only what
// every server knows, so that a retry spanning the deploy is not refused as
// a reused key (docs/operations.md, "Proto changes and fingerprints"). Here
// the fields this server does not know are left out: a request from a newer
// client, with a field 9 this server has never heard of, gets the same
// fingerprint as one without it.
func ExampleWithFingerprint() {
	stableFields := func(method string, req proto.Message) ([]byte, error) {
		stable := proto.Clone(req)
		stable.ProtoReflect().SetUnknown(nil) // fields this server does not know yet
		return idempotency.Fingerprint(method, stable)
	}

	memory := memorystore.New()
	defer memory.Close()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(memory, idempotency.WithFingerprint(stableFields)),
	))
	defer srv.Stop()

	known, err := proto.Marshal(wrapperspb.Int64(4200))
	if err != nil {
		log.Fatal(err)
	}
	newer := protowire.AppendString(protowire.AppendTag(known, 9, protowire.BytesType), "memo")
	fingerprint := func(wire []byte) []byte {
		req := new(wrapperspb.Int64Value)
		if err := proto.Unmarshal(wire, req); err != nil {
			log.Fatal(err)
		}
		fp, err := stableFields(chargeMethod, req)
		if err != nil {
			log.Fatal(err)
		}
		return fp
	}
	fmt.Println("same fingerprint:", bytes.Equal(fingerprint(known), fingerprint(newer)))
	// Output: same fingerprint: true
}

// A consumer asks the server whether a handler's error is stored (final
// for the key) or released the claim (the redelivery runs it again).
func ExampleServer_StoresError() {
	memory := memorystore.New()
	defer memory.Close()
	s := idempotency.NewServer(memory, idempotency.WithStoredCodes(codes.InvalidArgument, codes.DataLoss))
	for _, err := range []error{
		status.Error(codes.InvalidArgument, "no such product"),
		status.Error(codes.DataLoss, "the order record is truncated"),
		status.Error(codes.NotFound, "no such customer"), // a default code this server does not store
		status.Error(codes.Unavailable, "the warehouse is down"),
		errors.New("not a status"),
		nil,
	} {
		fmt.Println(s.StoresError(err))
	}
	// Output:
	// true
	// true
	// false
	// false
	// false
	// false
}

// The store key of a client's key, from the server and by hand: each of
// the method, the scope and the key preceded by its length (a uvarint,
// one byte below 128), hashed with SHA-256, in unpadded base64url. An
// operation or a namespace adds a zero byte in front.
func ExampleServer_StoreKey() {
	mem := memorystore.New()
	defer mem.Close()
	srv := idempotency.NewServer(mem)

	method, _ := srv.StoreKey("/shop.v1.Orders/Create", "acme", "order-7")
	operation, _ := srv.StoreKey("orders.create", "acme", "order-7")
	fmt.Println(method)
	fmt.Println(operation)

	byHand := func(prefix []byte, name, scope, key string) string {
		b := prefix
		for _, s := range []string{name, scope, key} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
		sum := sha256.Sum256(b)
		return base64.RawURLEncoding.EncodeToString(sum[:])
	}
	fmt.Println(byHand(nil, "/shop.v1.Orders/Create", "acme", "order-7") == method)
	fmt.Println(byHand([]byte{0}, "orders.create", "acme", "order-7") == operation)
	// Output:
	// 8yqvEk4bIGFmOXkJ_9d-Le-0ESHOl43QGummi2l7sS0
	// jzaCsBC7kbaMQ-bmYNXw4XXTEB4QDj5vE4fQnihzok8
	// true
	// true
}

// NewSlogObserver writes one structured line per decision: here a
// charge, then its redelivery, replayed. The store key names the call
// in the log (and in the store, for an operator who looks it up or
// purges it); the client's key stays out unless WithSlogClientKey asks
// for it. The handler drops the time and the store time, which change
// from run to run.
func ExampleNewSlogObserver() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "store_time" {
				return slog.Attr{}
			}
			return a
		},
	}))
	memory := memorystore.New()
	defer memory.Close()
	idem := idempotency.NewServer(memory, idempotency.WithObserver(idempotency.NewSlogObserver(logger)))

	for range 2 {
		_, err := idempotency.Once(context.Background(), idem, "payments.charge", "evt_42", wrapperspb.Int64(4200),
			func(ctx context.Context) error { return nil })
		if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// level=INFO msg="idempotency decision" method=payments.charge operation=payments.charge decision=executed store_key=EgIKgTLfyIIfXR5Dd81GlDb3QGuJSXyqIafLHwERAsA
	// level=INFO msg="idempotency decision" method=payments.charge operation=payments.charge decision=replayed store_key=EgIKgTLfyIIfXR5Dd81GlDb3QGuJSXyqIafLHwERAsA
}
