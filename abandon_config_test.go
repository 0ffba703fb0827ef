package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/grpc-idempotency/idempotency"
	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

var tunedMethod = testingv1.TestService_Tuned_FullMethodName

// abandonedOption returns the test service's registry with the abandoned
// option of method (Tuned, or a StreamService method) set to a.
func abandonedOption(t *testing.T, method string, a idempotencyv1.AbandonPolicy) *protoregistry.Files {
	t.Helper()
	name := method[strings.LastIndex(method, "/")+1:]
	return editedDescriptorFiles(t, func(f *descriptorpb.FileDescriptorProto) {
		for _, svc := range f.GetService() {
			for _, m := range svc.GetMethod() {
				if m.GetName() != name {
					continue
				}
				if m.Options == nil {
					m.Options = &descriptorpb.MethodOptions{}
				}
				p, _ := proto.GetExtension(m.GetOptions(), idempotencyv1.E_Method).(*idempotencyv1.MethodPolicy)
				if p == nil {
					p = &idempotencyv1.MethodPolicy{}
				}
				p.Abandoned = a
				proto.SetExtension(m.GetOptions(), idempotencyv1.E_Method, p)
			}
		}
	}, protodesc.ToFileDescriptorProto(testingv1.File_idempotency_testing_v1_streams_proto))
}

// recoverTuned answers a recovery of Tuned.
func recoverTuned(context.Context, proto.Message) (proto.Message, error) {
	return &testingv1.DoResponse{Payload: "recovered"}, nil
}

// TestAbandonedPolicyPrecedence (decision 290): the most specific policy
// wins: MethodPolicy.Abandoned, then the proto option abandoned, then
// WithAbandonedClaims, then AbandonRerun; a MethodPolicy's Recover serves
// a proto option's ABANDON_POLICY_RECOVER. What a call of an abandoned
// key does shows the policy: run the handler, refuse, or recover; every
// claim keeps the entry for the method's retention (Tuned's 2h) and takes
// it over unless the policy blocks.
func TestAbandonedPolicyPrecedence(t *testing.T) {
	t.Parallel()
	const (
		rerun = idempotencyv1.AbandonPolicy_ABANDON_POLICY_RERUN
		block = idempotencyv1.AbandonPolicy_ABANDON_POLICY_BLOCK
		recov = idempotencyv1.AbandonPolicy_ABANDON_POLICY_RECOVER
		unset = idempotencyv1.AbandonPolicy_ABANDON_POLICY_UNSPECIFIED
	)
	cases := []struct {
		name   string
		server idempotency.AbandonPolicy // AbandonUnset: no WithAbandonedClaims
		proto  idempotencyv1.AbandonPolicy
		code   idempotency.MethodPolicy
		want   idempotency.AbandonPolicy
	}{
		{"default", 0, unset, idempotency.MethodPolicy{}, idempotency.AbandonRerun},
		{"server block", idempotency.AbandonBlock, unset, idempotency.MethodPolicy{}, idempotency.AbandonBlock},
		{"server rerun", idempotency.AbandonRerun, unset, idempotency.MethodPolicy{}, idempotency.AbandonRerun},
		{"proto block", 0, block, idempotency.MethodPolicy{}, idempotency.AbandonBlock},
		{"proto rerun over server block", idempotency.AbandonBlock, rerun, idempotency.MethodPolicy{}, idempotency.AbandonRerun},
		{"proto block over server rerun", idempotency.AbandonRerun, block, idempotency.MethodPolicy{}, idempotency.AbandonBlock},
		{"code rerun over proto block", 0, block, idempotency.MethodPolicy{Abandoned: idempotency.AbandonRerun}, idempotency.AbandonRerun},
		{"code block over proto rerun", idempotency.AbandonRerun, rerun, idempotency.MethodPolicy{Abandoned: idempotency.AbandonBlock}, idempotency.AbandonBlock},
		{"code recover over server block", idempotency.AbandonBlock, unset,
			idempotency.MethodPolicy{Abandoned: idempotency.AbandonRecover, Recover: recoverTuned}, idempotency.AbandonRecover},
		{"proto recover with code's function", idempotency.AbandonBlock, recov,
			idempotency.MethodPolicy{Recover: recoverTuned}, idempotency.AbandonRecover},
		{"code block over proto recover", 0, recov, idempotency.MethodPolicy{Abandoned: idempotency.AbandonBlock}, idempotency.AbandonBlock},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []idempotency.ServerOption
			if tc.server != idempotency.AbandonUnset {
				opts = append(opts, idempotency.WithAbandonedClaims(tc.server))
			}
			if tc.proto != unset {
				opts = append(opts, idempotency.WithDescriptors(abandonedOption(t, tunedMethod, tc.proto)))
			}
			opts = append(opts, idempotency.WithMethodPolicy(tunedMethod, tc.code))
			f := newFixture(t, nil, opts...)
			req := &testingv1.DoRequest{Payload: "p"}
			abandonKey(t, f.Store, f.Idempotency, tunedMethod, tunedMethod, "k", req)
			resp, err := f.Client.Tuned(withKey(t.Context(), "k"), req)
			switch tc.want {
			case idempotency.AbandonRerun:
				if err != nil || resp.GetExecution() != 1 {
					t.Fatalf("%v, %v: want the handler run", resp, err)
				}
			case idempotency.AbandonBlock:
				wantReason(t, err, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason)
			case idempotency.AbandonRecover:
				if err != nil || resp.GetPayload() != "recovered" || f.Service.Executions() != 0 {
					t.Fatalf("%v, %v: want the recovered response", resp, err)
				}
			}
			for _, c := range f.Faults.Calls() {
				if c.Op == "claim" && (c.Opts.Keep != 2*time.Hour || c.Opts.TakeOver != (tc.want != idempotency.AbandonBlock)) {
					t.Fatalf("claim options %+v under %v", c.Opts, tc.want)
				}
			}
		})
	}
}

// TestAbandonedProtoOptionMisconfigured (decisions 292 and 295): a proto
// option the server cannot follow fails the method's calls closed with
// INTERNAL and ErrMisconfigured, and Server.Validate reports it:
// ABANDON_POLICY_RECOVER without a RecoverFunc, an abandoned value this
// version does not know (unless the code sets the policy), RECOVER on a
// streaming method.
func TestAbandonedProtoOptionMisconfigured(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		method string
		option idempotencyv1.AbandonPolicy
		code   *idempotency.MethodPolicy
		want   string // "" when the method works
	}{
		{"recover without a function", tunedMethod, idempotencyv1.AbandonPolicy_ABANDON_POLICY_RECOVER, nil, "no RecoverFunc is set"},
		{"unknown value", tunedMethod, 9, nil, "abandoned 9 is none this version knows"},
		{"unknown value set in code", tunedMethod, 9, &idempotency.MethodPolicy{Abandoned: idempotency.AbandonBlock}, ""},
		{"recover on a server stream", testingv1.StreamService_Download_FullMethodName, idempotencyv1.AbandonPolicy_ABANDON_POLICY_RECOVER, nil, "AbandonRecover on a streaming method"},
		{"recover on a client stream", testingv1.StreamService_Upload_FullMethodName, idempotencyv1.AbandonPolicy_ABANDON_POLICY_RECOVER, nil, "AbandonRecover on a streaming method"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := []idempotency.ServerOption{idempotency.WithDescriptors(abandonedOption(t, tc.method, tc.option))}
			if tc.code != nil {
				opts = append(opts, idempotency.WithMethodPolicy(tc.method, *tc.code))
			}
			f := testkit.Start(t, testkit.Config{Options: opts, Register: func(r grpc.ServiceRegistrar) {
				testingv1.RegisterStreamServiceServer(r, &streamtest.Streams{})
			}})
			var err error // the method's own problem, if any (Chat is always one)
			for _, e := range unjoin(f.Idempotency.Validate(f.GRPC)) {
				if strings.Contains(e.Error(), tc.method) {
					err = e
				}
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, idempotency.ErrMisconfigured) || !strings.Contains(err.Error(), tc.method) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %s: %q", err, tc.method, tc.want)
			}
			if tc.method != tunedMethod {
				return
			}
			_, err = f.Client.Tuned(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			wantReason(t, err, codes.Internal, idempotency.ErrMisconfigured.Reason)
			if f.Service.Executions() != 0 || f.Events.Count(idempotency.DecisionMisconfigured) != 1 {
				t.Fatalf("handler ran %d times; events %v", f.Service.Executions(), f.Events)
			}
		})
	}
}

// TestAbandonedConfigPanics: a policy that cannot work panics at
// construction, naming the option and the method or operation.
func TestAbandonedConfigPanics(t *testing.T) {
	t.Parallel()
	recoverAny := func(context.Context, proto.Message) (proto.Message, error) { return nil, idempotency.ErrRerun }
	cases := []struct {
		name string
		opt  idempotency.ServerOption
		want string
	}{
		{"server unset", idempotency.WithAbandonedClaims(idempotency.AbandonUnset), "idempotency: WithAbandonedClaims: policy must be AbandonRerun or AbandonBlock, got AbandonPolicy(0)"},
		{"server unknown", idempotency.WithAbandonedClaims(7), "idempotency: WithAbandonedClaims: policy must be AbandonRerun or AbandonBlock, got AbandonPolicy(7)"},
		{"server recover", idempotency.WithAbandonedClaims(idempotency.AbandonRecover), "idempotency: WithAbandonedClaims: AbandonRecover needs a RecoverFunc of each method or operation"},
		{"method recover without function", idempotency.WithMethodPolicy(doMethod, idempotency.MethodPolicy{Abandoned: idempotency.AbandonRecover}),
			"idempotency: WithMethodPolicy: " + doMethod + ": Abandoned is AbandonRecover but Recover is nil"},
		{"method unknown policy", idempotency.WithMethodPolicy(doMethod, idempotency.MethodPolicy{Abandoned: -1}),
			"idempotency: WithMethodPolicy: " + doMethod + ": Abandoned must be one of the AbandonPolicy constants, got AbandonPolicy(-1)"},
		{"method function without recover", idempotency.WithMethodPolicy(doMethod, idempotency.MethodPolicy{Abandoned: idempotency.AbandonBlock, Recover: recoverAny}),
			"idempotency: WithMethodPolicy: " + doMethod + ": Recover is set but Abandoned is AbandonBlock"},
		{"operation recover without function", idempotency.WithOperationPolicy("pay", idempotency.MethodPolicy{Abandoned: idempotency.AbandonRecover}),
			"idempotency: WithOperationPolicy: pay: Abandoned is AbandonRecover but Recover is nil"},
		{"operation unknown policy", idempotency.WithOperationPolicy("pay", idempotency.MethodPolicy{Abandoned: 4}),
			"idempotency: WithOperationPolicy: pay: Abandoned must be one of the AbandonPolicy constants, got AbandonPolicy(4)"},
		{"method recover on a stream", idempotency.WithMethodPolicy(testingv1.StreamService_Download_FullMethodName,
			idempotency.MethodPolicy{Abandoned: idempotency.AbandonRecover, Recover: recoverAny}),
			"idempotency: method " + testingv1.StreamService_Download_FullMethodName + " (idempotency/testing/v1/streams.proto): AbandonRecover on a streaming method"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				p := recover()
				err, _ := p.(error)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("panic %v, want one mentioning %q", p, tc.want)
				}
			}()
			idempotency.NewServer(memStore(t), tc.opt)
		})
	}
}
