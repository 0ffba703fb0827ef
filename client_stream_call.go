package idempotency

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The call a [retryStream] is, across its attempts, as its caller sees it:
// its header, its context, and its end.

// headerDsts returns the destinations of the call's [grpc.Header] options.
// grpc-go sets each to the header of every attempt as it ends, so the
// last attempt's; [retryStream.finish] sets them again to the call's.
func headerDsts(opts []grpc.CallOption) []*metadata.MD {
	var dsts []*metadata.MD
	for _, o := range opts {
		if h, ok := o.(grpc.HeaderCallOption); ok && h.HeaderAddr != nil {
			dsts = append(dsts, h.HeaderAddr)
		}
	}
	return dsts
}

// callHeader is the header of the call, as Header returns it: the first
// that an attempt received. mu is held, and the attempt has received a
// message or ended, so its Header does not block.
func (s *retryStream) callHeader() metadata.MD {
	if s.headerSet || s.cur == nil {
		return s.header
	}
	h, _ := s.cur.Header()
	return h
}

// finish ends the call, once: the context Context returns is done, and
// the [grpc.Header] destinations get the call's header rather than the
// last attempt's that grpc-go left there. mu is held.
func (s *retryStream) finish() {
	if s.ended {
		return
	}
	s.ended = true
	if s.cancel != nil {
		s.cancel()
	}
	if s.cur != nil && len(s.headerDsts) > 0 {
		h := s.callHeader()
		for _, dst := range s.headerDsts {
			*dst = h
		}
	}
}

// Context returns the context of the call, which lives as long as the
// call, across its attempts: it is done when the call has ended (its last
// receive returned an error or io.EOF, a client stream's response came,
// or the call failed before an attempt) or the caller's context is. Its
// values are the call's, then the current attempt's (its peer).
func (s *retryStream) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.callCtx == nil {
		ctx, cancel := context.WithCancel(s.ctx)
		s.callCtx, s.cancel = &callContext{Context: ctx, s: s}, cancel
		if s.ended {
			cancel()
		}
	}
	return s.callCtx
}

// callContext is the context of a [retryStream]: done when the call ends,
// with the values of the call's context, else of the current attempt's.
type callContext struct {
	context.Context
	s *retryStream
}

// Value returns the call context's value for key, else the current
// attempt's.
func (c *callContext) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	c.s.mu.Lock()
	cur := c.s.cur
	c.s.mu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.Context().Value(key)
}
