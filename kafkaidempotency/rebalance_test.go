package kafkaidempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

// TestRebalanceMidHandler: member A owns both partitions and is running a
// record of each when member B joins the group. The rebalance moves a
// partition to B; A's revoke waits for that partition's record to be
// stored (the handlers are released only once the revoke has begun) and
// commits it before B is given the partition, so B starts after it: B
// never sees either record A ran, runs the record produced after the
// rebalance on its partition, and every record runs once.
func TestRebalanceMidHandler(t *testing.T) {
	t.Parallel()
	k := startCluster(t, 2)
	mem, book := testkit.NewMemoryStore(t), &testkit.Ledger{}
	var startedA sync.WaitGroup
	startedA.Add(2)
	release := make(chan struct{})
	releaseAll := sync.OnceFunc(func() { close(release) })
	handler := func(_ context.Context, rec *kgo.Record) error {
		if strings.HasSuffix(string(rec.Value), "-a") {
			startedA.Done()
			<-release // the handler runs through the rebalance
		}
		book.Write(string(rec.Value))
		return nil
	}
	resA, resB := newResults(), newResults()
	// Two processes: a server each, one store.
	pA := kafkaidempotency.NewProcessor(idempotency.NewServer(mem, idempotency.WithLease(testkit.ConsumerLease)), "orders.ship", handler, kafkaidempotency.WithResults(resA.Add))
	pB := kafkaidempotency.NewProcessor(idempotency.NewServer(mem, idempotency.WithLease(testkit.ConsumerLease)), "orders.ship", handler, kafkaidempotency.WithResults(resB.Add))

	k.produce(0, "p0-a")
	k.produce(1, "p1-a")
	k.run(pA, group)
	startedA.Wait()
	k.run(pB, group)
	t.Cleanup(releaseAll) // runs before the members are stopped: a failed test must not hang
	ctx, cancel := context.WithTimeout(t.Context(), testkit.ConsumerWait)
	defer cancel()
	// The cooperative rebalance's first round: A keeps one partition and is
	// revoking the other, B has none yet. A's revoke waits for the
	// partition's record, so the group stays so until the handlers end.
	if _, err := k.c.WaitGroupInfo(ctx, group, func(g *kfake.GroupInfo) bool {
		return g != nil && g.State == "Stable" && len(g.Members) == 2 && g.NumAssigned() == 1
	}); err != nil {
		t.Fatalf("no rebalance revoking a partition of A: %v", err)
	}
	releaseAll() // A's handlers end while the revoke waits for them
	info, err := k.c.WaitGroupInfo(ctx, group, func(g *kfake.GroupInfo) bool {
		return g != nil && g.State == "Stable" && len(g.Members) == 2 && g.Members[0].NumAssigned() == 1 && g.Members[1].NumAssigned() == 1
	})
	if err != nil {
		t.Fatalf("the group did not settle with a partition each: %+v, %v", info, err)
	}
	k.produce(0, "p0-b")
	k.produce(1, "p1-b")
	k.waitCommitted(group, 0, 2)
	k.waitCommitted(group, 1, 2)

	for _, id := range []string{"p0-a", "p1-a", "p0-b", "p1-b"} {
		if n := book.Count(id); n != 1 {
			t.Errorf("%s ran %d times, want 1", id, n)
		}
	}
	ranB := 0
	for _, r := range resB.Drain() {
		if strings.HasSuffix(value(r), "-a") {
			t.Errorf("B got %s (%+v): the revoke did not commit it before B started", value(r), r)
		}
		if r.Ran {
			ranB++
		}
	}
	if ranB != 1 {
		t.Errorf("B ran %d records, want 1: the one produced on its partition after the rebalance", ranB)
	}
}

// TestDeadMemberLeaseTakeover: member A dies mid-handler. Its network is
// cut, so it neither heartbeats nor commits, and its link to the store is
// cut (faultstore), so nothing renews its claim; its handler never
// finishes. The group removes A when its session ends and gives the
// partition to B, which starts at the last commit: the record A was
// running meets A's claim (ErrKeyInUse, retried in place) until A's lease
// ends, then B runs it once and commits it.
func TestDeadMemberLeaseTakeover(t *testing.T) {
	t.Parallel()
	const leaseA = 3 * time.Second // outlives A's session: B meets A's claim
	k := startCluster(t, 1)
	mem, book := testkit.NewMemoryStore(t), &testkit.Ledger{}
	dying := faultstore.New(mem)
	srvA := idempotency.NewServer(dying, idempotency.WithLease(leaseA), idempotency.WithStoreTimeout(100*time.Millisecond))
	srvB := idempotency.NewServer(mem, idempotency.WithLease(leaseA))

	started, killed := make(chan struct{}), make(chan struct{})
	pA := kafkaidempotency.NewProcessor(srvA, "orders.ship", func(context.Context, *kgo.Record) error {
		close(started)
		<-killed // the process is dead: this run never reaches its side effect
		return errors.New("killed")
	})
	net := &network{}
	k.produce(0, "order-1")
	k.run(pA, group, kgo.Dialer(net.dial), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	t.Cleanup(func() { close(killed) }) // runs before A's Run is awaited
	<-started
	dying.Down.Store(true) // A's store link is cut: its lease runs out
	net.cut()              // and so is its network: its session ends

	res := newResults()
	pB := kafkaidempotency.NewProcessor(srvB, "orders.ship", func(_ context.Context, rec *kgo.Record) error {
		book.Write(string(rec.Value))
		return nil
	}, kafkaidempotency.WithResults(res.Add), kafkaidempotency.WithRetryDelay(100*time.Millisecond))
	k.run(pB, group)

	ran, before := res.Wait(t, "of B's run", func(r kafkaidempotency.Result) bool { return r.Ran })
	if ran.Err != nil || ran.Action != kafkaidempotency.Commit {
		t.Fatalf("B's run: %+v; want committed", ran)
	}
	if len(before) == 0 {
		t.Fatal("B ran the record at its first attempt; want ErrKeyInUse while A's lease lived")
	}
	for _, r := range before {
		if !errors.Is(r.Err, idempotency.ErrKeyInUse) || r.Ran || r.Settlement != idempotency.SettleRetryLater || r.Action != kafkaidempotency.Retry {
			t.Fatalf("B before A's lease ended: %+v; want ErrKeyInUse, retried in place", r)
		}
	}
	k.waitCommitted(group, 0, 1)
	if n := book.Count("order-1"); n != 1 {
		t.Fatalf("ledger: order-1 written %d times, want 1", n)
	}
}

// TestSlowHandlerKeepsItsRecord: a handler that runs two and a half times
// the group's session timeout keeps its record: kgo heartbeats on its own,
// so the group does not rebalance (its generation stays), the other member
// never gets the record, and it runs once.
func TestSlowHandlerKeepsItsRecord(t *testing.T) {
	t.Parallel()
	const session = time.Second // clientOpts' kgo.SessionTimeout
	k := startCluster(t, 1)
	mem, book, res := testkit.NewMemoryStore(t), &testkit.Ledger{}, newResults()
	started := make(chan struct{}, 1)
	handler := func(_ context.Context, rec *kgo.Record) error {
		started <- struct{}{}
		time.Sleep(session * 5 / 2) // the slow work itself
		book.Write(string(rec.Value))
		return nil
	}
	for range 2 { // two members, one partition: the other would get the record if this one were removed
		k.run(kafkaidempotency.NewProcessor(idempotency.NewServer(mem, idempotency.WithLease(testkit.ConsumerLease)), "orders.ship", handler, kafkaidempotency.WithResults(res.Add)), group)
	}
	ctx, cancel := context.WithTimeout(t.Context(), testkit.ConsumerWait)
	defer cancel()
	before, err := k.c.WaitGroupStable(ctx, group, 2)
	if err != nil {
		t.Fatal(err)
	}
	k.produce(0, "order-1")
	<-started
	k.waitCommitted(group, 0, 1)
	after := k.c.GroupInfo(group)
	if after == nil || after.Epoch != before.Epoch {
		t.Fatalf("group generation %d before the slow run, %+v after; want no rebalance", before.Epoch, after)
	}
	if got := res.Drain(); len(got) != 1 || !got[0].Ran || got[0].Action != kafkaidempotency.Commit {
		t.Fatalf("results %+v; want one attempt, run and committed", got)
	}
	if n := book.Count("order-1"); n != 1 {
		t.Fatalf("order-1 written %d times, want 1", n)
	}
}
