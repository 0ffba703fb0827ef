package admintest

import (
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// abandon leaves the key of the test service's Do with key abandoned, as
// a server that died mid-handler leaves it: claimed, with a keep, for the
// request [rig.do] sends with payload, then its lease ended. It returns
// the entry as GetKey reads it.
func (r *rig) abandon(t *testing.T, st store.Store, key, payload string) *adminv1.Entry {
	t.Helper()
	fp, err := idempotency.Fingerprint(testingv1.TestService_Do_FullMethodName, &testingv1.DoRequest{Payload: payload, Amount: 7})
	if err != nil {
		t.Fatal(err)
	}
	sk := r.storeKey(t, key)
	claim, err := st.Claim(t.Context(), sk, fp, time.Minute, store.ClaimOptions{Keep: time.Hour})
	if err != nil || !claim.Won() {
		t.Fatalf("Claim = %+v, %v", claim, err)
	}
	if err := st.Abandon(t.Context(), sk, claim.Token); err != nil {
		t.Fatalf("Abandon = %v", err)
	}
	e := r.get(t, key)
	if e.GetState() != adminv1.State_STATE_ABANDONED || e.GetEtag() == "" || e.GetOutcome() != nil {
		t.Fatalf("entry %v, want abandoned, with an etag and no outcome", e)
	}
	return e
}

// resolveKey names the test service's Do with key, in a ResolveKeyRequest.
func resolveKey(key string) *adminv1.ResolveKeyRequest_ClientKey {
	return &adminv1.ResolveKeyRequest_ClientKey{ClientKey: &adminv1.ClientKey{Name: testingv1.TestService_Do_FullMethodName, Key: key}}
}

// resolved returns the resolved events of r.
func (r *rig) resolved() []idempotency.Event {
	var out []idempotency.Event
	for _, ev := range r.Events.All() {
		if ev.Decision == idempotency.DecisionResolved {
			out = append(out, ev)
		}
	}
	return out
}

// An abandoned key is listed under its state, and only there; looked up
// with its attempt and claim time; and counted.
func listAbandoned(t *testing.T, st store.Store) {
	r := newRig(t, st)
	r.call(t, "k-done", "p")
	e := r.abandon(t, st, "k-abandoned", "p")
	if e.GetAttempt() != 1 || e.GetClaimTime() == nil || since(e.GetClaimTime()) > time.Minute || e.GetExpireTime().AsTime().Before(time.Now().Add(30*time.Minute)) {
		t.Fatalf("entry %v, want attempt 1, claimed now, kept for an hour", e)
	}
	got := walk(t, r, &adminv1.ListKeysRequest{State: adminv1.State_STATE_ABANDONED})
	if len(got) != 1 || got[e.GetStoreKey()].GetState() != adminv1.State_STATE_ABANDONED || got[e.GetStoreKey()].GetEtag() != e.GetEtag() {
		t.Fatalf("abandoned listing %v, want only %s", got, e.GetStoreKey())
	}
	if got := walk(t, r, &adminv1.ListKeysRequest{State: adminv1.State_STATE_IN_FLIGHT}); len(got) != 0 {
		t.Fatalf("in-flight listing %v, want none", got)
	}
	s, err := r.admin.GetStats(as(t.Context(), Reader), &adminv1.GetStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s.GetAbandoned().GetEntries() != 1 || s.GetAbandoned().GetSizeBytes() <= 0 || s.GetInFlight().GetEntries() != 0 || s.GetCompleted().GetEntries() != 1 {
		t.Fatalf("GetStats = %v, want one abandoned and one completed", s)
	}
}

// An abandoned key resolved with a response (JSON, read through the
// descriptors) is completed with it: GetKey reads it as a handler's
// response, and the next call with the key replays exactly it, marked
// replayed, without running the handler. The resolution is one resolved
// event naming the store key, and one log line. The resolution took the
// entry over: the late handler's Complete under the abandoned claim's
// token is refused (decision 314).
func resolveResponse(t *testing.T, st store.Store) {
	r := newRig(t, st)
	e := r.abandon(t, st, "k-paid", "p")
	abandoned, err := st.(store.Inspector).Lookup(t.Context(), e.GetStoreKey())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.admin.ResolveKey(as(t.Context(), Alice), &adminv1.ResolveKeyRequest{
		Key: resolveKey("k-paid"), Etag: e.GetEtag(),
		Resolution: &adminv1.ResolveKeyRequest_ResponseJson{ResponseJson: `{"payload": "charged", "amount": "7", "execution": "1"}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &testingv1.DoResponse{Payload: "charged", Amount: 7, Execution: 1}
	got := resp.GetEntry()
	if got.GetState() != adminv1.State_STATE_COMPLETED || got.GetOutcome().GetKind() != adminv1.Kind_KIND_RESPONSE ||
		!proto.Equal(got.GetOutcome().GetResponse().GetJson(), jsonOf(t, map[string]any{"payload": "charged", "amount": "7", "execution": "1"}).Json) {
		t.Fatalf("ResolveKey answered %v, want the completed entry with the response", got)
	}
	if err := st.Complete(t.Context(), e.GetStoreKey(), abandoned.Token, []byte("the late handler's"), time.Hour); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the late handler's Complete after the resolution = %v, want store.ErrLeaseLost", err)
	}
	var header metadata.MD
	call, err := r.client.Do(testkit.WithKey(t.Context(), "k-paid"), &testingv1.DoRequest{Payload: "p", Amount: 7}, grpc.Header(&header))
	if err != nil || !proto.Equal(call, want) {
		t.Fatalf("call after the resolution = %v, %v; want %v", call, err, want)
	}
	if len(header.Get(idempotency.ReplayedKey)) == 0 {
		t.Fatalf("header %v, want the replay marker", header)
	}
	if n := r.Service.Executions(); n != 0 {
		t.Fatalf("%d executions, want none", n)
	}
	if ev := r.resolved(); len(ev) != 1 || ev[0].StoreKey != e.GetStoreKey() || ev[0].Method != "" {
		t.Fatalf("resolved events %+v, want one naming %s and no method", ev, e.GetStoreKey())
	}
	lines := r.logs.lines(t, "idempotency admin: key resolved")
	if len(lines) != 1 || !contains(lines[0], map[string]any{"principal": Alice, "store_key": e.GetStoreKey(), "state": "abandoned", "resolution": "response"}) {
		t.Fatalf("log lines %v, want the resolution", lines)
	}
}

// An abandoned key resolved with an error replays that status, by a
// store key with its method named apart.
func resolveError(t *testing.T, st store.Store) {
	r := newRig(t, st)
	e := r.abandon(t, st, "k-declined", "p")
	resp, err := r.admin.ResolveKey(as(t.Context(), Alice), &adminv1.ResolveKeyRequest{
		Key:  &adminv1.ResolveKeyRequest_StoreKey{StoreKey: e.GetStoreKey()},
		Name: testingv1.TestService_Do_FullMethodName, Etag: e.GetEtag(),
		Resolution: &adminv1.ResolveKeyRequest_Error{Error: &adminv1.ResolveError{Code: int32(codes.FailedPrecondition), Message: "card declined"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if o := resp.GetEntry().GetOutcome(); o.GetKind() != adminv1.Kind_KIND_ERROR || o.GetStatus().GetCodeName() != "FAILED_PRECONDITION" || o.GetStatus().GetMessage() != "card declined" {
		t.Fatalf("outcome %v, want the error", o)
	}
	_, err = r.do(t, "k-declined", "p")
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "card declined" {
		t.Fatalf("call after the resolution = %v, want FAILED_PRECONDITION card declined", err)
	}
	if n := r.Service.Executions(); n != 0 {
		t.Fatalf("%d executions, want none", n)
	}
	r.Events.Wait(t, idempotency.DecisionReplayed, 1)
}

// An abandoned key resolved with rerun is deleted: the next call runs the
// handler.
func resolveRerun(t *testing.T, st store.Store) {
	r := newRig(t, st)
	e := r.abandon(t, st, "k-nothing-done", "p")
	resp, err := r.admin.ResolveKey(as(t.Context(), Alice), &adminv1.ResolveKeyRequest{
		Key: resolveKey("k-nothing-done"), Etag: e.GetEtag(), Resolution: &adminv1.ResolveKeyRequest_Rerun{Rerun: true},
	})
	if err != nil || resp.GetEntry().GetState() != adminv1.State_STATE_ABANDONED {
		t.Fatalf("ResolveKey = %v, %v; want the abandoned entry as it was", resp, err)
	}
	if got := r.call(t, "k-nothing-done", "p"); got.GetExecution() != 1 {
		t.Fatalf("call after the resolution = %v, want execution 1", got)
	}
	if ev := r.resolved(); len(ev) != 1 || ev[0].StoreKey != e.GetStoreKey() {
		t.Fatalf("resolved events %+v, want one naming %s", ev, e.GetStoreKey())
	}
}

// A resolution is refused, changing nothing: with an etag not the
// entry's (ABORTED), for an entry in flight under a live lease or
// completed (FAILED_PRECONDITION), without an etag, without a
// resolution, with an OK code or a response that is not the method's
// (INVALID_ARGUMENT), for a key that holds nothing (NOT_FOUND), and for a
// reader (PERMISSION_DENIED). Each refusal after the arguments is logged.
func resolveRefused(t *testing.T, st store.Store) {
	r := newRig(t, st)
	ctx := as(t.Context(), Alice)
	rerun := &adminv1.ResolveKeyRequest_Rerun{Rerun: true}

	old := r.abandon(t, st, "k-stale", "p")
	if _, err := r.admin.ResolveKey(ctx, &adminv1.ResolveKeyRequest{Key: resolveKey("k-stale"), Etag: old.GetEtag(), Resolution: rerun}); err != nil {
		t.Fatal(err)
	}
	now := r.abandon(t, st, "k-stale", "p")
	_, err := r.admin.ResolveKey(ctx, &adminv1.ResolveKeyRequest{Key: resolveKey("k-stale"), Etag: old.GetEtag(), Resolution: rerun})
	wantCode(t, err, codes.Aborted)
	if e := r.get(t, "k-stale"); e.GetEtag() != now.GetEtag() || e.GetState() != adminv1.State_STATE_ABANDONED {
		t.Fatalf("entry %v after the refusal, want %v", e, now)
	}

	r.call(t, "k-done", "p")
	done := r.get(t, "k-done")
	_, err = r.admin.ResolveKey(ctx, &adminv1.ResolveKeyRequest{Key: resolveKey("k-done"), Etag: done.GetEtag(), Resolution: rerun})
	wantCode(t, err, codes.FailedPrecondition)

	running := r.start(t, "k-running", payloadBlock)
	r.Service.WaitExecutions(t, 2)
	live := r.get(t, "k-running")
	_, err = r.admin.ResolveKey(ctx, &adminv1.ResolveKeyRequest{Key: resolveKey("k-running"), Etag: live.GetEtag(),
		Resolution: &adminv1.ResolveKeyRequest_Error{Error: &adminv1.ResolveError{Code: int32(codes.Aborted), Message: "x"}}})
	wantCode(t, err, codes.FailedPrecondition)
	r.unblock()
	if got := wait(t, running); got.GetExecution() != 2 {
		t.Fatalf("the live call's answer = %v, want its own execution", got)
	}

	for name, req := range map[string]*adminv1.ResolveKeyRequest{
		"no etag":       {Key: resolveKey("k-stale"), Resolution: rerun},
		"no resolution": {Key: resolveKey("k-stale"), Etag: now.GetEtag()},
		"rerun false":   {Key: resolveKey("k-stale"), Etag: now.GetEtag(), Resolution: &adminv1.ResolveKeyRequest_Rerun{}},
		"code OK":       {Key: resolveKey("k-stale"), Etag: now.GetEtag(), Resolution: &adminv1.ResolveKeyRequest_Error{Error: &adminv1.ResolveError{}}},
		"not JSON":      {Key: resolveKey("k-stale"), Etag: now.GetEtag(), Resolution: &adminv1.ResolveKeyRequest_ResponseJson{ResponseJson: `{"nope": 1}`}},
		"no method": {Key: &adminv1.ResolveKeyRequest_StoreKey{StoreKey: now.GetStoreKey()}, Etag: now.GetEtag(),
			Resolution: &adminv1.ResolveKeyRequest_ResponseJson{ResponseJson: `{}`}},
	} {
		_, err := r.admin.ResolveKey(ctx, req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: code %v (%v), want InvalidArgument", name, status.Code(err), err)
		}
	}
	_, err = r.admin.ResolveKey(ctx, &adminv1.ResolveKeyRequest{Key: resolveKey("k-never"), Etag: "e", Resolution: rerun})
	wantCode(t, err, codes.NotFound)
	_, err = r.admin.ResolveKey(as(t.Context(), Reader), &adminv1.ResolveKeyRequest{Key: resolveKey("k-stale"), Etag: now.GetEtag(), Resolution: rerun})
	wantCode(t, err, codes.PermissionDenied)

	if e := r.get(t, "k-stale"); e.GetEtag() != now.GetEtag() || e.GetState() != adminv1.State_STATE_ABANDONED {
		t.Fatalf("entry %v after the refusals, want %v", e, now)
	}
	if ev := r.resolved(); len(ev) != 1 {
		t.Fatalf("resolved events %+v, want only the first rerun", ev)
	}
	if lines := r.logs.lines(t, "idempotency admin: resolve refused"); len(lines) != 4 {
		t.Fatalf("refusal log lines %v, want 4 (stale etag, completed, in flight, not found)", lines)
	}
}

// A server-streaming key resolved with a response replays as a stream of
// that one message, ended OK; resolved with an error, as a stream of none
// ended in that status. The handler never runs.
func resolveStream(t *testing.T, st store.Store) {
	r := newRig(t, st)
	download := testingv1.NewStreamServiceClient(r.Dial(t))
	req := &testingv1.DoRequest{Payload: "s", Amount: 2}
	fp, err := idempotency.Fingerprint(streamtest.DownloadMethod, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key     string
		how     *adminv1.ResolveKeyRequest
		want    []*testingv1.DoResponse
		wantErr codes.Code
	}{
		{"k-stream-ok", &adminv1.ResolveKeyRequest{Resolution: &adminv1.ResolveKeyRequest_ResponseJson{ResponseJson: `{"payload":"resolved"}`}},
			[]*testingv1.DoResponse{{Payload: "resolved"}}, codes.OK},
		{"k-stream-error", &adminv1.ResolveKeyRequest{Resolution: &adminv1.ResolveKeyRequest_Error{Error: &adminv1.ResolveError{Code: int32(codes.DataLoss), Message: "gone"}}},
			nil, codes.DataLoss},
	} {
		sk, err := r.Idempotency.StoreKey(streamtest.DownloadMethod, "", tc.key)
		if err != nil {
			t.Fatal(err)
		}
		claim, err := st.Claim(t.Context(), sk, fp, time.Minute, store.ClaimOptions{Keep: time.Hour})
		if err != nil || !claim.Won() {
			t.Fatalf("Claim = %+v, %v", claim, err)
		}
		if err := st.Abandon(t.Context(), sk, claim.Token); err != nil {
			t.Fatal(err)
		}
		ck := &adminv1.ClientKey{Name: streamtest.DownloadMethod, Key: tc.key}
		got, err := r.admin.GetKey(as(t.Context(), Alice), &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{ClientKey: ck}})
		if err != nil {
			t.Fatal(err)
		}
		tc.how.Key, tc.how.Etag = &adminv1.ResolveKeyRequest_ClientKey{ClientKey: ck}, got.GetEntry().GetEtag()
		if _, err := r.admin.ResolveKey(as(t.Context(), Alice), tc.how); err != nil {
			t.Fatalf("%s: ResolveKey = %v", tc.key, err)
		}
		stream, err := download.Download(testkit.WithKey(t.Context(), tc.key), req)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []*testingv1.DoResponse
		for {
			m, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				if status.Code(err) != tc.wantErr {
					t.Fatalf("%s: stream ended with %v, want %v", tc.key, err, tc.wantErr)
				}
				break
			}
			msgs = append(msgs, m)
		}
		if len(msgs) != len(tc.want) || (len(msgs) == 1 && !proto.Equal(msgs[0], tc.want[0])) {
			t.Fatalf("%s: stream %v, want %v", tc.key, msgs, tc.want)
		}
	}
	if n := r.streams.Executions(); n != 0 {
		t.Fatalf("%d stream executions, want none", n)
	}
}
