package jetstreamidempotency

import "testing"

// TestTermReasons: TermWithReason from 2.10.4 on; anything older, or a
// version that cannot be read, gets a plain Term.
func TestTermReasons(t *testing.T) {
	t.Parallel()
	for version, want := range map[string]bool{
		"2.10.4": true, "2.10.5": true, "2.11.0": true, "2.15.2": true, "3.0.0": true, "2.11.0-beta.1": true,
		"2.10.3": false, "2.9.10": false, "2.9.0": false, "1.99.99": false, "2.10.4-RC.1": false,
		"": false, "2.10": false, "v2.10.4": false, "2.x.4": false,
	} {
		if got := termReasons(version); got != want {
			t.Errorf("termReasons(%q) = %v, want %v", version, got, want)
		}
	}
}
