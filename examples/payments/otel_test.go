package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// The -otel story: the same outcomes, then the spans and metrics as the
// SDK's stdout exporters print them, with the library's names on them.
func TestRunWithOTel(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	cfg := config{Logs: t.Output(), LogLevel: slog.LevelWarn, OTel: true}
	if err := run(t.Context(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantMarks(t, out.String(), "memory store")
	story, telemetry, ok := strings.Cut(out.String(), "\nOpenTelemetry, from the SDK's stdout exporters:")
	if !ok || !strings.Contains(story, "All outcomes as promised.") {
		t.Fatalf("no telemetry after the story:\n%s", out.String())
	}
	spanLines, metrics, ok := strings.Cut(telemetry, "\nMetrics:\n")
	if !ok {
		t.Fatalf("no metrics:\n%s", telemetry)
	}

	var replayed, retriedUnavailable bool
	for _, line := range strings.Split(spanLines, "\n")[1:] { // after the heading
		if line == "" {
			continue
		}
		var s span
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("span line %q: %v", line, err)
		}
		switch {
		case s.Name == "payments.v1.Payments/Charge" && s.attr("idempotency.outcome") == "replayed" && s.event("idempotency.replayed") != nil:
			replayed = true
		case s.Name == "Sent.payments.v1.Payments.Charge" && s.attr("idempotency.attempts") == "2":
			e := s.event("idempotency.retry")
			retriedUnavailable = retriedUnavailable || (e != nil && e.attr("idempotency.retry.reason") == "UNAVAILABLE")
		}
	}
	if !replayed || !retriedUnavailable {
		t.Errorf("spans: a replayed server span %t, a call span retried after UNAVAILABLE %t; want both", replayed, retriedUnavailable)
	}
	for _, name := range []string{`"idempotency.server.decisions"`, `"idempotency.server.store.duration"`, `"rpc.server.call.duration"`} {
		if !strings.Contains(metrics, name) {
			t.Errorf("metrics lack %s", name)
		}
	}
	if t.Failed() {
		t.Logf("telemetry:\n%s", telemetry)
	}
}

// span is the part of stdouttrace's JSON that the test reads.
type span struct {
	Name       string
	Attributes []keyValue
	Events     []spanEvent
}

type spanEvent struct {
	Name       string
	Attributes []keyValue
}

type keyValue struct {
	Key   string
	Value struct{ Value any }
}

func (s span) attr(key string) string { return valueOf(s.Attributes, key) }

func (s span) event(name string) *spanEvent {
	for i := range s.Events {
		if s.Events[i].Name == name {
			return &s.Events[i]
		}
	}
	return nil
}

func (e *spanEvent) attr(key string) string { return valueOf(e.Attributes, key) }

func valueOf(kvs []keyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			b, _ := json.Marshal(kv.Value.Value)
			return strings.Trim(string(b), `"`)
		}
	}
	return ""
}
