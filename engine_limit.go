package idempotency

import (
	"fmt"

	"github.com/grpc-idempotency/idempotency/store"
)

// recordMargin is what a stored record may hold beside the outcome that
// [WithMaxResponseBytes] bounds: the record's own fields (fingerprint,
// times, framing of each header and trailer), the seal of [WithSealing],
// with room to spare.
const recordMargin = 64 << 10

// checkRecordLimit returns an error when s bounds the size of a record
// ([store.RecordLimiter]) below the largest record cfg lets the server
// store: an outcome that fits WithMaxResponseBytes but not the store would
// fail every Complete, and its key would run again once the claim's lease
// ended. A store that does not know its bound yet is not checked.
func checkRecordLimit(s store.Store, cfg *config) error {
	l, ok := s.(store.RecordLimiter)
	if !ok {
		return nil
	}
	limit := l.MaxRecordBytes()
	if need := cfg.maxResponseBytes + recordMargin; limit > 0 && need > limit {
		return fmt.Errorf("idempotency: WithMaxResponseBytes(%d) lets a stored record reach %d bytes (the outcome and up to %d of the record's own), but the store takes records of at most %d bytes; lower WithMaxResponseBytes to at most %d, or raise the store's bound (for MySQL, the server's max_allowed_packet)",
			cfg.maxResponseBytes, need, recordMargin, limit, limit-recordMargin)
	}
	return nil
}
