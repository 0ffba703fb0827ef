package idempotency

import (
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

// recordStatus is the record form of a handler's error.
func recordStatus(herr error) *recordv1.Status {
	p := status.Convert(herr).Proto()
	return &recordv1.Status{Code: p.GetCode(), Message: []byte(p.GetMessage()), Details: p.GetDetails()}
}

// replayedStatus is the error a stored status replays; nil for none (a
// stream that ended OK).
func replayedStatus(s *recordv1.Status) error {
	if s.GetCode() == 0 {
		return nil
	}
	return status.FromProto(&spb.Status{Code: s.GetCode(), Message: string(s.GetMessage()), Details: s.GetDetails()}).Err()
}
