package main

import (
	"strings"
	"testing"
)

// TestStory runs the demo: every order that exists ships once, the one
// that does not runs once and is terminated with its stored error, and the
// slow one is delivered once.
func TestStory(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"Msg-Id order-1 again: JetStream dropped it as a duplicate",
		"Order-Id:1, delivery 1: shipped before, not run, ack",
		"Order-Id:2, delivery 2: shipped, ack",
		"Order-Id:3, delivery 1: ran, failed (rpc error: code = InvalidArgument desc = no such product), term",
		"Order-Id:4, delivery 1: shipped, ack",
		"Shipped: order 1 ×1, order 2 ×1, order 3 ×0, order 4 ×1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the story lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "Order-Id:4,"); n != 1 {
		t.Errorf("order 4 delivered %d times, want once:\n%s", n, out.String())
	}
}
