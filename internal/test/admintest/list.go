package admintest

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// badKey is a store key that is not valid UTF-8, as a copied key or a
// binary one may be: the server never derives such a key, but a store
// holds whatever bytes were put in it.
const badKey = "copied-\xff\xfe-key"

// A store key that is not UTF-8 stops no listing: the walk goes on page
// after page, lists the good entries, and lists that one escaped, saying
// that its key could not be read.
func listUnreadableKey(t *testing.T, st store.Store) {
	r := newRig(t, st)
	r.call(t, "k-before", "p")
	claim, err := st.Claim(t.Context(), badKey, []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil || !claim.Won() {
		t.Fatalf("Claim = %+v, %v", claim, err)
	}
	if err := st.Complete(t.Context(), badKey, claim.Token, []byte("x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	r.call(t, "k-after", "p")
	got := walk(t, r, &adminv1.ListKeysRequest{})
	for _, k := range []string{r.storeKey(t, "k-before"), r.storeKey(t, "k-after")} {
		if e, ok := got[k]; !ok || e.GetKeyError() != "" {
			t.Fatalf("the walk listed %v for %s; want it, readable (listed: %v)", e, k, got)
		}
	}
	e, ok := got[`"copied-\xff\xfe-key"`]
	if !ok || e.GetState() != adminv1.State_STATE_COMPLETED || !strings.Contains(e.GetKeyError(), "not UTF-8") {
		t.Fatalf("the walk listed %v; want the key that is not UTF-8, quoted, completed, with a key_error", got)
	}
	// Such a key cannot be named: GetKey and PurgeKey take store keys of
	// the server's shape only.
	_, err = r.admin.GetKey(as(t.Context(), Reader), &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: e.GetStoreKey()}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("GetKey of the quoted key = %v, want INVALID_ARGUMENT", err)
	}
}
