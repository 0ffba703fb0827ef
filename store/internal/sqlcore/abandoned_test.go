package sqlcore_test

import (
	"errors"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// TestInfoOfAbandonedRow: an in-flight row the statement judged abandoned
// is reported abandoned, with its owner token and attempt; a row of a
// store that reads no such flag stays in flight, with attempt 0 (unknown).
func TestInfoOfAbandonedRow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		row     sqlcore.Row
		state   store.State
		attempt int
	}{
		{"abandoned", sqlcore.Row{State: sqlcore.StateInFlight, Token: []byte("owner"), Abandoned: true, Attempt: 2}, store.StateAbandoned, 2},
		{"in flight", sqlcore.Row{State: sqlcore.StateInFlight, Token: []byte("owner"), Attempt: 1}, store.StateInFlight, 1},
		{"no flag read", sqlcore.Row{State: sqlcore.StateInFlight, Token: []byte("owner")}, store.StateInFlight, 0},
		{"completed", sqlcore.Row{State: sqlcore.StateCompleted, Token: []byte("owner"), Attempt: 3}, store.StateCompleted, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			i, err := sqlcore.Info("pkg", "t", tc.row)
			if err != nil || i.State != tc.state || i.Token != "owner" || i.Attempt != tc.attempt {
				t.Fatalf("Info = %+v, %v, want state %s, token owner, attempt %d", i, err, tc.state, tc.attempt)
			}
		})
	}
}

// TestPurgeRefusalOfAbandoned: Purge with InFlight may delete an
// abandoned entry; without, it is refused as in flight.
func TestPurgeRefusalOfAbandoned(t *testing.T) {
	t.Parallel()
	info := store.Info{State: store.StateAbandoned, Token: "owner"}
	for _, tc := range []struct {
		name string
		opts store.PurgeOptions
		want error
	}{
		{"in flight", store.PurgeOptions{InFlight: true}, nil},
		{"in flight, its token", store.PurgeOptions{InFlight: true, Token: "owner"}, nil},
		{"in flight, another token", store.PurgeOptions{InFlight: true, Token: "other"}, store.ErrChanged},
		{"completed only", store.PurgeOptions{}, store.ErrInFlight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := sqlcore.PurgeRefusal(info, tc.opts); !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
				t.Fatalf("PurgeRefusal(abandoned, %+v) = %v, want %v", tc.opts, got, tc.want)
			}
		})
	}
}

// TestStatsOfAbandoned: the counts read for StateAbandoned go to
// Stats.Abandoned.
func TestStatsOfAbandoned(t *testing.T) {
	t.Parallel()
	var st store.Stats
	sqlcore.AddStats(&st, sqlcore.StateInFlight, store.Count{Entries: 1, Bytes: 10})
	sqlcore.AddStats(&st, sqlcore.StateAbandoned, store.Count{Entries: 2, Bytes: 20})
	sqlcore.AddStats(&st, sqlcore.StateCompleted, store.Count{Entries: 3, Bytes: 30})
	if st.InFlight.Entries != 1 || st.Abandoned.Entries != 2 || st.Completed.Entries != 3 {
		t.Fatalf("Stats = %+v, want 1 in flight, 2 abandoned, 3 completed", st)
	}
}
