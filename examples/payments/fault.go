package main

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lossyNetwork is a server interceptor that plays a flaky network: once
// armed with [lossyNetwork.loseNext], it lets the next calls run and then
// throws their responses away, answering UNAVAILABLE as a dropped
// connection would. It sits outside the idempotency interceptor, so the
// charge has happened and its outcome is stored when the response is lost:
// exactly the case a retry without a key turns into a double charge.
type lossyNetwork struct {
	toLose atomic.Int64
	lost   atomic.Int64
}

// loseNext makes the next n responses get lost.
func (n *lossyNetwork) loseNext(count int64) { n.toLose.Store(count) }

// lostSoFar returns how many responses were lost.
func (n *lossyNetwork) lostSoFar() int64 { return n.lost.Load() }

// intercept is the grpc.UnaryServerInterceptor.
func (n *lossyNetwork) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if n.toLose.Load() > 0 && n.toLose.Add(-1) >= 0 {
		n.lost.Add(1)
		return nil, status.Error(codes.Unavailable, "lossy network: the response was lost on its way back")
	}
	return resp, err
}
