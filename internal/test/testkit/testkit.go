// Package testkit is the test rig that the tests of every module of the
// repository share, on top of [testserver] (which starts gRPC servers)
// and [wait] (which waits):
//
//   - [Serve] starts the test service behind the idempotency interceptors
//     of one Server over one store, with the interceptors a test puts
//     around them, and records the Server's events;
//   - [Start] is [Serve] with a client dialed to it and a recorder of
//     every attempt the server sees ([Fixture], [Attempts]);
//   - [Events] records observer events and lets a test wait for them;
//   - [Send] sends an HTTP request and reads the whole answer;
//   - [WithKey], [ErrorInfo], [WantReason] and [ClientReason] send a key
//     and check an error's ErrorInfo;
//   - [DirectServer] calls the server interceptor as a function, with
//     metadata a gRPC client would refuse to send;
//   - [MoveOverServers] follows the documented move from one store to
//     another over real servers;
//   - [NewConsumerServer], [Results], [Ledger] and [RunInBackground] are
//     what the tests of the JetStream, Kafka and watermill consumers share
//     (each module keeps its broker's setup).
//
// It needs nothing but grpc, so the core module can hold it and every
// module of the repository can import it.
package testkit

import (
	"context"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
)

// WithKey returns ctx with key as the outgoing idempotency key.
func WithKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, key)
}

// ErrorInfo returns the ErrorInfo and RetryInfo details of err.
func ErrorInfo(err error) (*errdetails.ErrorInfo, *errdetails.RetryInfo) {
	var ei *errdetails.ErrorInfo
	var ri *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			ei = d
		case *errdetails.RetryInfo:
			ri = d
		}
	}
	return ei, ri
}

// WantReason fails the test unless err has code and the ErrorInfo reason.
func WantReason(t testing.TB, err error, code codes.Code, reason string) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("code = %v (%v), want %v", got, err, code)
	}
	ei, _ := ErrorInfo(err)
	if ei == nil || ei.GetReason() != reason || ei.GetDomain() != idempotency.ErrorDomain {
		t.Fatalf("ErrorInfo = %v, want reason %s in domain %s", ei, reason, idempotency.ErrorDomain)
	}
}

// ClientReason returns the ErrorInfo reason of err in the library's
// domain, or "".
func ClientReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == idempotency.ErrorDomain {
			return ei.GetReason()
		}
	}
	return ""
}
