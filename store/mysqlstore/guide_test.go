package mysqlstore_test

import (
	"os"
	"strings"
	"testing"
)

// TestGuideQuotesTheExample: the stores guide's MySQL transactional handler
// is the Charge method of example_test.go, byte for byte, so it cannot rot.
func TestGuideQuotesTheExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile("../../docs/stores.md")
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
	if !strings.Contains(string(guide), charge) {
		t.Fatalf("docs/stores.md does not quote the Charge method of example_test.go verbatim:\n%s", charge)
	}
}
