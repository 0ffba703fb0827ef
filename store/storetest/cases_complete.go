package storetest

import (
	"bytes"
	"testing"
)

func completeCases() []testCase {
	data := func(name string, d []byte) testCase {
		return testCase{name, func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.complete(key, tok, d)
			e.wantCompleted(key, fp, d)
			e.wantCompleted(key, fp, d) // a replay does not consume it
		}}
	}
	return []testCase{
		data("Data", []byte("the stored outcome")),
		data("BinaryData", append([]byte{0, 0xff, '\r', '\n', 0}, randomData(1024)...)),
		data("LargeData4MiB", randomData(4<<20)),
		// A server stream's record at the default size limit holds 4 MiB
		// of messages and its header, trailer and framing besides.
		data("LargeData4MiBAndMore", randomData(4<<20+64<<10)),
		data("NilData", nil),
		data("EmptyData", []byte{}),
		{"CompleteCopiesData", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			want := randomData(256)
			mine := bytes.Clone(want)
			tok := e.claimWin(key, fp, longTTL)
			e.complete(key, tok, mine)
			for i := range mine {
				mine[i] ^= 0xff
			}
			e.wantCompleted(key, fp, want)
		}},
		{"SecondCompleteIsANoOp", func(t *testing.T, e *env) {
			// A retried Complete whose first reply was lost must report
			// success, and must not overwrite what the first one stored.
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.complete(key, tok, []byte("first"))
			if err := e.s.Complete(e.ctx, key, tok, []byte("second"), longTTL); err != nil {
				t.Fatalf("second Complete with the token that completed the key: %v, want nil", err)
			}
			e.wantCompleted(key, fp, []byte("first"))
		}},
		{"CompleteOfAnotherOwnersRecordRefused", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.complete(key, tok, []byte("first"))
			e.wantLeaseLost("Complete with a foreign token after completion", e.s.Complete(e.ctx, key, tok+"x", []byte("second"), longTTL))
			e.wantCompleted(key, fp, []byte("first"))
		}},
		{"CompleteFreeKeyRefused", func(t *testing.T, e *env) {
			// Complete never creates an entry.
			key := e.key()
			e.wantLeaseLost("Complete of a key never claimed", e.s.Complete(e.ctx, key, "1", []byte("x"), longTTL))
			e.wantFree(key)
		}},
	}
}
