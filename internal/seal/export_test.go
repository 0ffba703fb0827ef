package seal

// Len returns the number of keys c holds, for the tests of its bound.
func (c *Cache[O]) Len() int {
	n := 0
	c.derived.Range(func(any, any) bool { n++; return true })
	return n
}
