package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The rules a team loads pass promtool's check and its unit tests
// (deploy/prometheus/idempotency.rules*.test.yml: each alert firing on the
// series it is about, and quiet on the others).
func TestRulesPromtool(t *testing.T) {
	t.Parallel()
	promtool := lookPrometheus(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", rulesFile},
		append([]string{"test", "rules"}, rulesTestFiles...),
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// panelQuery is one query of a dashboard panel.
type panelQuery struct {
	panel, expr string
}

// dashboardQueries reads the Grafana dashboard and returns every panel's
// queries as Grafana sends them with every job chosen ($job as its "all"
// value, .+); a panel without a query, or not on the ${datasource}
// variable, fails the test.
func dashboardQueries(t *testing.T) []panelQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type datasource struct{ UID string }
	var d struct {
		Templating struct{ List []struct{ Name, Type string } }
		Panels     []struct {
			Title      string
			Datasource datasource
			Targets    []struct {
				Expr       string
				Datasource datasource
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if len(d.Templating.List) == 0 || d.Templating.List[0].Name != "datasource" || d.Templating.List[0].Type != "datasource" {
		t.Errorf("%s: the first variable is %+v, want the datasource variable", dashboardFile, d.Templating.List)
	}
	var qs []panelQuery
	for _, p := range d.Panels {
		if len(p.Targets) == 0 || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: %d queries on data source %q, want some on ${datasource}", p.Title, len(p.Targets), p.Datasource.UID)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: query %q on data source %q, want one on ${datasource}", p.Title, q.Expr, q.Datasource.UID)
			}
			qs = append(qs, panelQuery{panel: p.Title, expr: strings.ReplaceAll(q.Expr, "$job", ".+")})
		}
	}
	return qs
}

// Every alert's runbook_url points at a file of this repository and at a
// heading (or an <a id>) that it holds, as GitHub names headings.
func TestRulesRunbookLinks(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	urls := regexp.MustCompile(`runbook_url: https://github\.com/grpc-idempotency/idempotency/blob/main/(\S+)#(\S+)`).FindAllStringSubmatch(string(b), -1)
	if want := strings.Count(string(b), "runbook_url:"); len(urls) != want || want == 0 {
		t.Fatalf("%d runbook_url lines link into this repository with an anchor, want all %d", len(urls), want)
	}
	for _, u := range urls {
		doc, err := os.ReadFile(filepath.Join("..", "..", u[1]))
		if err != nil {
			t.Errorf("runbook_url %s#%s: %v", u[1], u[2], err)
			continue
		}
		if !slices.Contains(anchorsOf(string(doc)), u[2]) {
			t.Errorf("runbook_url %s#%s: no such heading", u[1], u[2])
		}
	}
}

var anchorTagRE = regexp.MustCompile(`<a id="([^"]+)">`)

// anchorsOf returns the anchors of a Markdown file: its headings as GitHub
// names them (lower case, punctuation dropped, spaces to hyphens) and its
// <a id> tags.
func anchorsOf(md string) []string {
	var anchors []string
	for _, line := range strings.Split(md, "\n") {
		if m := anchorTagRE.FindStringSubmatch(line); m != nil {
			anchors = append(anchors, m[1])
		}
		heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		slug := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, heading)
		anchors = append(anchors, slug)
	}
	return anchors
}
