package idempotency

import (
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
)

// captureStream forwards a handler's header and trailer calls to the real
// stream and records what was accepted, so the outcome can replay them.
type captureStream struct {
	grpc.ServerTransportStream

	mu      sync.Mutex
	header  metadata.MD
	trailer metadata.MD
}

func (s *captureStream) SetHeader(md metadata.MD) error {
	if err := s.ServerTransportStream.SetHeader(md); err != nil {
		return err
	}
	s.mu.Lock()
	s.header = metadata.Join(s.header, md)
	s.mu.Unlock()
	return nil
}

func (s *captureStream) SendHeader(md metadata.MD) error {
	if err := s.ServerTransportStream.SendHeader(md); err != nil {
		return err
	}
	s.mu.Lock()
	s.header = metadata.Join(s.header, md)
	s.mu.Unlock()
	return nil
}

func (s *captureStream) SetTrailer(md metadata.MD) error {
	if err := s.ServerTransportStream.SetTrailer(md); err != nil {
		return err
	}
	s.mu.Lock()
	s.trailer = metadata.Join(s.trailer, md)
	s.mu.Unlock()
	return nil
}

// recorded returns the captured header and trailer in record form.
func (s *captureStream) recorded() (header, trailer []*idempotencyv1.Metadata) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return toRecordMD(s.header), toRecordMD(s.trailer)
}

// hopByHop are transport-level keys that are never stored or replayed.
var hopByHop = map[string]bool{
	"connection": true, "content-type": true, "keep-alive": true, "proxy-connection": true,
	"te": true, "trailer": true, "transfer-encoding": true, "upgrade": true, "user-agent": true,
	ReplayedKey: true,
}

// replayable reports whether a metadata key may be stored and replayed:
// not reserved by gRPC ("grpc-", ":" pseudo-headers) and not hop-by-hop.
func replayable(key string) bool {
	return !strings.HasPrefix(key, "grpc-") && !strings.HasPrefix(key, ":") && !hopByHop[key]
}

func toRecordMD(md metadata.MD) []*idempotencyv1.Metadata {
	if len(md) == 0 {
		return nil
	}
	out := make([]*idempotencyv1.Metadata, 0, len(md))
	for k, v := range md {
		if replayable(k) {
			vals := make([][]byte, len(v))
			for j, s := range v {
				vals[j] = []byte(s)
			}
			out = append(out, &idempotencyv1.Metadata{Key: k, Values: vals})
		}
	}
	// Deterministic order, so equal outcomes encode to equal records.
	slices.SortFunc(out, func(a, b *idempotencyv1.Metadata) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// replayedMD is the replay marker alone, shared read-only: grpc-go copies
// the metadata it is given.
var replayedMD = metadata.Pairs(ReplayedKey, "true")

// fromRecordMD converts stored metadata back, adding the replay marker when
// marked is true. It returns nil when there is nothing to send.
func fromRecordMD(md []*idempotencyv1.Metadata, marked bool) metadata.MD {
	if len(md) == 0 {
		if marked {
			return replayedMD
		}
		return nil
	}
	out := make(metadata.MD, len(md)+1)
	for _, e := range md {
		if replayable(e.GetKey()) {
			vals := make([]string, len(e.GetValues()))
			for j, v := range e.GetValues() {
				vals[j] = string(v)
			}
			out[e.GetKey()] = vals
		}
	}
	if marked {
		out[ReplayedKey] = replayedMD[ReplayedKey]
	}
	return out
}
