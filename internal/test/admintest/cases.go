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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
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
		{"GetSealed", getSealed},
		{"GetSealedScope", getSealedScope},
		{"List", list},
		{"ListUnreadableKey", listUnreadableKey},
		{"PurgeCompleted", purgeCompleted},
		{"PurgeInFlight", purgeInFlight},
		{"PurgeCompletedSinceLooked", purgeCompletedSinceLooked},
		{"PurgeStaleEtag", purgeStaleEtag},
		{"Authorization", authorization},
		{"NotFoundAndBadArguments", notFoundAndBadArguments},
		{"Stats", stats},
		{"ListAbandoned", listAbandoned},
		{"ResolveResponse", resolveResponse},
		{"ResolveError", resolveError},
		{"ResolveRerun", resolveRerun},
		{"ResolveRefused", resolveRefused},
		{"ResolveStream", resolveStream},
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

// echoed is the outcome of the rig's first Do call with payload and
// amount 7 (see [rig.do]), times aside.
func echoed(t *testing.T, payload string) *adminv1.Outcome {
	return &adminv1.Outcome{
		Kind:          adminv1.Kind_KIND_RESPONSE,
		ResponseType:  "idempotency.testing.v1.DoResponse",
		Response:      &adminv1.Message{Type: "idempotency.testing.v1.DoResponse", Content: jsonOf(t, map[string]any{"payload": payload, "amount": "7", "execution": "1"})},
		Header:        []*adminv1.Metadata{{Key: "x-order", Values: []string{"o-" + payload}}},
		Trailer:       []*adminv1.Metadata{{Key: "x-trace-bin", Values: []string{"/wAB"}}},
		RecordVersion: 2,
	}
}

// A completed response reads as a person reads it: the response as JSON
// through the descriptors, the header and the binary trailer (base64),
// with the entry's state, etag, fingerprint, size and times, and no
// sealing key (the server has none). A lookup by
// the store key finds the same entry as one by the client's key.
func getResponse(t *testing.T, st store.Store) {
	r := newRig(t, st)
	r.call(t, "k-response", "p")
	e := r.get(t, "k-response")
	wantOutcome(t, e.GetOutcome(), echoed(t, "p"))
	switch {
	case e.GetStoreKey() != r.storeKey(t, "k-response"), e.GetState() != adminv1.State_STATE_COMPLETED:
		t.Fatalf("entry %v, want the completed entry of %s", e, r.storeKey(t, "k-response"))
	case e.GetEtag() == "", len(e.GetFingerprint()) == 0, e.GetSizeBytes() <= 0, e.GetOutcomeError() != "", e.GetSealedBy() != "":
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
	claim, err := st.Claim(t.Context(), key, []byte("fp"), time.Minute, store.ClaimOptions{})
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
