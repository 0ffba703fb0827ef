package idempotency

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The replay marker ([ReplayedKey]) means that an answer came from the
// store. Only replay sets it: every header and trailer a handler sets goes
// through withoutMarker, so a handler that copies an upstream answer's
// metadata cannot mark a live answer as replayed.

// withoutMarker returns md without the replay marker, under any letter
// case: md itself when it has none (no allocation), else a copy.
func withoutMarker(md metadata.MD) metadata.MD {
	for k := range md {
		if isMarker(k) {
			out := make(metadata.MD, len(md))
			for k, v := range md {
				if !isMarker(k) {
					out[k] = v
				}
			}
			return out
		}
	}
	return md
}

func isMarker(key string) bool {
	return len(key) == len(ReplayedKey) && strings.EqualFold(key, ReplayedKey)
}

// markerGuard forwards a handler's header and trailer calls without the
// replay marker, for handlers that run without a claim.
type markerGuard struct {
	grpc.ServerTransportStream
}

func (s *markerGuard) SetHeader(md metadata.MD) error {
	return s.ServerTransportStream.SetHeader(withoutMarker(md))
}

func (s *markerGuard) SendHeader(md metadata.MD) error {
	return s.ServerTransportStream.SendHeader(withoutMarker(md))
}

func (s *markerGuard) SetTrailer(md metadata.MD) error {
	return s.ServerTransportStream.SetTrailer(withoutMarker(md))
}

// passThrough runs a handler without a claim (a method without
// deduplication, an optional method called without a key, a store failing
// open): as it is, except that its answer cannot carry the replay marker.
func passThrough(ctx context.Context, req any, handler grpc.UnaryHandler) (any, error) {
	if st := grpc.ServerTransportStreamFromContext(ctx); st != nil {
		ctx = grpc.NewContextWithServerTransportStream(ctx, &markerGuard{st})
	}
	return handler(ctx, req)
}
