package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
)

// The -listen mode: what grpcurl does, a charge and then its replay for a
// caller without a token, reflection listing the service, and the metrics.
func TestServe(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var out syncBuffer
	go func() { done <- serve(ctx, config{Logs: t.Output()}, listeners{grpc: lis, metrics: metrics}, &out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	cc, err := dialNoToken(lis.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	pc := paymentsv1.NewPaymentsClient(cc)
	kctx := withKey(t.Context(), "k1")
	req := &paymentsv1.ChargeRequest{Customer: "alice", AmountCents: 1999}
	var ids []string
	var hdr metadata.MD
	for range 2 {
		resp, err := pc.Charge(kctx, req, grpc.Header(&hdr))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.GetPayment().GetId())
	}
	if ids[0] != "ch_1" || ids[1] != "ch_1" || !replayed(hdr) {
		t.Fatalf("charges %v, second replayed %t; want ch_1 twice, the second replayed", ids, replayed(hdr))
	}

	if services := listServices(t, cc); !strings.Contains(services, "payments.v1.Payments") {
		t.Fatalf("reflection lists %q, want payments.v1.Payments", services)
	}
	body := httpGet(t, "http://"+metrics.Addr().String()+"/metrics").Body
	if want := `idempotency_decisions_total{method="/payments.v1.Payments/Charge",outcome="replayed"} 1`; !strings.Contains(body, want) {
		t.Fatalf("metrics lack %q:\n%s", want, body)
	}
	if !strings.Contains(out.String(), "grpcurl -plaintext") {
		t.Fatalf("serve did not print the grpcurl hint:\n%s", out.String())
	}
}

// listServices asks server reflection for the service names.
func listServices(t *testing.T, cc *grpc.ClientConn) string {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return strings.Join(names, " ")
}
