package idempotency_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
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
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// TestReplayBinaryMetadataAndMessage: outcomes that the version 1 record
// could not encode (proto3 strings must be UTF-8) are stored and replayed
// byte for byte, and the handler runs once.
func TestReplayBinaryMetadataAndMessage(t *testing.T) {
	t.Parallel()
	traceBin := "\xff\x01"
	declined := "card \xff declined"
	cases := []struct {
		name    string
		payload string
		code    codes.Code
	}{
		{"binary header on a response", "ok", codes.OK},
		{"non-UTF-8 status message", "declined", codes.FailedPrecondition},
	}
	f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-trace-bin", traceBin, "x-plain", "v"))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-end-bin", traceBin))
		if req.GetPayload() == "declined" {
			return nil, status.Error(codes.FailedPrecondition, declined)
		}
		return testserver.Echo(ctx, m, req)
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := withKey(t.Context(), "k-bin-"+tc.payload)
			var firstHdr, firstTr, hdr, tr metadata.MD
			first, ferr := f.Client.Do(ctx, &testingv1.DoRequest{Payload: tc.payload}, grpc.Header(&firstHdr), grpc.Trailer(&firstTr))
			replay, rerr := f.Client.Do(ctx, &testingv1.DoRequest{Payload: tc.payload}, grpc.Header(&hdr), grpc.Trailer(&tr))
			if status.Code(ferr) != tc.code || status.Code(rerr) != tc.code {
				t.Fatalf("codes %v then %v, want %v twice", status.Code(ferr), status.Code(rerr), tc.code)
			}
			// grpc-go writes a status message that is not UTF-8 with the
			// replacement character, the same way for both answers.
			if m, want := status.Convert(rerr).Message(), status.Convert(ferr).Message(); m != want {
				t.Fatalf("replayed message %q, want the first answer's %q", m, want)
			}
			if tc.code == codes.OK {
				if first.GetExecution() != replay.GetExecution() {
					t.Fatalf("replay %v, want the first answer %v", replay, first)
				}
				if got := hdr.Get("x-trace-bin"); len(got) != 1 || got[0] != traceBin {
					t.Fatalf("replayed x-trace-bin %q, want %q", got, traceBin)
				}
				if len(hdr.Get(idempotency.ReplayedKey)) != 1 {
					t.Fatal("replay lacks the replay marker")
				}
			}
			if got := tr.Get("x-end-bin"); len(got) != 1 || got[0] != traceBin {
				t.Fatalf("replayed x-end-bin %q, want %q", got, traceBin)
			}
		})
	}
	t.Cleanup(func() {
		if n := f.Service.Executions(); n != int64(len(cases)) {
			t.Errorf("handler ran %d times for %d keys, want once per key", n, len(cases))
		}
		if n := f.Events.Count(idempotency.DecisionReleased); n != 0 {
			t.Errorf("%d claims released after the handler ran, want 0", n)
		}
	})
}

// TestUnkeepableOutcomeCompletesNotRetained: once a handler has run under a
// claim, an outcome that cannot be kept (one that does not encode, or one
// whose headers, trailers or error details are over the limit) completes
// the key with a not-retained record. Nothing releases the claim, so a
// retry never runs the handler again.
func TestUnkeepableOutcomeCompletesNotRetained(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 2048)
	cases := map[string]testserver.HandlerFunc{
		"error detail that does not encode": func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
			// A type URL that is not UTF-8 cannot be marshalled.
			st := &spb.Status{Code: int32(codes.NotFound), Message: "gone", Details: []*anypb.Any{{TypeUrl: "type.googleapis.com/\xff"}}}
			return nil, status.FromProto(st).Err()
		},
		"trailer over the limit": func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
			_ = grpc.SetTrailer(ctx, metadata.Pairs("x-big", big))
			return testserver.Echo(ctx, m, req)
		},
		"header over the limit": func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
			_ = grpc.SetHeader(ctx, metadata.Pairs("x-big", big))
			return testserver.Echo(ctx, m, req)
		},
		"error message over the limit": func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
			return nil, status.Error(codes.InvalidArgument, big)
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, h, idempotency.WithMaxResponseBytes(1024))
			ctx := withKey(t.Context(), "k-unkeepable")
			_, _ = f.Client.Do(ctx, &testingv1.DoRequest{})
			for range 3 {
				_, err := f.Client.Do(ctx, &testingv1.DoRequest{})
				wantReason(t, err, codes.FailedPrecondition, idempotency.ErrResponseNotRetained.Reason)
			}
			if n := f.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			if n := f.Faults.Count("release"); n != 0 {
				t.Fatalf("%d releases after the handler ran, want 0", n)
			}
		})
	}
}

// TestOutcomeAtTheLimitIsKept: headers and a response that together are
// exactly at the limit are retained.
func TestOutcomeAtTheLimitIsKept(t *testing.T) {
	t.Parallel()
	const limit = 1024
	hdrVal := strings.Repeat("h", 100)
	// The test service numbers the execution in the response too.
	size := func(blob int) int { return proto.Size(&testingv1.DoResponse{Blob: make([]byte, blob), Execution: 1}) }
	blob := limit - len("x-h") - len(hdrVal)
	for size(blob) > limit-len("x-h")-len(hdrVal) {
		blob--
	}
	if size(blob)+len("x-h")+len(hdrVal) != limit {
		t.Fatalf("no blob size makes the outcome exactly %d bytes", limit)
	}
	f := newFixture(t, func(ctx context.Context, _ string, _ *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-h", hdrVal))
		return &testingv1.DoResponse{Blob: bytes.Repeat([]byte{1}, blob)}, nil
	}, idempotency.WithMaxResponseBytes(limit))
	ctx := withKey(t.Context(), "k-limit")
	for range 2 {
		if _, err := f.Client.Do(ctx, &testingv1.DoRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if n := f.Events.Count(idempotency.DecisionNotRetained); n != 0 {
		t.Fatalf("outcome at the limit not retained")
	}
}

// TestOutcomeThatPanicsIsNotRetained: a handler's answer whose encoding
// panics (a nil *dynamicpb.Message, which has no descriptor) completes
// the key as not retained, as any answer that cannot be encoded does
// (decision 30): the panic does not escape after the handler ran, which
// would leave its claim in flight until the lease ends and run it again.
func TestOutcomeThatPanicsIsNotRetained(t *testing.T) {
	t.Parallel()
	files := dynamicFiles(t)
	md := mustFind[protoreflect.ServiceDescriptor](t, files, "dyn.v1.Payments").Methods().Get(0)
	const full = "/dyn.v1.Payments/Charge"
	var ran atomic.Int64
	ev := &events{}
	intercept := idempotency.UnaryServerInterceptor(memStore(t), idempotency.WithDescriptors(files), idempotency.WithObserver(ev))
	handle := func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		req := dynamicpb.NewMessage(md.Input())
		if err := dec(req); err != nil {
			return nil, err
		}
		resp, err := intercept(ctx, req, &grpc.UnaryServerInfo{FullMethod: full}, func(context.Context, any) (any, error) {
			ran.Add(1)
			return (*dynamicpb.Message)(nil), nil
		})
		if m, ok := resp.(*dynamicpb.Message); ok && m == nil {
			// grpc-go itself panics encoding it: answer as a layer
			// between the two would.
			return nil, status.Error(codes.Internal, "nil response")
		}
		return resp, err
	}
	srv := testserver.NewWith(t, &testserver.Service{}, func(r grpc.ServiceRegistrar) {
		r.RegisterService(&grpc.ServiceDesc{
			ServiceName: "dyn.v1.Payments",
			HandlerType: (*any)(nil),
			Methods:     []grpc.MethodDesc{{MethodName: "Charge", Handler: handle}},
			Metadata:    md.ParentFile().Path(),
		}, struct{}{})
	})
	cc := srv.Dial(t)
	for n := range 2 {
		err := cc.Invoke(withKey(t.Context(), "k-1"), full, dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output()))
		if n == 1 && (status.Code(err) != codes.FailedPrecondition || idempotency.Reason(err) != idempotency.ErrResponseNotRetained.Reason) {
			t.Fatalf("retry: %v, want FAILED_PRECONDITION %s", err, idempotency.ErrResponseNotRetained.Reason)
		}
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if n := ev.Count(idempotency.DecisionNotRetained); n != 1 {
		t.Fatalf("observer saw %d %v events, want 1", n, idempotency.DecisionNotRetained)
	}
}

// A server whose messages have no generated Go types (a registry built
// from a descriptor set, handlers on dynamicpb messages) replays a stored
// response: the retry gets the first answer byte for byte, the handler runs
// once, and no record is reported corrupt. The response type comes from the
// method's descriptor, or, for a service the registry does not describe,
// from the message the record names.
func TestReplayWithoutGeneratedTypes(t *testing.T) {
	t.Parallel()
	files := dynamicFiles(t)
	for _, service := range []string{"dyn.v1.Payments", "dyn.v1.Undescribed"} {
		t.Run(service, func(t *testing.T) {
			t.Parallel()
			ev := &events{}
			var ran atomic.Int64
			md := mustFind[protoreflect.ServiceDescriptor](t, files, "dyn.v1.Payments").Methods().Get(0)
			srv := newDynamicServer(t, service, md, &ran, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(memStore(t),
				idempotency.WithDescriptors(files), idempotency.WithObserver(ev))))
			cc := srv.Dial(t)

			req := dynamicpb.NewMessage(md.Input())
			req.Set(md.Input().Fields().ByName("amount"), protoreflect.ValueOfInt64(1250))
			var answers [2][]byte
			for n := range answers {
				resp := dynamicpb.NewMessage(md.Output())
				if err := cc.Invoke(withKey(t.Context(), "k-1"), "/"+service+"/Charge", req, resp); err != nil {
					t.Fatalf("call %d: %v", n+1, err)
				}
				// A dynamic message goes on the wire with its fields in
				// map order: compare the canonical encodings.
				var err error
				if answers[n], err = (proto.MarshalOptions{Deterministic: true}).Marshal(resp); err != nil {
					t.Fatal(err)
				}
			}
			if want := "ch-1"; !bytes.Contains(answers[0], []byte(want)) || !bytes.Equal(answers[0], answers[1]) {
				t.Fatalf("replay %x, want the first answer %x (with id %q)", answers[1], answers[0], want)
			}
			if n := ran.Load(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			if n := ev.Count(idempotency.DecisionRecordCorrupt); n != 0 {
				t.Fatalf("observer saw %d %v events, want 0", n, idempotency.DecisionRecordCorrupt)
			}
			if n := ev.Count(idempotency.DecisionReplayed); n != 1 {
				t.Fatalf("observer saw %d %v events, want 1", n, idempotency.DecisionReplayed)
			}
		})
	}
}

// dynamicFiles returns a registry, built from a serialized descriptor set,
// of dyn.v1.Payments, whose messages no generated code in the test binary
// has.
func dynamicFiles(t *testing.T) *protoregistry.Files {
	t.Helper()
	return dynamicFilesOf(t, "dyn.v1", "Payments", nil)
}

// dynamicFilesOf returns a registry as [dynamicFiles] does, of service in
// package pkg, whose method Charge has the options opts (none when nil).
func dynamicFilesOf(t *testing.T, pkg, service string, opts *descriptorpb.MethodOptions) *protoregistry.Files {
	t.Helper()
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type, label descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(), Label: label.Enum(), JsonName: proto.String(name)}
	}
	const (
		str, i64         = descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_INT64
		single, repeated = descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL, descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	)
	file := &descriptorpb.FileDescriptorProto{
		Name:    proto.String(strings.ReplaceAll(pkg, ".", "/") + "/dyn.proto"),
		Package: proto.String(pkg),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("ChargeRequest"), Field: []*descriptorpb.FieldDescriptorProto{field("amount", 1, i64, single)}},
			{Name: proto.String("ChargeResponse"), Field: []*descriptorpb.FieldDescriptorProto{
				field("tags", 3, str, repeated), field("id", 1, str, single), field("amount", 2, i64, single)}},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String(service),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name: proto.String("Charge"), InputType: proto.String("." + pkg + ".ChargeRequest"), OutputType: proto.String("." + pkg + ".ChargeResponse"),
				Options: opts,
			}},
		}},
	}
	if opts != nil {
		file.Dependency = []string{"idempotency/v1/options.proto", "google/protobuf/descriptor.proto"}
	}
	b, err := proto.Marshal(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{file}})
	if err != nil {
		t.Fatal(err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := (proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(b, set); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.FileOptions{AllowUnresolvable: false}.NewFiles(withDependencies(set))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(pkg + ".ChargeResponse")); err == nil {
		t.Fatalf("%s.ChargeResponse has a generated type; the test needs one that has none", pkg)
	}
	return files
}

// withDependencies adds to set the files its files import, from
// protoregistry.GlobalFiles, in dependency order.
func withDependencies(set *descriptorpb.FileDescriptorSet) *descriptorpb.FileDescriptorSet {
	var deps []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var add func(path string)
	add = func(path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		if err != nil {
			return
		}
		for i := range fd.Imports().Len() {
			add(fd.Imports().Get(i).Path())
		}
		deps = append(deps, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range set.GetFile() {
		for _, d := range f.GetDependency() {
			add(d)
		}
	}
	return &descriptorpb.FileDescriptorSet{File: append(deps, set.GetFile()...)}
}

// mustFind returns the descriptor of name in files, as a D.
func mustFind[D protoreflect.Descriptor](t *testing.T, files *protoregistry.Files, name protoreflect.FullName) D {
	t.Helper()
	d, err := files.FindDescriptorByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return d.(D)
}

// newDynamicServer serves md as service, as a server built on a
// descriptor set does: with a hand-built grpc.ServiceDesc and a handler on
// dynamicpb messages. The handler numbers its executions in ran and answers
// with a response whose every field is set.
func newDynamicServer(t *testing.T, service string, md protoreflect.MethodDescriptor, ran *atomic.Int64, opts ...grpc.ServerOption) *testserver.Server {
	t.Helper()
	full := "/" + service + "/" + string(md.Name())
	handle := func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		req := dynamicpb.NewMessage(md.Input())
		if err := dec(req); err != nil {
			return nil, err
		}
		handler := func(_ context.Context, r any) (any, error) {
			n := ran.Add(1)
			in := r.(proto.Message).ProtoReflect()
			resp := dynamicpb.NewMessage(md.Output())
			fields := md.Output().Fields()
			resp.Set(fields.ByName("id"), protoreflect.ValueOfString("ch-"+strconv.FormatInt(n, 10)))
			resp.Set(fields.ByName("amount"), in.Get(in.Descriptor().Fields().ByName("amount")))
			tags := resp.Mutable(fields.ByName("tags")).List()
			for _, tag := range []string{"card", "eur"} {
				tags.Append(protoreflect.ValueOfString(tag))
			}
			return resp, nil
		}
		if interceptor == nil {
			return handler(ctx, req)
		}
		return interceptor(ctx, req, &grpc.UnaryServerInfo{FullMethod: full}, handler)
	}
	return testserver.NewWith(t, &testserver.Service{}, func(r grpc.ServiceRegistrar) {
		r.RegisterService(&grpc.ServiceDesc{
			ServiceName: service,
			HandlerType: (*any)(nil),
			Methods:     []grpc.MethodDesc{{MethodName: string(md.Name()), Handler: handle}},
			Metadata:    md.ParentFile().Path(),
		}, struct{}{})
	}, opts...)
}
