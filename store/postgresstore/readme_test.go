package postgresstore_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEQuotesTheExample: the README's transactional handler is the
// Charge method of example_test.go, byte for byte, so it cannot rot.
func TestREADMEQuotesTheExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "func (p *payments) Charge("
	i := strings.Index(string(src), start)
	if i < 0 {
		t.Fatal("example_test.go has no Charge method")
	}
	n := strings.Index(string(src[i:]), "\n}\n")
	charge := string(src[i : i+n+2])
	if !strings.Contains(string(readme), charge) {
		t.Fatalf("README.md does not quote the Charge method of example_test.go verbatim:\n%s", charge)
	}
}
