package idempotency

import "sync"

// maxPooledBuffer is the largest buffer kept for reuse; larger ones are left
// to the garbage collector so one huge response does not pin memory.
const maxPooledBuffer = 64 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// getBuffer returns an empty scratch buffer. Return it with putBuffer once
// nothing refers to its contents.
func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) > maxPooledBuffer {
		return
	}
	*b = (*b)[:0]
	buffers.Put(b)
}
