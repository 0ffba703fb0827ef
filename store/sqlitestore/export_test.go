package sqlitestore

// Ungated turns the store's in-process write gate off, for tests and
// benchmarks that compare the two.
func Ungated() Option { return func(c *config) { c.ungated = true } }
