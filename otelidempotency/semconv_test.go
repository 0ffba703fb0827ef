package otelidempotency

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
)

func TestSemconvModeOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  string
		want semconvMode
	}{
		{"", semconvNew},
		{"http", semconvNew},
		{"rpc/old", semconvOld},
		{"http/dup, rpc/old", semconvOld},
		{"rpc/dup", semconvDup},
		{" rpc/dup ,http", semconvDup},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Parallel()
			if got := semconvModeOf(tt.env); got != tt.want {
				t.Fatalf("semconvModeOf(%q) = %d, want %d", tt.env, got, tt.want)
			}
		})
	}
}

// The rpc.* attributes name a method as otelgrpc does in each mode.
func TestMethodAttrs(t *testing.T) {
	t.Parallel()
	const full = "/payments.v1.Payments/Charge"
	tests := []struct {
		name   string
		mode   semconvMode
		method string
		want   map[string]string
	}{
		{"new", semconvNew, full, map[string]string{"rpc.system.name": "grpc", "rpc.method": "payments.v1.Payments/Charge"}},
		{"old", semconvOld, full, map[string]string{"rpc.system": "grpc", "rpc.service": "payments.v1.Payments", "rpc.method": "Charge"}},
		{"dup", semconvDup, full, map[string]string{
			"rpc.system": "grpc", "rpc.service": "payments.v1.Payments",
			"rpc.system.name": "grpc", "rpc.method": "payments.v1.Payments/Charge",
		}},
		{"new, no service", semconvNew, "/Charge", map[string]string{"rpc.system.name": "grpc", "rpc.method": "Charge"}},
		{"old, no service", semconvOld, "/Charge", map[string]string{"rpc.system": "grpc"}},
		{"not a full method", semconvDup, "Charge", map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set := attribute.NewSet(methodAttrs(tt.mode, tt.method)...)
			got := map[string]string{}
			for _, kv := range set.ToSlice() {
				got[string(kv.Key)] = kv.Value.AsString()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("methodAttrs(%q) (-want +got):\n%s", tt.method, diff)
			}
		})
	}
}
