package connectidempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest/gen/idempotency/testing/v1/testingv1connect"
)

// Services gives Server.Validate a connect-go server's services: the
// start-up check finds what it finds on a grpc-go server (here the
// bidirectional method with an option), and names a service the
// descriptors lack by panicking.
func TestServices(t *testing.T) {
	t.Parallel()
	srv, _ := memServer(t)
	_ = connectidempotency.NewInterceptor(srv)
	if err := srv.Validate(connectidempotency.Services(testingv1connect.TestServiceName)); err != nil {
		t.Fatalf("Validate(TestService) = %v, want nil", err)
	}
	err := srv.Validate(connectidempotency.Services(testingv1connect.TestServiceName, testingv1connect.StreamServiceName))
	var ce *idempotency.MethodConfigError
	if !errors.As(err, &ce) || !strings.HasSuffix(ce.Method, "/Chat") {
		t.Fatalf("Validate(StreamService) = %v, want the Chat method's configuration error", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "no.Such") {
			t.Fatalf("Services of an unknown service: panic %v, want one naming it", r)
		}
	}()
	connectidempotency.Services("no.Such")
}
