package gatewayidempotency

import (
	"context"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// HTTP header names, the ones [httpidempotency] uses.
const (
	// KeyHeader carries the client's idempotency key on a request.
	KeyHeader = httpidempotency.KeyHeader
	// ReplayedHeader is "true" on a response that the server replayed from
	// its store instead of running the handler.
	ReplayedHeader = httpidempotency.ReplayedHeader
)

// ServeMuxOptions returns the options that put the idempotency interceptor's
// contract on a grpc-gateway mux: the [KeyHeader] request header becomes the
// key in the gRPC metadata, replayed answers carry [ReplayedHeader], and the
// interceptor's errors become the IETF draft's statuses with an RFC 9457
// problem body (see the package documentation for the table).
//
// A request whose [KeyHeader] carries a key that [idempotency.ValidateKey]
// refuses is answered 400 with IDEMPOTENCY_KEY_INVALID by the gateway
// itself, on every route, before any gRPC call: gRPC metadata cannot carry
// every such key (grpc-go refuses bytes outside printable ASCII on the
// client side), and the server would refuse the others alike.
//
// The server's own replay marker ([idempotency.ReplayedKey]) is not
// forwarded as a Grpc-Metadata- header or Grpc-Trailer- trailer:
// [ReplayedHeader] alone says it. Every other header and trailer metadata
// is forwarded as the outgoing matchers say.
//
// They add a middleware, a metadata annotator and a forward-response
// option, which compose with others, and set the mux's error handler and
// outgoing header and trailer matchers, which replace any set before them:
// pass those to [WithErrorHandler], [WithOutgoingHeaderMatcher] and
// [WithOutgoingTrailerMatcher] instead.
//
// It panics when an option cannot work (a [WithMetadataKey] gRPC cannot
// carry the key under): a programming error, found at start-up.
func ServeMuxOptions(opts ...Option) []runtime.ServeMuxOption {
	c := newConfig(opts)
	if c.err != nil {
		panic(c.err)
	}
	return []runtime.ServeMuxOption{
		runtime.WithMiddlewares(checkKeys),
		runtime.WithMetadata(c.annotate),
		runtime.WithForwardResponseOption(markReplayed),
		runtime.WithErrorHandler(c.handleError),
		runtime.WithOutgoingHeaderMatcher(dropReplayed(c.nextHeader)),
		runtime.WithOutgoingTrailerMatcher(dropReplayed(c.nextTrailer)),
	}
}

// checkKeys answers a request whose Idempotency-Key header lines carry a
// key that [idempotency.ValidateKey] refuses with a 400 problem, so that
// no such key reaches gRPC metadata. The answer to a request with one
// valid key line echoes that line, as httpidempotency's answers do.
func checkKeys(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, pathParams map[string]string) {
		lines := r.Header.Values(KeyHeader)
		for _, line := range lines {
			if err := idempotency.ValidateKey(httpidempotency.ParseKey(line)); err != nil {
				httpidempotency.WriteProblem(w, err)
				return
			}
		}
		if len(lines) == 1 {
			w.Header()[KeyHeader] = []string{lines[0]}
		}
		next(w, r, pathParams)
	}
}

// annotate passes each Idempotency-Key header line on as a metadata value.
func (c *config) annotate(_ context.Context, r *http.Request) metadata.MD {
	lines := r.Header.Values(KeyHeader)
	if len(lines) == 0 {
		return nil
	}
	keys := make([]string, len(lines))
	for i, line := range lines {
		keys[i] = httpidempotency.ParseKey(line)
	}
	return metadata.MD{c.metadataKey: keys}
}

// markReplayed sets the replay header on a successful response that came
// from the store.
func markReplayed(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
	if replayed(ctx) {
		w.Header().Set(ReplayedHeader, "true")
	}
	return nil
}

// dropReplayed returns an outgoing matcher that forwards no
// [idempotency.ReplayedKey] metadata, which [ReplayedHeader] carries, and
// leaves every other key to next.
func dropReplayed(next runtime.HeaderMatcherFunc) runtime.HeaderMatcherFunc {
	return func(key string) (string, bool) {
		if key == idempotency.ReplayedKey {
			return "", false
		}
		return next(key)
	}
}

// replayed reports whether the server marked its answer as replayed: in the
// header on success, in the trailer on an error.
func replayed(ctx context.Context) bool {
	md, ok := runtime.ServerMetadataFromContext(ctx)
	if !ok {
		return false
	}
	return idempotency.Replayed(md.HeaderMD, md.TrailerMD)
}
