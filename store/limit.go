package store

// RecordLimiter is implemented by a Store whose backend bounds the size of
// the data [Store.Complete] can store, so that a server can refuse, at
// start-up, a configuration that lets an outcome be larger: such an
// outcome would fail every Complete, and its key would run again once the
// claim's lease ends. The MySQL store is one: an outcome travels in one
// packet, bounded by the server's max_allowed_packet.
type RecordLimiter interface {
	// MaxRecordBytes returns the largest data, in bytes, that Complete
	// stores, or 0 when the store does not know it yet (the MySQL store
	// learns it in Migrate). It makes no call to the backend.
	MaxRecordBytes() int
}
