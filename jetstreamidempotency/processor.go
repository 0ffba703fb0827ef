package jetstreamidempotency

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency"
)

// Handler does the work of one message. It runs at most once per message
// key to completion: a run that returns nil, or an error the idempotency
// server stores, is never repeated for that key. Its context carries the
// claim ([idempotency.ClaimFromContext]) and is cancelled when the claim's
// lease is lost. It must not acknowledge msg: the Processor does, once the
// outcome is stored.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// Processor runs a [Handler] once per message of JetStream consumers.
// Build it with [NewProcessor]; it is safe for concurrent use by any
// number of [Processor.Consume] and [Processor.Fetch] calls, on one or many
// connections.
type Processor struct {
	server  *idempotency.Server
	op      string
	handler Handler
	cfg     config
}

// NewProcessor returns a Processor that runs h once per message key under
// op, the operation name its keys are claimed under in server's store (see
// [idempotency.Do]). Give each kind of work its own op; the server's
// WithOperationPolicy sets op's retention, lease and handler timeout. It
// panics when server or h is nil, op is empty or starts with "/" as only a
// gRPC method's name does ([idempotency.ValidateOperation]), or an option
// is invalid.
func NewProcessor(server *idempotency.Server, op string, h Handler, opts ...Option) *Processor {
	switch {
	case server == nil:
		panic("jetstreamidempotency: NewProcessor: the idempotency server is nil")
	case op == "":
		panic("jetstreamidempotency: NewProcessor: the operation name is empty")
	case idempotency.ValidateOperation(op) != nil:
		panic("jetstreamidempotency: NewProcessor: " + idempotency.ValidateOperation(op).Error())
	case h == nil:
		panic("jetstreamidempotency: NewProcessor: the handler is nil")
	}
	cfg := config{key: MsgKey, results: func(Result) {}}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.retryDelay == 0 {
		cfg.retryDelay = server.RetryAfter()
	}
	return &Processor{server: server, op: op, handler: h, cfg: cfg}
}
