package watermillidempotency

import (
	"slices"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"

	watermillv1 "github.com/grpc-idempotency/idempotency/watermillidempotency/internal/gen/idempotency/watermill/v1"
)

// encode returns the stored outcome of the handler's messages: each one's
// UUID, metadata (in the order of their keys) and payload.
func encode(msgs []*message.Message) *watermillv1.Produced {
	out := &watermillv1.Produced{Messages: make([]*watermillv1.Message, 0, len(msgs))}
	for _, m := range msgs {
		if m == nil {
			continue // the router would not publish it either
		}
		pm := &watermillv1.Message{Uuid: []byte(m.UUID), Payload: m.Payload}
		keys := make([]string, 0, len(m.Metadata))
		for k := range m.Metadata {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, strings.Compare)
		for _, k := range keys {
			pm.Metadata = append(pm.Metadata, &watermillv1.Metadata{Key: []byte(k), Value: []byte(m.Metadata[k])})
		}
		out.Messages = append(out.Messages, pm)
	}
	return out
}

// decode returns the messages of a stored outcome, as the handler returned
// them: same UUIDs, metadata and payloads.
func decode(p *watermillv1.Produced) []*message.Message {
	if len(p.GetMessages()) == 0 {
		return nil
	}
	msgs := make([]*message.Message, 0, len(p.GetMessages()))
	for _, pm := range p.GetMessages() {
		m := message.NewMessage(string(pm.GetUuid()), pm.GetPayload())
		for _, md := range pm.GetMetadata() {
			m.Metadata.Set(string(md.GetKey()), string(md.GetValue()))
		}
		msgs = append(msgs, m)
	}
	return msgs
}
