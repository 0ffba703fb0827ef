package storetest

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/grpc-idempotency/idempotency/store"
)

// TestLinFailoverModel checks the model of LinearizabilityConfig.Failover
// on histories written out by hand: a failover may lose a completion
// whose call failed, even one a lookup saw, but never an acknowledged
// claim or completion, nor one an acknowledged Complete of its owner
// confirmed.
func TestLinFailoverModel(t *testing.T) {
	t.Parallel()
	const never = math.MaxInt64
	const key = "k"
	unknown := linOutput{unknown: true, cause: "i/o timeout"}
	claim := op(1, linInput{op: opClaim, key: key}, linOutput{token: "a", attempt: 1}, 0, 1)
	inFlight := func(at int64) porcupine.Operation {
		return op(2, linInput{op: opLookup, key: key}, linOutput{state: store.StateInFlight, attempt: 1, infoToken: "a"}, at, at+1)
	}
	completed := func(at int64, data string) porcupine.Operation {
		return op(2, linInput{op: opLookup, key: key}, linOutput{state: store.StateCompleted, data: data, infoToken: "a"}, at, at+1)
	}
	complete := func(at, ret int64, data string, out linOutput) porcupine.Operation {
		return op(1, linInput{op: opComplete, key: key, token: "a", data: data}, out, at, ret)
	}
	lost := func(at int64, data string) porcupine.Operation {
		return op(1, linInput{op: opCompleteLost, key: key, token: "a", data: data}, unknown, at, never)
	}
	notFound := op(2, linInput{op: opLookup, key: key}, linOutput{err: errNotFound}, 2, 3)
	for _, tc := range []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{
			name: "failed completion seen, then lost",
			ops:  []porcupine.Operation{claim, complete(2, never, "d1", unknown), lost(2, "d1"), completed(3, "d1"), inFlight(5)},
			// The same history, recorded without Failover: no loss.
			legal: true,
		},
		{
			name: "acknowledged completion lost",
			ops:  []porcupine.Operation{claim, complete(2, 3, "d1", linOutput{}), complete(4, never, "d2", unknown), lost(4, "d2"), inFlight(6)},
		},
		{
			name: "failed completion confirmed by an acknowledged one, then lost",
			ops:  []porcupine.Operation{claim, complete(2, never, "d1", unknown), lost(2, "d1"), completed(3, "d1"), complete(5, 6, "d2", linOutput{}), inFlight(7)},
		},
		{
			name: "acknowledged claim lost",
			ops:  []porcupine.Operation{claim, notFound},
		},
		{
			name:  "failed completion lost, then completed again",
			ops:   []porcupine.Operation{claim, complete(2, never, "d1", unknown), lost(2, "d1"), completed(3, "d1"), inFlight(5), complete(7, 8, "d2", linOutput{}), completed(9, "d2")},
			legal: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ops := make([]porcupine.Operation, len(tc.ops))
			for i, o := range tc.ops {
				in := o.Input.(linInput)
				in.lossy = true
				o.Input = in
				ops[i] = o
			}
			if got := porcupine.CheckOperations(linModel(), ops); got != tc.legal {
				t.Fatalf("linearizable: %t, want %t", got, tc.legal)
			}
			if !tc.legal {
				return
			}
			// Without Failover, the model allows no loss.
			var strict []porcupine.Operation
			for _, o := range tc.ops {
				if o.Input.(linInput).op != opCompleteLost {
					strict = append(strict, o)
				}
			}
			if porcupine.CheckOperations(linModel(), strict) {
				t.Fatal("linearizable without Failover, want not")
			}
		})
	}
}

// op is one operation of a history written by hand.
func op(client int, in linInput, out linOutput, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}
