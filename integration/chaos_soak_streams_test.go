package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
)

// Stream soak shape: streamSoakCalls logical calls from streamSoakCallers
// goroutines, one in six an Upload, the others a Download.
const (
	streamSoakCalls   = 1200
	streamSoakCallers = 32
	streamSoakUploads = 6 // every sixth call
)

// TestChaosSoakStreams runs 1,000 server-streaming calls (Download, 10 to
// 20 messages each) and 200 client-streaming calls (Upload, 3 to 6
// messages), each with its own key, from 32 goroutines through the stream
// client interceptor (retrying and resuming) to two server instances over
// loopback TCP, each attempt to a random instance. Two sets of fault
// proxies cut connections at random all along: those between each
// instance's redisstore and the one redis-server (as in TestChaosSoak), and
// those between the client and each instance, which cut streams mid-way.
//
// It proves: no key's handler completes twice; every Download the caller
// reads gets messages 0 to n-1 of one execution, each once and in order
// (none missing, none repeated), with that execution's header; a Download
// given up mid-stream got a correct prefix; every Upload's answer is the
// sum and join of its own messages; the rest ended with a retryable error
// the client gave up on, counted; once the faults stop, retrying each
// given-up call with its key gets its whole answer from one execution (the
// one whose prefix it had), and every key ran exactly once.
func TestChaosSoakStreams(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), soakDeadline)
	defer cancel()
	insts := newSoakInstances(t, ctx)

	var execs executions
	svc := &streamtest.Streams{Finished: func(ctx context.Context, err error) {
		if err == nil {
			execs.add(strings.Join(metadata.ValueFromIncomingContext(ctx, idempotency.MetadataKey), ","))
		}
	}}
	var conns [2]*grpc.ClientConn
	var links []*faultproxy.Proxy
	// A connection cut while it is being set up is a failed dial, which
	// grpc-go retries with backoff from 1 s up to 2 min: redial sooner.
	redial := grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
		MinConnectTimeout: time.Second,
	})
	for i, in := range insts {
		cc, link := streamtest.Proxied(t, svc, idempotency.NewServer(in.store, in.options()...), redial)
		conns[i], links = cc, append(links, link)
	}
	// spread starts each attempt on a random instance, so a retry often
	// resumes on the instance that did not run the first attempt; it
	// counts the attempts that resume after messages the caller has.
	var resumed atomic.Int64
	spread := func(ctx context.Context, desc *grpc.StreamDesc, _ *grpc.ClientConn, method string, _ grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if n := metadata.ValueFromOutgoingContext(ctx, idempotency.ResumeAfterKey); len(n) == 1 && n[0] != "0" {
			resumed.Add(1)
		}
		return conns[rand.IntN(len(conns))].NewStream(ctx, desc, method, opts...)
	}
	var retries atomic.Int64
	dial := func(opts ...idempotency.ClientOption) testingv1.StreamServiceClient {
		opts = append(opts, idempotency.WithOnRetry(func(context.Context, int, error) { retries.Add(1) }))
		// The connection is never used: spread picks an instance's.
		cc, err := grpc.NewClient("passthrough:///"+links[0].Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithChainStreamInterceptor(idempotency.StreamClientInterceptor(opts...), spread))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		return testingv1.NewStreamServiceClient(cc)
	}
	client := dial(idempotency.WithMaxAttempts(10),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return time.Duration(rand.IntN(20)) * time.Millisecond }))

	// prefixes[i] is the execution whose messages Download i received
	// before it gave up, 0 if none; written by the call's one goroutine.
	prefixes := make([]int64, streamSoakCalls)
	call := func(c testingv1.StreamServiceClient, i int) (*soakProblem, error) {
		if streamSoakUpload(i) {
			return soakUpload(ctx, c, i)
		}
		exec, p, err := soakDownload(ctx, c, i, prefixes[i])
		prefixes[i] = exec
		return p, err
	}

	storeFaults := startChaos(8*time.Millisecond, cutNewLinks, storeProxies(insts)...)
	linkFaults := startChaos(40*time.Millisecond, liveLinksOnly, links...)
	tally := runSoak(streamSoakCalls, streamSoakCallers, soakBudget, func(i int) (*soakProblem, error) { return call(client, i) })
	linkFaults.Stop()
	storeFaults.Stop()

	lost := leaseLostKeys(insts)
	tally.excuse(t, lost, streamSoakKey)
	tally.report(t, insts, streamSoakKey)
	doubles, rerun := execs.doubles(t, insts, lost)
	t.Logf("stream soak: %d calls (%d downloads, %d uploads) from %d goroutines in %v: %d answers, %d give-ups %v, %d retries (%d resuming mid-stream); %d double executions, %d keys run again after a lost claim, %d missing or repeated, %d wrong",
		tally.calls, tally.calls-uploads(tally.calls), uploads(tally.calls), streamSoakCallers,
		tally.elapsed.Round(time.Millisecond), tally.answers, len(tally.gaveUp), tally.giveUps(), retries.Load(), resumed.Load(),
		doubles, rerun, tally.count(problemMissing), tally.count(problemWrong))
	t.Logf("store faults: %v", storeFaults)
	t.Logf("client link faults: %v", linkFaults)
	t.Logf("instance A outcomes: %v", &insts[0].observed)
	t.Logf("instance B outcomes: %v", &insts[1].observed)
	if doubles > 0 || len(tally.problems) > 0 {
		t.FailNow()
	}
	if tally.answers == 0 || storeFaults.cuts() == 0 || linkFaults.cuts() == 0 || resumed.Load() == 0 {
		t.Fatal("the soak proved nothing: no answers, no cuts or no resumed streams")
	}

	// The faults are over: each given-up call, retried with its key, gets
	// its whole answer from its one execution; a key whose claim was lost
	// may get it from a later execution than the one it had a prefix of
	// (decision 9).
	for i := range prefixes[:tally.calls] {
		if lost[streamSoakKey(i)] {
			prefixes[i] = 0
		}
	}
	patient := dial(idempotency.WithMaxAttempts(200),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 10 * time.Millisecond }))
	if err := tally.heal(streamSoakCallers, func(i int) error {
		if p, err := call(patient, i); p != nil || err != nil {
			return fmt.Errorf("%v, %v; want its whole answer", p, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if executed := execs.once(t, insts, leaseLostKeys(insts)); executed != tally.calls {
		t.Fatalf("%d keys executed exactly once (or again after a lost claim), want all %d", executed, tally.calls)
	}
}

// streamSoakUpload reports whether call i is an Upload (every sixth),
// else a Download.
func streamSoakUpload(i int) bool { return i%streamSoakUploads == streamSoakUploads-1 }

// uploads is the number of Uploads among calls 0 to n-1.
func uploads(n int) int { return n / streamSoakUploads }

// streamSoakKey is the key of call i: up-i for an Upload, down-i for a
// Download.
func streamSoakKey(i int) string {
	if streamSoakUpload(i) {
		return fmt.Sprintf("up-%04d", i)
	}
	return fmt.Sprintf("down-%04d", i)
}

// soakDownload reads Download i (key down-i, 10 to 20 messages) to its end
// and checks what it received: messages 0 onwards, each once and in
// order, all of one execution (want's, when not 0), with that execution's
// header; all n of them unless it failed. It returns the execution of the
// messages received (0 if none), a problem, or the call's error.
func soakDownload(ctx context.Context, c testingv1.StreamServiceClient, i int, want int64) (int64, *soakProblem, error) {
	key, n := streamSoakKey(i), int64(10+i%11)
	stream, err := c.Download(ctx, &testingv1.DoRequest{Payload: key, Amount: n, RequestId: key}, grpc.WaitForReady(true))
	if err != nil {
		return 0, nil, err
	}
	var msgs []*testingv1.DoResponse
	for {
		m, rerr := stream.Recv()
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		if err == nil {
			return 0, &soakProblem{kind: problemMissing, detail: key + ": no messages and no error"}, nil
		}
		return 0, nil, err
	}
	exec := msgs[0].GetExecution()
	for j, m := range msgs {
		if m.GetAmount() != int64(j) || int64(j) >= n {
			return exec, &soakProblem{kind: problemMissing, detail: fmt.Sprintf("%s: message %d of %d is number %d", key, j, n, m.GetAmount())}, nil
		}
		if m.GetExecution() != exec || m.GetPayload() != fmt.Sprintf("%s e%d m%d", key, exec, j) {
			return exec, &soakProblem{kind: problemWrong, detail: fmt.Sprintf("%s: message %d is %v, not execution %d's", key, j, m, exec), acrossRuns: true}, nil
		}
	}
	if want != 0 && exec != want {
		return exec, &soakProblem{kind: problemWrong, detail: fmt.Sprintf("%s: messages of execution %d, want %d's, whose prefix it had", key, exec, want), acrossRuns: true}, nil
	}
	if h, herr := stream.Header(); herr == nil && !slices.Equal(h.Get("x-execution"), []string{strconv.FormatInt(exec, 10)}) {
		return exec, &soakProblem{kind: problemWrong, detail: fmt.Sprintf("%s: header %v, want execution %d's", key, h, exec)}, nil
	}
	if err == nil && int64(len(msgs)) != n {
		return exec, &soakProblem{kind: problemMissing, detail: fmt.Sprintf("%s: %d messages, want %d", key, len(msgs), n)}, nil
	}
	return exec, nil, err
}

// soakUpload sends Upload i (key up-i) 3 to 6 messages and checks that the
// answer is the sum and join of its own.
func soakUpload(ctx context.Context, c testingv1.StreamServiceClient, i int) (*soakProblem, error) {
	key, k := streamSoakKey(i), 3+i%4
	stream, err := c.Upload(ctx, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	var sum int64
	payloads := make([]string, k)
	for j := range k {
		payloads[j] = fmt.Sprintf("%s/%d", key, j)
		sum += int64(j + 1)
	}
	for j, p := range payloads {
		if err := stream.Send(&testingv1.DoRequest{Payload: p, Amount: int64(j + 1), RequestId: key}); err != nil {
			break // CloseAndRecv says why
		}
	}
	resp, err := stream.CloseAndRecv()
	if err == nil && (resp.GetAmount() != sum || resp.GetPayload() != strings.Join(payloads, "+")) {
		return &soakProblem{kind: problemWrong, detail: fmt.Sprintf("%s: answer %v is not its own", key, resp)}, nil
	}
	return nil, err
}
