package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// scrapeInterval is the test Prometheus's scrape and rule evaluation
// interval.
const scrapeInterval = 200 * time.Millisecond

// absentInScrape are the metrics, and what is computed from them, that the
// payments example does not produce: it seals no records. Their rules and
// panels must still run; promtool's tests cover their values.
var absentInScrape = []string{"idempotency_server_sealed_records_total", "idempotency:sealed_records:increase14d"}

// End to end: the payments example serves its OpenTelemetry metrics for
// Prometheus (-prometheus) over a real Redis; a real prometheus scrapes it
// and evaluates deploy/prometheus's rules, while calls replay, reuse a key
// and fail on a stopped Redis. Then every recording rule, alert expression
// and dashboard panel query runs against what was scraped: each succeeds,
// each metric it names was scraped, and each that the traffic feeds
// returns series; the store-errors alert is pending. The metric names of
// docs/observability.md are the ones scraped, no more, no fewer.
func TestPrometheusScrape(t *testing.T) {
	t.Parallel()
	panels := dashboardQueries(t)
	docNames := observabilityMetricNames(t)
	redis := redistest.StartServer(t)
	grpcLis, promLis := listen2(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var out syncBuffer
	go func() {
		done <- serve(ctx, config{RedisAddr: redis.Addr(), Logs: t.Output(), ReplayCache: 100}, listeners{grpc: grpcLis, prometheus: promLis}, &out)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	prom := startPrometheus(t, promLis.Addr().String(), scrapeInterval, rulesFile)

	cc, err := dialNoToken(grpcLis.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	pc := paymentsv1.NewPaymentsClient(cc)
	charge := func(key string, cents int64, want codes.Code) {
		t.Helper()
		_, err := pc.Charge(withKey(t.Context(), key), &paymentsv1.ChargeRequest{Customer: "alice", AmountCents: cents})
		if status.Code(err) != want {
			t.Fatalf("charge %s: %v, want %v", key, err, want)
		}
	}
	charge("k1", 100, codes.OK)                 // executed, and cached
	charge("k1", 100, codes.OK)                 // replayed from the replay cache
	charge("k1", 200, codes.FailedPrecondition) // key_reused
	// The store gauges read Stats at most once a minute: let a scrape read
	// them while Redis answers.
	prom.waitFor(t, func() []string {
		if len(prom.query(t, "idempotency_store_entries")) == 0 {
			return []string{"idempotency_store_entries"}
		}
		return nil
	})
	redis.Stop()
	charge("k2", 100, codes.Unavailable) // store_error: the call fails closed

	// Wait until what the traffic feeds has been scraped and evaluated.
	var rules []promRule
	prom.waitFor(t, func() (missing []string) {
		if len(prom.query(t, "idempotency:store_errors:ratio5m == 0.25")) == 0 {
			missing = append(missing, "the store error among 4 decisions, in idempotency:store_errors:ratio5m")
		}
		if len(prom.query(t, "idempotency_server_replay_cache_entries == 1 and on (job, instance) idempotency:replay_cache_fill:max == 0.01")) == 0 {
			missing = append(missing, "k1's outcome, the one entry of the replay cache of 100, in idempotency:replay_cache_fill:max")
		}
		rules = prom.rules(t)
		for _, r := range rules {
			if r.Health != "ok" {
				missing = append(missing, "rule "+r.Name+": health "+r.Health+" "+r.LastError)
			}
			if r.Type == "recording" && !absent(r.Name) && len(prom.query(t, r.Name)) == 0 {
				missing = append(missing, "recording rule "+r.Name)
			}
		}
		for _, p := range panels {
			if !absent(p.expr) && len(prom.query(t, p.expr)) == 0 {
				missing = append(missing, "panel "+p.panel+": "+p.expr)
			}
		}
		return missing
	})

	scraped := prom.metricNames(t)
	for _, r := range rules {
		for _, name := range metricsIn(r.Query) {
			if !absent(name) && len(prom.query(t, name)) == 0 {
				t.Errorf("rule %s names %s, which has no series", r.Name, name)
			}
		}
		if r.Type == "alerting" {
			got := prom.query(t, r.Query)
			if r.Name == "IdempotencyStoreErrors" && (len(got) != 1 || got[0].value() != 0.25) {
				t.Errorf("IdempotencyStoreErrors: %s gives %v, want one series of 0.25 (1 store error in 4 decisions)", r.Query, got)
			}
		}
	}
	for _, p := range panels {
		for _, name := range metricsIn(p.expr) {
			if !absent(name) && len(prom.query(t, name)) == 0 {
				t.Errorf("panel %q names %s, which has no series", p.panel, name)
			}
		}
	}
	if alerts := prom.query(t, `ALERTS{alertname="IdempotencyStoreErrors",alertstate="pending"}`); len(alerts) != 1 {
		t.Errorf("IdempotencyStoreErrors pending: %v, want one", alerts)
	}
	var ours []string
	for _, n := range scraped {
		if strings.HasPrefix(n, "idempotency_") {
			ours = append(ours, n)
		}
	}
	docScraped := slices.DeleteFunc(slices.Clone(docNames), absent)
	if !slices.Equal(ours, docScraped) || len(docScraped) == len(docNames) {
		t.Errorf("docs/observability.md#alerts-and-dashboard names\n  %v\nPrometheus scraped\n  %v\nand the example produces none of %v", docNames, ours, absentInScrape)
	}
}

// listen2 opens two loopback listeners, closed when the test ends.
func listen2(t *testing.T) (net.Listener, net.Listener) {
	t.Helper()
	var ls [2]net.Listener
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		ls[i] = l
	}
	return ls[0], ls[1]
}

// absent reports whether s names a metric the example does not produce.
func absent(s string) bool {
	return slices.ContainsFunc(absentInScrape, func(name string) bool { return strings.Contains(s, name) })
}

// metricNameRE matches the metric and recording rule names of this
// library, and ALERTS, in a query whose label matchers and grouping
// clauses were cut.
var (
	metricNameRE = regexp.MustCompile(`\b(idempotency[a-z0-9_:]*|ALERTS)\b`)
	notMetricRE  = regexp.MustCompile(`\{[^}]*\}|\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
)

// metricsIn returns the metric names a query reads.
func metricsIn(q string) []string {
	names := metricNameRE.FindAllString(notMetricRE.ReplaceAllString(q, " "), -1)
	slices.Sort(names)
	return slices.Compact(names)
}

// observabilityMetricNames returns the metric names in the table of
// docs/observability.md's "Alerts and dashboard" section, sorted.
func observabilityMetricNames(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Alerts and dashboard\n")
	if !ok {
		t.Fatal(`docs/observability.md has no "## Alerts and dashboard" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(idempotency_[a-z_]+)`").FindAllStringSubmatch(section, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return names
}

// promRule is a rule as /api/v1/rules reports it.
type promRule struct {
	Name, Query, Type, Health, LastError string
}

// rules returns every rule Prometheus loaded.
func (p *promServer) rules(t *testing.T) []promRule {
	t.Helper()
	var data struct{ Groups []struct{ Rules []promRule } }
	p.get(t, "/api/v1/rules", &data)
	var rules []promRule
	for _, g := range data.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("prometheus loaded no rules")
	}
	return rules
}

// metricNames returns the names of every series Prometheus holds, sorted.
func (p *promServer) metricNames(t *testing.T) []string {
	t.Helper()
	var names []string
	p.get(t, "/api/v1/label/__name__/values", &names)
	slices.Sort(names)
	return names
}
