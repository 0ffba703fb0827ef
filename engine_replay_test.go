package idempotency_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

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
