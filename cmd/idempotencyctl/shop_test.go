package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
)

// The shop service the scripts charge, shop.v1.Payments, is built from
// descriptors at run time: its types are linked into no binary, so the
// command decodes them only through the server's descriptors or
// --descriptor-set, as it would decode a team's own service.
//
//	service Payments {
//	  rpc Charge(ChargeRequest) returns (ChargeResponse);
//	  // Its namespace is in its proto option: a store reached directly
//	  // reads it from --descriptor-set.
//	  rpc Refund(ChargeRequest) returns (ChargeResponse) {
//	    option (idempotency.v1.method) = { namespace: "payments.refund" };
//	  }
//	  // Its namespace is set in code (WithMethodPolicy): a store reached
//	  // directly cannot know it, and is given --namespace.
//	  rpc Capture(ChargeRequest) returns (ChargeResponse);
//	}
//	message ChargeRequest { string customer = 1; int64 amount_cents = 2; }
//	message ChargeResponse { string charge_id = 1; int64 amount_cents = 2; }
const (
	shopService = "shop.v1.Payments"
	// customerSlow is the customer whose charges wait until the rig
	// releases them: a key that stays in flight.
	customerSlow = "slow"
	// captureNamespace is Capture's namespace, set in code.
	captureNamespace = "payments.capture"
)

// shopProto returns the shop service's file: it imports the proto options,
// which a descriptor set of this file alone leaves out (the command finds
// them among its linked files).
func shopProto() *descriptorpb.FileDescriptorProto {
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{
			Name: proto.String(name), Number: proto.Int32(n),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: typ.Enum(),
		}
	}
	message := func(name, id string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: []*descriptorpb.FieldDescriptorProto{
			field(id, 1, descriptorpb.FieldDescriptorProto_TYPE_STRING),
			field("amount_cents", 2, descriptorpb.FieldDescriptorProto_TYPE_INT64),
		}}
	}
	method := func(name string) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{
			Name: proto.String(name), InputType: proto.String(".shop.v1.ChargeRequest"), OutputType: proto.String(".shop.v1.ChargeResponse"),
		}
	}
	refund := method("Refund")
	refund.Options = &descriptorpb.MethodOptions{}
	proto.SetExtension(refund.Options, idempotencyv1.E_Method, &idempotencyv1.MethodPolicy{Namespace: "payments.refund"})
	return &descriptorpb.FileDescriptorProto{
		Name:        proto.String("shop/v1/payments.proto"),
		Package:     proto.String("shop.v1"),
		Syntax:      proto.String("proto3"),
		Dependency:  []string{"idempotency/v1/options.proto"},
		MessageType: []*descriptorpb.DescriptorProto{message("ChargeRequest", "customer"), message("ChargeResponse", "charge_id")},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Payments"), Method: []*descriptorpb.MethodDescriptorProto{method("Charge"), refund, method("Capture")},
		}},
	}
}

// shopFiles returns a registry holding the shop service's file, the
// server's descriptors (WithDescriptors).
func shopFiles() (*protoregistry.Files, protoreflect.ServiceDescriptor, error) {
	fd, err := protodesc.NewFile(shopProto(), protoregistry.GlobalFiles)
	if err != nil {
		return nil, nil, err
	}
	files := new(protoregistry.Files)
	if err := files.RegisterFile(fd); err != nil {
		return nil, nil, err
	}
	return files, fd.Services().ByName("Payments"), nil
}

// shopDescriptorSet is the descriptor set a team would build with
// buf build -o: the shop service's file, without its import.
func shopDescriptorSet() ([]byte, error) {
	return proto.Marshal(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{shopProto()}})
}

// ledger is the shop service's handler: it charges, and counts the charges
// of each key, as a payment provider's ledger would show them.
type ledger struct {
	mu      sync.Mutex
	charges map[string]int // by idempotency key
	total   int
	buggy   bool          // the handler declines every card: a bug
	started chan string   // a slow charge's key, once it has started
	release chan struct{} // closed to let slow charges finish
	once    sync.Once
}

func newLedger() *ledger {
	return &ledger{charges: make(map[string]int), started: make(chan string, 16), release: make(chan struct{})}
}

// count is how many times the handler charged key.
func (l *ledger) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.charges[key]
}

// deploy sets whether the handler has the bug that declines every card.
func (l *ledger) deploy(buggy bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buggy = buggy
}

// unblock lets the slow charges finish.
func (l *ledger) unblock() { l.once.Do(func() { close(l.release) }) }

// register registers the shop service, behind the interceptors of s, on
// the gRPC server.
func (l *ledger) register(s grpc.ServiceRegistrar, sd protoreflect.ServiceDescriptor) {
	desc := &grpc.ServiceDesc{ServiceName: shopService, HandlerType: (*any)(nil)}
	for i := range sd.Methods().Len() {
		md := sd.Methods().Get(i)
		desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: string(md.Name()), Handler: l.handler(md)})
	}
	s.RegisterService(desc, l)
}

// handler decodes md's request into a dynamic message and charges it,
// behind the server's interceptors.
func (l *ledger) handler(md protoreflect.MethodDescriptor) grpc.MethodHandler {
	full := "/" + shopService + "/" + string(md.Name())
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		req := dynamicpb.NewMessage(md.Input())
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) { return l.charge(ctx, md, req.(*dynamicpb.Message)) }
		if ic == nil {
			return h(ctx, req)
		}
		return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, h)
	}
}

// charge is the side effect that must not happen twice.
func (l *ledger) charge(ctx context.Context, md protoreflect.MethodDescriptor, req *dynamicpb.Message) (*dynamicpb.Message, error) {
	key := ""
	if v := metadata.ValueFromIncomingContext(ctx, "idempotency-key"); len(v) == 1 {
		key = v[0]
	}
	in := md.Input().Fields()
	l.mu.Lock()
	l.charges[key]++
	l.total++
	id := fmt.Sprintf("ch_%d", l.total)
	buggy := l.buggy
	l.mu.Unlock()
	if buggy {
		// A deterministic error: stored, and replayed to every retry.
		st, err := status.New(codes.FailedPrecondition, "card declined").WithDetails(&errdetails.ErrorInfo{Reason: "CARD_DECLINED", Domain: "shop.example"})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	if req.Get(in.ByName("customer")).String() == customerSlow {
		l.started <- key
		select {
		case <-l.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-charge-id", id))
	resp := dynamicpb.NewMessage(md.Output())
	out := md.Output().Fields()
	resp.Set(out.ByName("charge_id"), protoreflect.ValueOfString(id))
	resp.Set(out.ByName("amount_cents"), req.Get(in.ByName("amount_cents")))
	return resp, nil
}

// waitStarted waits until a slow charge of key has started.
func (l *ledger) waitStarted(key string) error {
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case k := <-l.started:
			if k == key {
				return nil
			}
		case <-timer.C:
			return fmt.Errorf("the charge of %s did not start", key)
		}
	}
}
