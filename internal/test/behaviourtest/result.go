package behaviourtest

import (
	"fmt"
	"strconv"
)

// Result is one call's answer, in the terms every entry point shares. An
// [EntryPoint] of another module fills it in as unary does, with its
// answer in gRPC terms (Code a codes.Code's String).
type Result struct {
	// Ran reports whether the work ran for this call: the harness sees
	// it, or the entry point says it ([idempotency.Once]'s ran), and the
	// two must agree.
	Ran bool
	// Replayed reports whether the entry point marks the answer as a
	// replay: the replay marker (unary), replayed (Do), Idempotent-Replayed
	// (HTTP); Once has no flag, and its ran false with nil or with a status
	// error the work returned (a stored one) is its replay.
	Replayed bool
	// Reason is the library's ErrorInfo reason: of the status (unary), of
	// the error ([idempotency.Reason], Do and Once), of the problem (HTTP).
	Reason string
	// Code is the entry point's own answer: the status code (unary),
	// the status code of the work's status error or "OK" (Do and Once),
	// "error" for the library's own errors and "panic" for a panic (Do and
	// Once), the status (HTTP). A call whose client gave up is
	// "Canceled" (unary) or "gone" (HTTP).
	Code string
	// Retry reports whether the answer tells the client when to retry:
	// google.rpc.RetryInfo and the pushback trailer (unary), Retry-After
	// (HTTP). Do and Once never do.
	Retry bool
	// Answer is the answer's bytes (the response, or the status, or the
	// HTTP status and body), to compare a replay with the original.
	Answer []byte

	ranKnown bool // Ran is the entry point's own report
}

// want is a situation's expected answer to one call, for every entry
// point: grpc is the unary interceptor's status code, fn Do's and Once's
// code, http the middleware's status (see [Result.Code]).
type want struct {
	ran, replayed bool
	reason        string
	grpc, fn      string
	http          int
	retry         bool
	// same is the number (from 1) of the earlier call whose answer this
	// one repeats byte for byte; 0: none.
	same int
}

// code returns the code w expects from the entry point of kind k.
func (w want) code(k kind) string {
	switch k {
	case unary:
		return w.grpc
	case httpMiddleware:
		if w.http == 0 {
			return "gone"
		}
		return strconv.Itoa(w.http)
	default:
		return w.fn
	}
}

// retries reports whether w expects a retry hint from k.
func (w want) retries(k kind) bool { return w.retry && (k == unary || k == httpMiddleware) }

// diff describes how got differs from w for the entry point k, "" when it
// does not.
func (w want) diff(k kind, got Result, answers [][]byte) string {
	var d string
	add := func(field string, got, want any) {
		d += fmt.Sprintf(" %s=%v (want %v)", field, got, want)
	}
	if got.Ran != w.ran {
		add("ran", got.Ran, w.ran)
	}
	if got.Replayed != w.replayed {
		add("replayed", got.Replayed, w.replayed)
	}
	if got.Reason != w.reason {
		add("reason", got.Reason, w.reason)
	}
	if c := w.code(k); got.Code != c {
		add("code", got.Code, c)
	}
	if r := w.retries(k); got.Retry != r {
		add("retry hint", got.Retry, r)
	}
	if w.same > 0 && string(got.Answer) != string(answers[w.same-1]) {
		add("answer", fmt.Sprintf("%.80q", got.Answer), fmt.Sprintf("%.80q (call %d's)", answers[w.same-1], w.same))
	}
	return d
}
