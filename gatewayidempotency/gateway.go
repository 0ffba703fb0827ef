package gatewayidempotency

import (
	"context"
	"net/http"
	"slices"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
)

// HTTP header names.
const (
	// KeyHeader carries the client's idempotency key on a request.
	KeyHeader = "Idempotency-Key"
	// ReplayedHeader is "true" on a response that the server replayed from
	// its store instead of running the handler.
	ReplayedHeader = "Idempotent-Replayed"
)

// ServeMuxOptions returns the options that put the idempotency interceptor's
// contract on a grpc-gateway mux: the [KeyHeader] request header becomes the
// key in the gRPC metadata, replayed answers carry [ReplayedHeader], and the
// interceptor's errors become the IETF draft's statuses with an RFC 9457
// problem body (see the package documentation for the table).
//
// They add a metadata annotator and a forward-response option, which
// compose with others, and set the mux's error handler, which replaces any
// set before them: pass that one to [WithErrorHandler] instead.
//
// It panics when an option cannot work (a [WithMetadataKey] gRPC cannot
// carry the key under): a programming error, found at start-up.
func ServeMuxOptions(opts ...Option) []runtime.ServeMuxOption {
	c := newConfig(opts)
	if c.err != nil {
		panic(c.err)
	}
	return []runtime.ServeMuxOption{
		runtime.WithMetadata(c.annotate),
		runtime.WithForwardResponseOption(markReplayed),
		runtime.WithErrorHandler(c.handleError),
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
		keys[i] = keyOf(line)
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

// replayed reports whether the server marked its answer as replayed: in the
// header on success, in the trailer on an error.
func replayed(ctx context.Context) bool {
	md, ok := runtime.ServerMetadataFromContext(ctx)
	if !ok {
		return false
	}
	return slices.Contains(md.HeaderMD.Get(idempotency.ReplayedKey), "true") ||
		slices.Contains(md.TrailerMD.Get(idempotency.ReplayedKey), "true")
}
