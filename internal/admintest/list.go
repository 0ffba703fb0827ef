package admintest

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

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
