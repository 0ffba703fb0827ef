package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/VictoriaMetrics/metrics"

	"github.com/grpc-idempotency/idempotency"
)

// Metric names. They follow Prometheus conventions, so any scraper reads
// them from [meter.writePrometheus].
const (
	decisionsMetric = "idempotency_decisions_total"
	storeTimeMetric = "idempotency_store_duration_seconds"
	retriesMetric   = "idempotency_client_retries_total"
	attemptsMetric  = "payments_client_attempts_total"
)

// meter counts idempotency decisions with github.com/VictoriaMetrics/metrics.
// Each meter has its own metrics.Set, so runs and tests never share counts.
type meter struct {
	set *metrics.Set
}

func newMeter() *meter { return &meter{set: metrics.NewSet()} }

// record counts one server decision and the time it spent in the store.
func (m *meter) record(e idempotency.Event) {
	m.set.GetOrCreateCounter(decisionName(e.Method, e.Decision)).Inc()
	m.set.GetOrCreateHistogram(fmt.Sprintf(`%s{outcome=%q}`, storeTimeMetric, e.Decision)).Update(e.StoreTime.Seconds())
}

// decisions returns how many decisions o were made for method.
func (m *meter) decisions(method string, o idempotency.Decision) uint64 {
	return m.set.GetOrCreateCounter(decisionName(method, o)).Get()
}

// retried counts one retry made by the client interceptor.
func (m *meter) retried() { m.set.GetOrCreateCounter(retriesMetric).Inc() }

// retries returns how many retries the client interceptor made.
func (m *meter) retries() uint64 { return m.set.GetOrCreateCounter(retriesMetric).Get() }

// attempted counts one attempt of method sent on the wire.
func (m *meter) attempted(method string) {
	m.set.GetOrCreateCounter(fmt.Sprintf(`%s{method=%q}`, attemptsMetric, method)).Inc()
}

// attempts returns how many attempts of method were sent.
func (m *meter) attempts(method string) uint64 {
	return m.set.GetOrCreateCounter(fmt.Sprintf(`%s{method=%q}`, attemptsMetric, method)).Get()
}

func decisionName(method string, o idempotency.Decision) string {
	return fmt.Sprintf(`%s{method=%q,outcome=%q}`, decisionsMetric, method, o)
}

// writePrometheus writes every metric in the Prometheus text format.
func (m *meter) writePrometheus(w io.Writer) { m.set.WritePrometheus(w) }

// writeCounters writes the non-zero counters, one per line with prefix,
// leaving out the histogram buckets.
func (m *meter) writeCounters(w io.Writer, prefix string) error {
	var buf bytes.Buffer
	m.set.WritePrometheus(&buf)
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		line := sc.Text()
		counter := strings.HasPrefix(line, decisionsMetric+"{") ||
			strings.HasPrefix(line, retriesMetric+" ") || strings.HasPrefix(line, attemptsMetric+"{")
		if !counter || strings.HasSuffix(line, " 0") {
			continue
		}
		if _, err := fmt.Fprintln(w, prefix+line); err != nil {
			return err
		}
	}
	return sc.Err()
}
