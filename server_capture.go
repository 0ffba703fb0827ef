package idempotency

import (
	"context"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

// captureStream forwards a claimed handler's header and trailer calls to the
// transport stream, without the replay marker, and records them so the
// outcome can replay them.
//
// It records what the transport accepted, and also what the transport
// refused only because the stream has ended: a detached handler runs on
// after its caller cancelled or its deadline passed, and the metadata it
// sets then (a charge id, a ledger entry) belongs to the outcome that
// retries replay. Such a call returns nil, as it would with the caller
// still there. What a live caller would not have got either is refused and
// not recorded: a header set or sent after the header went (with
// SendHeader, or with the stream's first message, sent or recorded after
// the caller left: [captureStream.messageSent]) gets grpc-go's error, and
// after a send grpc-go refused on a live stream, which sent the caller
// the stream's status ([captureStream.end]), nothing more is recorded.
type captureStream struct {
	grpc.ServerTransportStream
	// caller is the caller's context: grpc-go cancels it when the stream
	// ends (the caller cancelled, its deadline passed, the connection
	// closed).
	caller context.Context

	mu      sync.Mutex
	header  metadata.MD
	trailer metadata.MD
	// headerSent: the header has gone, or would have gone to a caller
	// still there (a SendHeader or a server stream's first message).
	headerSent bool
	// ended: the stream's status went to the caller at a refused send.
	ended bool
}

// errHeaderSent is grpc-go's error for a header set or sent after the
// header went (its transport.ErrIllegalHeaderWrite), which a handler gets
// on a live stream.
var errHeaderSent = status.Error(codes.Internal, "transport: SendHeader called multiple times")

// install puts s in front of ctx's transport stream, if any, and returns
// the context that carries it.
func (s *captureStream) install(ctx context.Context) context.Context {
	if s.ServerTransportStream = grpc.ServerTransportStreamFromContext(ctx); s.ServerTransportStream != nil {
		s.caller = ctx
		ctx = grpc.NewContextWithServerTransportStream(ctx, s)
	}
	return ctx
}

// messageSent marks the header sent, as a server stream's first message
// sends it: by then a live caller has it, and a later SetHeader is
// refused, also when the message was only recorded (the caller had left,
// or a resuming caller has it).
func (s *captureStream) messageSent() {
	s.mu.Lock()
	s.headerSent = true
	s.mu.Unlock()
}

// end marks the stream ended by a send grpc-go refused on a live stream: it
// sent the caller the refusal as the status, with the header and trailer
// set so far, and nothing set after reaches anyone.
func (s *captureStream) end() {
	s.mu.Lock()
	s.headerSent, s.ended = true, true
	s.mu.Unlock()
}

// sent reports whether the header has gone (or would have).
func (s *captureStream) sent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headerSent
}

// SetHeader refuses after the header was sent, as grpc-go does. grpc-go
// refuses on an ended stream too, with the same error; it marks a stream
// ended just before it cancels the caller's context, so the caller's
// context tells the two apart when the header went without this capture
// seeing it (an interceptor before this one sent it); a SetHeader in the
// instant between the two reads as refused.
func (s *captureStream) SetHeader(md metadata.MD) error {
	if md.Len() == 0 {
		return nil
	}
	if s.sent() {
		return errHeaderSent
	}
	md = withoutMarker(md)
	err := s.ServerTransportStream.SetHeader(md)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && (s.headerSent || s.caller.Err() == nil) {
		return err
	}
	s.header = metadata.Join(s.header, md)
	return nil
}

// SendHeader refuses a second header, as grpc-go does. A header refused
// because the stream has ended counts as sent, so a SetHeader after it is
// refused as it would be on a live stream.
func (s *captureStream) SendHeader(md metadata.MD) error {
	if s.sent() {
		return errHeaderSent
	}
	md = withoutMarker(md)
	err := s.ServerTransportStream.SendHeader(md)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && (s.headerSent || s.caller.Err() == nil) {
		return err
	}
	s.headerSent = true
	s.header = metadata.Join(s.header, md)
	return nil
}

// SetTrailer is recorded whatever the transport said (grpc-go refuses a
// trailer only once the stream has ended), unless the stream ended at a
// refused send: the caller has its status and trailer already.
func (s *captureStream) SetTrailer(md metadata.MD) error {
	md = withoutMarker(md)
	err := s.ServerTransportStream.SetTrailer(md)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return err
	}
	s.trailer = metadata.Join(s.trailer, md)
	return nil
}

// record puts the captured header and trailer in rec and returns their
// size.
func (s *captureStream) record(rec *recordv1.Record) int {
	rec.Header, rec.Trailer = s.recorded()
	return mdSize(rec.Header) + mdSize(rec.Trailer)
}

// recorded returns the captured header and trailer in record form.
func (s *captureStream) recorded() (header, trailer []*recordv1.Metadata) {
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

func toRecordMD(md metadata.MD) []*recordv1.Metadata {
	if len(md) == 0 {
		return nil
	}
	out := make([]*recordv1.Metadata, 0, len(md))
	for k, v := range md {
		if replayable(k) {
			vals := make([][]byte, len(v))
			for j, s := range v {
				vals[j] = []byte(s)
			}
			out = append(out, &recordv1.Metadata{Key: k, Values: vals})
		}
	}
	// Deterministic order, so equal outcomes encode to equal records.
	slices.SortFunc(out, func(a, b *recordv1.Metadata) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// replayedMD is the replay marker alone, shared read-only: grpc-go copies
// the metadata it is given.
var replayedMD = metadata.Pairs(ReplayedKey, "true")

// fromRecordMD converts stored metadata back, adding the replay marker when
// marked is true. It returns nil when there is nothing to send.
func fromRecordMD(md []*recordv1.Metadata, marked bool) metadata.MD {
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

// mdSize is the size of stored metadata: its keys and values.
func mdSize(md []*recordv1.Metadata) int {
	n := 0
	for _, e := range md {
		n += len(e.GetKey())
		for _, v := range e.GetValues() {
			n += len(v)
		}
	}
	return n
}

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
