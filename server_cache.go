package idempotency

// ReplayCacheStats is what a server's replay cache ([WithReplayCache])
// holds at one moment, against its bounds, and how many entries it has
// evicted: [Server.ReplayCacheStats].
type ReplayCacheStats struct {
	// Entries is the number of entries the cache holds, those past their
	// expiry that no call has dropped yet included (a call that finds one
	// drops it, and a new entry takes its place before any live one).
	Entries int
	// Bytes is what those entries count against MaxBytes: each its store
	// key, fingerprint and record plus 192 bytes.
	Bytes int64
	// MaxEntries and MaxBytes are the cache's bounds, the maxEntries and
	// maxBytes of WithReplayCache.
	MaxEntries int
	MaxBytes   int64
	// Evictions counts the entries the cache dropped, least recently used
	// first, to make room for newer ones under its bounds, since the
	// server was built. An entry that expired, was purged
	// ([store.Invalidator], [Server.Purge]), was replaced by a newer record
	// of its key, or was dropped by [Server.Close] is not counted, nor is
	// one dropped past its expiry to make room. A steady rate while
	// Entries or Bytes stay at their bound says the cache is too small for
	// the keys replayed: their replays fall through to the store.
	Evictions uint64
}

// ReplayCacheStats returns the figures of s's replay cache
// ([WithReplayCache]) now, read under the cache's lock, so that Entries
// and Bytes are of the same moment; false for a server without a cache.
// After [Server.Close] the cache is empty for good, and its Evictions stay
// what they were. otelidempotency.RegisterReplayCacheMetrics reports them
// as metrics; the operations guide says how to watch them.
func (s *Server) ReplayCacheStats() (ReplayCacheStats, bool) {
	if s.e.cache == nil {
		return ReplayCacheStats{}, false
	}
	return s.e.cache.stats(), true
}
