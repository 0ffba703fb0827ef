package testserver_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStreamEndsOnlyOnEOFOrCancel: Service.Stream ends the echo with an OK
// status when the client closes its side or cancels the stream, and returns
// any other receive error (here a message over the server's limit) rather
// than hiding it behind an OK status.
func TestStreamEndsOnlyOnEOFOrCancel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// end sends on stream and ends it the case's way; it returns the
		// client's last Recv error.
		end      func(stream grpc.BidiStreamingClient[testingv1.DoRequest, testingv1.DoResponse], cancel context.CancelFunc) error
		wantCode codes.Code // the handler's return, as a status code
		wantRecv codes.Code // the client's last Recv error, when not io.EOF
		wantEOF  bool
	}{
		{
			name: "client closes its side",
			end: func(stream grpc.BidiStreamingClient[testingv1.DoRequest, testingv1.DoResponse], _ context.CancelFunc) error {
				if err := stream.CloseSend(); err != nil {
					return err
				}
				_, err := stream.Recv()
				return err
			},
			wantCode: codes.OK,
			wantEOF:  true,
		},
		{
			name: "client cancels",
			end: func(stream grpc.BidiStreamingClient[testingv1.DoRequest, testingv1.DoResponse], cancel context.CancelFunc) error {
				cancel()
				_, err := stream.Recv()
				return err
			},
			wantCode: codes.OK,
			wantRecv: codes.Canceled,
		},
		{
			name: "message over the server's limit",
			end: func(stream grpc.BidiStreamingClient[testingv1.DoRequest, testingv1.DoResponse], _ context.CancelFunc) error {
				if err := stream.Send(&testingv1.DoRequest{Payload: strings.Repeat("x", 1024)}); err != nil {
					return err
				}
				_, err := stream.Recv()
				return err
			},
			wantCode: codes.ResourceExhausted,
			wantRecv: codes.ResourceExhausted,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			returned := make(chan error, 1)
			record := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
				err := handler(srv, ss)
				returned <- err
				return err
			}
			s := testserver.New(t, &testserver.Service{}, grpc.StreamInterceptor(record), grpc.MaxRecvMsgSize(256))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stream, err := s.Client(t).Stream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&testingv1.DoRequest{Payload: "s"}); err != nil {
				t.Fatal(err)
			}
			if resp, err := stream.Recv(); err != nil || resp.GetPayload() != "s" {
				t.Fatalf("echo: %v, %v", resp, err)
			}
			err = tc.end(stream, cancel)
			if tc.wantEOF {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("client's last Recv: %v, want io.EOF", err)
				}
			} else if status.Code(err) != tc.wantRecv {
				t.Fatalf("client's last Recv: %v, want %v", err, tc.wantRecv)
			}
			select {
			case got := <-returned:
				if status.Code(got) != tc.wantCode {
					t.Fatalf("handler returned %v, want %v", got, tc.wantCode)
				}
			case <-time.After(wait.Timeout):
				t.Fatalf("handler still running after %v", wait.Timeout)
			}
		})
	}
}
