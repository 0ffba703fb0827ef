package sqlitestore_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, or, when the environment asks for it, the
// helper process of TestManyProcessesOneFile (see multiprocess_test.go)
// or of TestInvalidationsAcrossProcesses (see purgeprocess_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(claimerMain())
	}
	if os.Getenv(subscriberEnv) != "" {
		os.Exit(subscriberMain())
	}
	goleak.VerifyTestMain(m)
}
