package admintest

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/grpc-idempotency/idempotency"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// Run runs every case of the admin service, each on a store of its own
// that newStore makes.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, st store.Store)
	}{
		{"GetResponse", getResponse},
		{"GetError", getError},
		{"GetStream", getStream},
		{"GetHTTP", getHTTP},
		{"GetCorrupt", getCorrupt},
		{"List", list},
		{"PurgeCompleted", purgeCompleted},
		{"PurgeInFlight", purgeInFlight},
		{"PurgeCompletedSinceLooked", purgeCompletedSinceLooked},
		{"PurgeStaleEtag", purgeStaleEtag},
		{"Authorization", authorization},
		{"NotFoundAndBadArguments", notFoundAndBadArguments},
		{"Stats", stats},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newStore(t))
		})
	}
}

// ignoreTimes leaves out the times of an outcome, which the test cannot
// know; they are checked apart.
var ignoreTimes = protocmp.IgnoreFields(&adminv1.Outcome{}, "create_time", "complete_time")

// jsonOf returns v as a structpb.Value, or fails the test.
func jsonOf(t *testing.T, v any) *adminv1.Message_Json {
	t.Helper()
	sv, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return &adminv1.Message_Json{Json: sv}
}

// wantOutcome fails the test unless got is want, times aside, and got has
// its times, in order and recent.
func wantOutcome(t *testing.T, got, want *adminv1.Outcome) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform(), ignoreTimes); diff != "" {
		t.Fatalf("outcome (-want +got):\n%s", diff)
	}
	c, d := got.GetCreateTime(), got.GetCompleteTime()
	if c == nil || d == nil || d.AsTime().Before(c.AsTime()) || since(c) > time.Minute {
		t.Fatalf("outcome times %v, %v; want a recent creation, then its completion", c, d)
	}
}

// A completed response reads as a person reads it: the response as JSON
// through the descriptors, the header and the binary trailer (base64),
// with the entry's state, etag, fingerprint, size and times. A lookup by
// the store key finds the same entry as one by the client's key.
func getResponse(t *testing.T, st store.Store) {
	r := newRig(t, st)
	r.call(t, "k-response", "p")
	e := r.get(t, "k-response")
	wantOutcome(t, e.GetOutcome(), &adminv1.Outcome{
		Kind:          adminv1.Kind_KIND_RESPONSE,
		ResponseType:  "idempotency.testing.v1.DoResponse",
		Response:      &adminv1.Message{Type: "idempotency.testing.v1.DoResponse", Content: jsonOf(t, map[string]any{"payload": "p", "amount": "7", "execution": "1"})},
		Header:        []*adminv1.Metadata{{Key: "x-order", Values: []string{"o-p"}}},
		Trailer:       []*adminv1.Metadata{{Key: "x-trace-bin", Values: []string{"/wAB"}}},
		RecordVersion: 2,
	})
	switch {
	case e.GetStoreKey() != r.storeKey(t, "k-response"), e.GetState() != adminv1.State_STATE_COMPLETED:
		t.Fatalf("entry %v, want the completed entry of %s", e, r.storeKey(t, "k-response"))
	case e.GetEtag() == "", len(e.GetFingerprint()) == 0, e.GetSizeBytes() <= 0, e.GetOutcomeError() != "":
		t.Fatalf("entry %v lacks its etag, fingerprint or size", e)
	case e.GetClaimTime() == nil || since(e.GetClaimTime()) > time.Minute || !e.GetExpireTime().AsTime().After(time.Now()):
		t.Fatalf("entry claimed %v, expires %v; want claimed now, expiring later", e.GetClaimTime(), e.GetExpireTime())
	}
	byStoreKey, err := r.admin.GetKey(as(t.Context(), Alice), &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: e.GetStoreKey()}})
	if err != nil || !proto.Equal(byStoreKey.GetEntry(), e) {
		t.Fatalf("GetKey by store key = %v, %v; want %v", byStoreKey, err, e)
	}
}

// A stored error reads as its status: code and name, message, and each
// detail as JSON of its type.
func getError(t *testing.T, st store.Store) {
	r := newRig(t, st)
	r.call(t, "k-error", payloadRefuse)
	wantOutcome(t, r.get(t, "k-error").GetOutcome(), &adminv1.Outcome{
		Kind: adminv1.Kind_KIND_ERROR,
		Status: &adminv1.Status{Code: int32(codes.FailedPrecondition), CodeName: "FAILED_PRECONDITION", Message: "amount over the limit",
			Details: []*adminv1.Message{{Type: "google.rpc.BadRequest", Content: jsonOf(t, map[string]any{
				"fieldViolations": []any{map[string]any{"field": "amount", "description": "too big"}},
			})}}},
		Header:        []*adminv1.Metadata{{Key: "x-order", Values: []string{"o-refuse"}}},
		Trailer:       []*adminv1.Metadata{{Key: "x-trace-bin", Values: []string{"/wAB"}}},
		RecordVersion: 2,
	})
}

// A server stream reads as each of its messages, in order, its header and
// its final status, OK.
func getStream(t *testing.T, st store.Store) {
	r := newRig(t, st)
	stream, err := testingv1.NewStreamServiceClient(r.Dial(t)).Download(testkit.WithKey(t.Context(), "k-stream"), &testingv1.DoRequest{Payload: "s", Amount: 2})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	resp, err := r.admin.GetKey(as(t.Context(), Alice), &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{
		ClientKey: &adminv1.ClientKey{Name: streamtest.DownloadMethod, Key: "k-stream"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(v map[string]any) *adminv1.Message {
		return &adminv1.Message{Type: "idempotency.testing.v1.DoResponse", Content: jsonOf(t, v)}
	}
	wantOutcome(t, resp.GetEntry().GetOutcome(), &adminv1.Outcome{
		Kind:         adminv1.Kind_KIND_STREAM,
		ResponseType: "idempotency.testing.v1.DoResponse",
		Messages: []*adminv1.Message{
			msg(map[string]any{"payload": "s e1 m0", "execution": "1"}),
			msg(map[string]any{"payload": "s e1 m1", "amount": "1", "execution": "1"}),
		},
		Status:        &adminv1.Status{CodeName: "OK"},
		Header:        []*adminv1.Metadata{{Key: "x-execution", Values: []string{"1"}}},
		Trailer:       []*adminv1.Metadata{},
		RecordVersion: 2,
	})
}

// An answer httpidempotency stored reads as its HTTP status, headers and
// body, under the middleware's operation.
func getHTTP(t *testing.T, st store.Store) {
	r := newRig(t, st)
	h := httpidempotency.Middleware(r.Idempotency)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/o-1")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"o-1"}`)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"amount":7}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(httpidempotency.KeyHeader, "k-http")
	if got := testkit.Send(t, srv.Client(), req); got.Status != http.StatusCreated {
		t.Fatalf("POST = %d %s", got.Status, got.Body)
	}
	resp, err := r.admin.GetKey(as(t.Context(), Alice), &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{
		ClientKey: &adminv1.ClientKey{Name: httpidempotency.DefaultOperation, Key: "k-http"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, resp.GetEntry().GetOutcome(), &adminv1.Outcome{
		Kind:         adminv1.Kind_KIND_HTTP,
		ResponseType: "idempotency.http.v1.Response",
		Http: &adminv1.HttpResponse{
			Status: http.StatusCreated,
			Headers: []*adminv1.Metadata{
				{Key: "Content-Type", Values: []string{"application/json"}},
				{Key: "Location", Values: []string{"/orders/o-1"}},
			},
			Body: &adminv1.HttpResponse_Text{Text: `{"id":"o-1"}`},
		},
		Header:        []*adminv1.Metadata{},
		Trailer:       []*adminv1.Metadata{},
		RecordVersion: 2,
	})
}

// A completed entry whose record cannot be read is still looked up, with
// why its outcome is missing, and purged.
func getCorrupt(t *testing.T, st store.Store) {
	r := newRig(t, st)
	key := r.storeKey(t, "k-corrupt")
	claim, err := st.Claim(t.Context(), key, []byte("fp"), time.Minute)
	if err != nil || !claim.Won() {
		t.Fatalf("Claim = %+v, %v", claim, err)
	}
	if err := st.Complete(t.Context(), key, claim.Token, []byte("\xff\xffnot a record"), time.Hour); err != nil {
		t.Fatal(err)
	}
	ctx := as(t.Context(), Alice)
	resp, err := r.admin.GetKey(ctx, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: key}})
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.GetEntry(); e.GetState() != adminv1.State_STATE_COMPLETED || e.GetOutcome() != nil || !strings.Contains(e.GetOutcomeError(), "record unreadable") {
		t.Fatalf("entry %v, want completed, without an outcome, saying why", e)
	}
	if _, err := r.admin.PurgeKey(ctx, &adminv1.PurgeKeyRequest{Key: &adminv1.PurgeKeyRequest_StoreKey{StoreKey: key}, Etag: resp.GetEntry().GetEtag()}); err != nil {
		t.Fatal(err)
	}
	_, err = r.admin.GetKey(ctx, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: key}})
	wantCode(t, err, codes.NotFound)
}

// walk lists every page of req, one entry examined per page, and returns
// the entries by store key.
func walk(t *testing.T, r *rig, req *adminv1.ListKeysRequest) map[string]*adminv1.Entry {
	t.Helper()
	req = proto.CloneOf(req)
	req.PageSize = 1
	out := map[string]*adminv1.Entry{}
	for {
		page, err := r.admin.ListKeys(as(t.Context(), Reader), req)
		if err != nil {
			t.Fatalf("ListKeys(%v) = %v", req, err)
		}
		for _, e := range page.GetEntries() {
			if e.GetOutcome() != nil {
				t.Fatalf("listed entry %v has an outcome", e)
			}
			out[e.GetStoreKey()] = e
		}
		if page.GetNextPageToken() == "" {
			return out
		}
		req.PageToken = page.GetNextPageToken()
	}
}

// A listing keeps the entries of the state asked, and of the age asked:
// a key in flight (its handler blocked) is listed as in flight since a
// nanosecond, and not as in flight since an hour. A page size above the
// largest is taken as the largest; a negative one, an unknown state, a
// negative age and a page token the store did not make are
// INVALID_ARGUMENT.
func list(t *testing.T, st store.Store) {
	r := newRig(t, st)
	r.call(t, "k-done", "p")
	running := r.start(t, "k-running", payloadBlock)
	r.Service.WaitExecutions(t, 2)
	done, inFlight := r.storeKey(t, "k-done"), r.storeKey(t, "k-running")
	for _, tc := range []struct {
		name string
		req  *adminv1.ListKeysRequest
		want []string
	}{
		{"every state", &adminv1.ListKeysRequest{}, []string{done, inFlight}},
		{"completed", &adminv1.ListKeysRequest{State: adminv1.State_STATE_COMPLETED}, []string{done}},
		{"in flight", &adminv1.ListKeysRequest{State: adminv1.State_STATE_IN_FLIGHT}, []string{inFlight}},
		{"in flight since a nanosecond", &adminv1.ListKeysRequest{State: adminv1.State_STATE_IN_FLIGHT, MinAge: durationpb.New(time.Nanosecond)}, []string{inFlight}},
		{"in flight since an hour", &adminv1.ListKeysRequest{State: adminv1.State_STATE_IN_FLIGHT, MinAge: durationpb.New(time.Hour)}, nil},
	} {
		got := walk(t, r, tc.req)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
		for _, k := range tc.want {
			e := got[k]
			wantState := adminv1.State_STATE_COMPLETED
			if k == inFlight {
				wantState = adminv1.State_STATE_IN_FLIGHT
			}
			if e.GetState() != wantState || e.GetEtag() == "" {
				t.Fatalf("%s: entry %v, want %v with an etag", tc.name, e, wantState)
			}
		}
	}
	if _, err := r.admin.ListKeys(as(t.Context(), Reader), &adminv1.ListKeysRequest{PageSize: 5000}); err != nil {
		t.Fatalf("ListKeys with page_size 5000 = %v, want the largest page", err)
	}
	for _, req := range []*adminv1.ListKeysRequest{
		{PageSize: -1},
		{State: adminv1.State(9)},
		{MinAge: durationpb.New(-time.Second)},
		{PageToken: "not-a-token-of-this-store"},
	} {
		_, err := r.admin.ListKeys(as(t.Context(), Reader), req)
		wantCode(t, err, codes.InvalidArgument)
	}
	r.unblock()
	wait(t, running)
}

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
	r := newRig(t, st, idempotency.WithReplayCache(100, 1<<20, time.Hour))
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
	if len(desc.Methods) != 4 || len(desc.Streams) != 0 {
		t.Fatalf("the service has %d methods and %d streams; this test knows 4 and 0", len(desc.Methods), len(desc.Streams))
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
