package admintest

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/grpc-idempotency/idempotency"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// purgeKey names the test service's Do with key, in a PurgeKeyRequest.
func purgeKey(key string) *adminv1.PurgeKeyRequest_ClientKey {
	return &adminv1.PurgeKeyRequest_ClientKey{ClientKey: &adminv1.ClientKey{Name: testingv1.TestService_Do_FullMethodName, Key: key}}
}

// A completed key purged with its etag is gone from the store and from
// the server's replay cache at once: the next call runs the handler again.
// The purge answers the entry as it was, is one purged event naming the
// store key, and one log line naming the operator, the store key and its
// state, and never the client's key.
func purgeCompleted(t *testing.T, st store.Store) {
	// The replay cache subscribes to the store's purges in the background
	// and starts empty once subscribed: wait for that, so that the cache the
	// calls fill is the one the purge must reach.
	st, watch := watchPurges(st)
	r := newRig(t, st, idempotency.WithReplayCache(100, 1<<20, time.Hour))
	if watch != nil {
		watch.WaitSubscribed(t, 1)
	}
	const key = "customer-secret-key-1"
	r.call(t, key, "p")
	if resp := r.call(t, key, "p"); resp.GetExecution() != 1 || !r.Events.All()[1].Cached {
		t.Fatalf("second call = %v, %+v; want execution 1 from the replay cache", resp, r.Events.All()[1])
	}
	e := r.get(t, key)
	resp, err := r.admin.PurgeKey(as(t.Context(), Alice), &adminv1.PurgeKeyRequest{Key: purgeKey(key), Etag: e.GetEtag()})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(resp.GetEntry(), e) {
		t.Fatalf("PurgeKey answered %v, want the entry looked up, %v", resp.GetEntry(), e)
	}
	if got := r.call(t, key, "p"); got.GetExecution() != 2 {
		t.Fatalf("call after the purge = %v, want execution 2", got)
	}
	var purged []idempotency.Event
	for _, ev := range r.Events.All() {
		if ev.Decision == idempotency.DecisionPurged {
			purged = append(purged, ev)
		}
	}
	if len(purged) != 1 || purged[0].StoreKey != e.GetStoreKey() || purged[0].Err != nil {
		t.Fatalf("purged events %+v, want one naming %s", purged, e.GetStoreKey())
	}
	lines := r.logs.lines(t, "idempotency admin: key purged")
	want := map[string]any{"principal": Alice, "store_key": e.GetStoreKey(), "state": "completed", "force": false, "fenced": true}
	if len(lines) != 1 || !contains(lines[0], want) {
		t.Fatalf("log lines %v, want one with %v", lines, want)
	}
	if strings.Contains(r.logs.text(), key) {
		t.Fatalf("the log names the client's key: %s", r.logs.text())
	}
}

// contains reports whether every attribute of want is in got.
func contains(got, want map[string]any) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// A key in flight is refused without force (FAILED_PRECONDITION), force is
// refused without the etag (INVALID_ARGUMENT), and purged with both; the
// original's completion is then refused (lease lost), its caller still
// gets its answer, and the next call runs the handler again. The refusal
// and the purge are logged.
func purgeInFlight(t *testing.T, st store.Store) {
	r := newRig(t, st)
	running := r.start(t, "k-stuck", payloadBlock)
	r.Service.WaitExecutions(t, 1)
	e := r.get(t, "k-stuck")
	if e.GetState() != adminv1.State_STATE_IN_FLIGHT || e.GetOutcome() != nil || e.GetOutcomeError() != "" {
		t.Fatalf("entry %v, want in flight without an outcome", e)
	}
	ctx := as(t.Context(), Alice)
	_, err := r.admin.PurgeKey(ctx, &adminv1.PurgeKeyRequest{Key: purgeKey("k-stuck"), Etag: e.GetEtag()})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = r.admin.PurgeKey(ctx, &adminv1.PurgeKeyRequest{Key: purgeKey("k-stuck"), Force: true})
	wantCode(t, err, codes.InvalidArgument)
	resp, err := r.admin.PurgeKey(ctx, &adminv1.PurgeKeyRequest{Key: purgeKey("k-stuck"), Force: true, Etag: e.GetEtag()})
	if err != nil || resp.GetEntry().GetState() != adminv1.State_STATE_IN_FLIGHT {
		t.Fatalf("forced PurgeKey = %v, %v; want the in-flight entry", resp, err)
	}
	r.unblock()
	if got := wait(t, running); got.GetExecution() != 1 {
		t.Fatalf("the original's answer = %v, want execution 1", got)
	}
	r.Events.Wait(t, idempotency.DecisionLeaseLost, 1)
	if got := r.call(t, "k-stuck", payloadBlock); got.GetExecution() != 2 {
		t.Fatalf("call after the purge = %v, want execution 2", got)
	}
	refused := r.logs.lines(t, "idempotency admin: purge refused")
	if len(refused) != 1 || !contains(refused[0], map[string]any{"principal": Alice, "state": "in_flight", "code": "FailedPrecondition", "force": false}) {
		t.Fatalf("refusal log lines %v, want the one without force", refused)
	}
	purged := r.logs.lines(t, "idempotency admin: key purged")
	if len(purged) != 1 || !contains(purged[0], map[string]any{"state": "in_flight", "force": true, "fenced": true}) {
		t.Fatalf("purge log lines %v, want the forced one", purged)
	}
}

// A forced purge of an entry looked at in flight and completed since is
// refused (ABORTED), and the key still replays: deleting its outcome would
// let a retry run the handler again.
func purgeCompletedSinceLooked(t *testing.T, st store.Store) {
	r := newRig(t, st)
	running := r.start(t, "k-late", payloadBlock)
	r.Service.WaitExecutions(t, 1)
	e := r.get(t, "k-late")
	r.unblock()
	wait(t, running)
	r.Events.Wait(t, idempotency.DecisionExecuted, 1)
	_, err := r.admin.PurgeKey(as(t.Context(), Alice), &adminv1.PurgeKeyRequest{Key: purgeKey("k-late"), Force: true, Etag: e.GetEtag()})
	wantCode(t, err, codes.Aborted)
	if got := r.call(t, "k-late", payloadBlock); got.GetExecution() != 1 {
		t.Fatalf("call after the refused purge = %v, want the replay of execution 1", got)
	}
}

// An etag names one claim: once its entry was purged and the key claimed
// again, a purge with the old etag is refused (ABORTED) and the new entry
// stays.
func purgeStaleEtag(t *testing.T, st store.Store) {
	r := newRig(t, st)
	r.call(t, "k-again", "p")
	old := r.get(t, "k-again").GetEtag()
	ctx := as(t.Context(), Alice)
	if _, err := r.admin.PurgeKey(ctx, &adminv1.PurgeKeyRequest{Key: purgeKey("k-again"), Etag: old}); err != nil {
		t.Fatal(err)
	}
	r.call(t, "k-again", "p")
	if now := r.get(t, "k-again").GetEtag(); now == old {
		t.Fatalf("the new claim's etag %q is the old one's", now)
	}
	_, err := r.admin.PurgeKey(ctx, &adminv1.PurgeKeyRequest{Key: purgeKey("k-again"), Etag: old})
	wantCode(t, err, codes.Aborted)
	if got := r.call(t, "k-again", "p"); got.GetExecution() != 2 {
		t.Fatalf("call after the refused purge = %v, want the replay of execution 2", got)
	}
}

// Every method of the service asks the authorization function first: a
// caller it refuses gets PERMISSION_DENIED whatever the request (even one
// that is not valid), a status it returns reaches the caller as it is, a
// reader may look but not purge, and a refused purge leaves the key.
func authorization(t *testing.T, st store.Store) {
	r := newRig(t, st)
	r.call(t, "k-kept", "p")
	cc := r.admin
	desc := adminv1.AdminService_ServiceDesc
	if len(desc.Methods) != 5 || len(desc.Streams) != 0 {
		t.Fatalf("the service has %d methods and %d streams; this test knows 5 and 0", len(desc.Methods), len(desc.Streams))
	}
	conn := r.adminConn
	for _, m := range desc.Methods {
		full := "/" + desc.ServiceName + "/" + m.MethodName
		for _, who := range []string{"", "mallory"} {
			ctx := t.Context()
			if who != "" {
				ctx = as(ctx, who)
			}
			err := conn.Invoke(ctx, full, &emptypb.Empty{}, &emptypb.Empty{})
			wantCode(t, err, codes.PermissionDenied)
		}
		err := conn.Invoke(as(t.Context(), Anonymous), full, &emptypb.Empty{}, &emptypb.Empty{})
		wantCode(t, err, codes.Unauthenticated)
		if msg := status.Convert(err).Message(); msg != "no credentials" {
			t.Fatalf("%s: UNAUTHENTICATED message %q, want the function's own", full, msg)
		}
	}
	if _, err := cc.GetKey(as(t.Context(), Reader), &adminv1.GetKeyRequest{Key: clientKey("k-kept")}); err != nil {
		t.Fatalf("a reader's GetKey = %v", err)
	}
	_, err := cc.PurgeKey(as(t.Context(), Reader), &adminv1.PurgeKeyRequest{Key: purgeKey("k-kept")})
	wantCode(t, err, codes.PermissionDenied)
	if got := r.call(t, "k-kept", "p"); got.GetExecution() != 1 {
		t.Fatalf("call after the refused purge = %v, want the replay of execution 1", got)
	}
	if n := r.Events.Count(idempotency.DecisionPurged); n != 0 {
		t.Fatalf("%d purged events, want none", n)
	}
}

// A key that holds nothing is NOT_FOUND to GetKey and PurgeKey; a request
// without a key, a store key that is not one (a client's key given as a
// store key), a client key the server would refuse (whose error does not
// echo it) and a client key without a name are INVALID_ARGUMENT.
func notFoundAndBadArguments(t *testing.T, st store.Store) {
	r := newRig(t, st)
	ctx := as(t.Context(), Alice)
	_, err := r.admin.GetKey(ctx, &adminv1.GetKeyRequest{Key: clientKey("k-never")})
	wantCode(t, err, codes.NotFound)
	_, err = r.admin.GetKey(ctx, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: r.storeKey(t, "k-never")}})
	wantCode(t, err, codes.NotFound)
	_, err = r.admin.PurgeKey(ctx, &adminv1.PurgeKeyRequest{Key: purgeKey("k-never")})
	wantCode(t, err, codes.NotFound)
	_, err = r.admin.PurgeKey(ctx, &adminv1.PurgeKeyRequest{Key: purgeKey("k-never"), Etag: "e"})
	wantCode(t, err, codes.NotFound)
	const badKey = "bad key with spaces"
	for _, req := range []*adminv1.GetKeyRequest{
		{},
		{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: "k-never"}},
		{Key: clientKey(badKey)},
		{Key: &adminv1.GetKeyRequest_ClientKey{ClientKey: &adminv1.ClientKey{Key: "k-never"}}},
	} {
		_, err := r.admin.GetKey(ctx, req)
		wantCode(t, err, codes.InvalidArgument)
		if strings.Contains(status.Convert(err).Message(), badKey) {
			t.Fatalf("error %v echoes the key", err)
		}
	}
	_, err = r.admin.PurgeKey(ctx, &adminv1.PurgeKeyRequest{})
	wantCode(t, err, codes.InvalidArgument)
}

// GetStats counts the entries in flight and completed, and their bytes.
func stats(t *testing.T, st store.Store) {
	r := newRig(t, st)
	r.call(t, "k-done", "p")
	running := r.start(t, "k-running", payloadBlock)
	r.Service.WaitExecutions(t, 2)
	s, err := r.admin.GetStats(as(t.Context(), Reader), &adminv1.GetStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s.GetInFlight().GetEntries() != 1 || s.GetCompleted().GetEntries() != 1 || s.GetInFlight().GetSizeBytes() <= 0 ||
		s.GetCompleted().GetSizeBytes() <= s.GetInFlight().GetSizeBytes() || s.GetEstimated() {
		t.Fatalf("GetStats = %v, want one entry in flight and one larger completed, counted", s)
	}
	r.unblock()
	wait(t, running)
}

// inspectableWatch is a [testkit.PurgeWatch] that still inspects through
// the store it watches.
type inspectableWatch struct {
	*testkit.PurgeWatch
	store.Inspector
}

// watchPurges wraps st, when its purges are told, so that a test can wait
// until a replay cache has subscribed to them; it returns st and nil
// otherwise.
func watchPurges(st store.Store) (store.Store, *testkit.PurgeWatch) {
	inv, ok := st.(store.Invalidator)
	in, inspectable := st.(store.Inspector)
	if !ok || !inspectable {
		return st, nil
	}
	w := testkit.NewPurgeWatch(st, inv)
	return inspectableWatch{PurgeWatch: w, Inspector: in}, w
}
