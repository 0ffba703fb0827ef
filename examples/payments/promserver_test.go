package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requirePrometheusEnv is the environment variable that turns a missing
// prometheus or promtool binary into a test failure instead of a skip. CI
// sets it to "1".
const requirePrometheusEnv = "IDEMPOTENCY_REQUIRE_PROMETHEUS"

// rulesFile and dashboardFile are what a team loads, and rulesTestFiles
// promtool's unit tests of the rules.
var (
	rulesFile      = filepath.Join("..", "..", "deploy", "prometheus", "idempotency.rules.yml")
	rulesTestFiles = []string{
		filepath.Join("..", "..", "deploy", "prometheus", "idempotency.rules.test.yml"),
		filepath.Join("..", "..", "deploy", "prometheus", "idempotency.rules.sealed.test.yml"),
	}
	dashboardFile = filepath.Join("..", "..", "deploy", "grafana", "idempotency.json")
)

// lookPrometheus returns the path of the named binary of Debian's
// prometheus package (prometheus or promtool). When it is missing it skips
// the test with a hint on how to install it, or fails it when
// [requirePrometheusEnv] is "1".
func lookPrometheus(tb testing.TB, name string) string {
	tb.Helper()
	bin, err := exec.LookPath(name)
	if err == nil {
		return bin
	}
	const msg = "%s is needed for this test (install it with: apt-get install prometheus): %v"
	if os.Getenv(requirePrometheusEnv) == "1" {
		tb.Fatalf(msg+" (%s=1, so this fails instead of skipping)", name, err, requirePrometheusEnv)
	}
	tb.Skipf(msg, name, err)
	return ""
}

// promServer is a prometheus process started by [startPrometheus].
type promServer struct {
	url string // http://127.0.0.1:port
}

// startPrometheus starts the machine's prometheus on a free loopback port,
// with its data in a temporary directory, scraping target's /metrics as
// job "payments" and evaluating rules every interval, and stops it when
// the test ends. It never touches a system Prometheus.
func startPrometheus(t *testing.T, target string, interval time.Duration, rules string) *promServer {
	t.Helper()
	bin := lookPrometheus(t, "prometheus")
	rules, err := filepath.Abs(rules)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
rule_files: [%[2]q]
scrape_configs:
  - job_name: payments
    static_configs:
      - targets: [%[3]q]
`, interval, rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("prometheus log:\n%s", log)
		}
	})
	p := &promServer{url: "http://" + addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited before it was ready")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s: %v", err)
		}
	}
}

// freePort returns a loopback address whose port was free a moment ago.
// prometheus does not report the port it picks for :0.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query and returns its vector; a query that fails,
// or does not give a vector, fails the test.
func (p *promServer) query(t *testing.T, q string) []sample {
	t.Helper()
	var data struct {
		ResultType string   `json:"resultType"`
		Result     []sample `json:"result"`
	}
	p.get(t, "/api/v1/query?query="+url.QueryEscape(q), &data)
	if data.ResultType != "vector" {
		t.Fatalf("query %s: result type %q, want vector", q, data.ResultType)
	}
	return data.Result
}

// get reads an API endpoint's data into v; a status other than success
// fails the test.
func (p *promServer) get(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(p.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if body.Status != "success" {
		t.Fatalf("GET %s: %s: %s", path, body.Status, body.Error)
	}
	if err := json.Unmarshal(body.Data, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// value is a sample's value as a number.
func (s sample) value() float64 {
	str, _ := s.Value[1].(string)
	f, _ := strconv.ParseFloat(str, 64)
	return f
}

// waitFor polls Prometheus's API through missing, which returns what is
// not there yet, until it returns nothing (each round waits for the next
// scrape or evaluation), and fails the test if that takes over a minute.
func (p *promServer) waitFor(t *testing.T, missing func() []string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		m := missing()
		if len(m) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, empty or unhealthy:\n%s", strings.Join(m, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
