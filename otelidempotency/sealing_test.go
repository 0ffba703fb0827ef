package otelidempotency_test

import (
	"context"
	"fmt"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
)

// Each record a server seals counts once for the key that sealed it, in a
// cumulative counter by key ID: sealing N records with key k makes k's
// count grow by N; a replay seals nothing; after a rotation the new
// primary's count grows and the old one's stays.
func TestRegisterSealingMetrics(t *testing.T) {
	t.Parallel()
	mem := testkit.NewMemoryStore(t)
	secret := func(b byte) []byte { s := make([]byte, idempotency.SealingKeySize); s[0] = b; return s }
	k1, k2 := idempotency.SealingKey{ID: "k1", Secret: secret(1)}, idempotency.SealingKey{ID: "k2", Secret: secret(2)}
	srv := idempotency.NewServer(mem, idempotency.WithSealing(idempotency.Sealing{Keys: idempotency.NewKeyring(k1)}))
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	reg, err := otelidempotency.RegisterSealingMetrics(srv, otelidempotency.WithMeterProvider(provider))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Unregister() })

	charge := func(t *testing.T, srv *idempotency.Server, key string) {
		t.Helper()
		_, _, err := idempotency.Do(t.Context(), srv, "charge", key, wrapperspb.String(key), func(context.Context) (*wrapperspb.StringValue, error) {
			return wrapperspb.String("charged " + key), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := sealedCounts(t, reader); len(got) != 0 {
		t.Fatalf("before any call: %v, want no points", got)
	}
	for i := range 3 {
		charge(t, srv, fmt.Sprint("a", i))
	}
	charge(t, srv, "a0") // a replay seals nothing
	if got := sealedCounts(t, reader); len(got) != 1 || got["k1"] != 3 {
		t.Fatalf("after 3 records sealed with k1 and a replay: %v, want k1: 3", got)
	}
	for i := range 2 {
		charge(t, srv, fmt.Sprint("b", i))
	}
	if got := sealedCounts(t, reader); got["k1"] != 5 {
		t.Fatalf("after 2 more: %v, want k1: 5", got)
	}
	if got := srv.SealedRecords(); len(got) != 1 || got["k1"] != 5 {
		t.Fatalf("SealedRecords() = %v, want k1: 5", got)
	}

	// The rotated server's records count under k2, in its own registration.
	rotated := idempotency.NewServer(mem, idempotency.WithSealing(idempotency.Sealing{Keys: idempotency.NewKeyring(k2, k1)}))
	reg2, err := otelidempotency.RegisterSealingMetrics(rotated, otelidempotency.WithMeterProvider(provider))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg2.Unregister() })
	charge(t, rotated, "a1") // sealed by k1: opened, replayed, nothing sealed
	for i := range 4 {
		charge(t, rotated, fmt.Sprint("c", i))
	}
	if got := sealedCounts(t, reader); len(got) != 2 || got["k1"] != 5 || got["k2"] != 4 {
		t.Fatalf("after the rotation: %v, want k1: 5, k2: 4", got)
	}

	// A server that does not seal reports nothing.
	if got := idempotency.NewServer(mem).SealedRecords(); len(got) != 0 {
		t.Fatalf("SealedRecords() of a server without sealing = %v, want none", got)
	}
}

// sealedCounts collects the sealed-records counter: its points by key ID,
// summed over the registrations that report each.
func sealedCounts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != otelidempotency.SealedRecordsMetric {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || !sum.IsMonotonic || sum.Temporality != metricdata.CumulativeTemporality {
				t.Fatalf("%s is %T, want a cumulative monotonic Sum[int64]", m.Name, m.Data)
			}
			if m.Unit != "{record}" {
				t.Fatalf("%s has the unit %q, want {record}", m.Name, m.Unit)
			}
			for _, p := range sum.DataPoints {
				id, ok := p.Attributes.Value(otelidempotency.SealingKeyIDKey)
				if !ok || p.Attributes.Len() != 1 {
					t.Fatalf("point %v, want only %s", p.Attributes, otelidempotency.SealingKeyIDKey)
				}
				out[id.AsString()] += p.Value
			}
		}
	}
	return out
}
