package natstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RequireBinaryEnv is the environment variable that turns a missing
// nats-server binary into a test failure instead of a skip. CI sets it to
// "1".
const RequireBinaryEnv = "IDEMPOTENCY_REQUIRE_NATS_BINARY"

// Binary is a nats-server process started by [StartBinary].
type Binary struct {
	// URL is the server's client URL, on a loopback port of its own.
	URL string
	// Version is the version the binary reports, such as "2.9.10".
	Version string
}

// StartBinary starts the machine's nats-server binary (from PATH, or
// /usr/sbin where Debian's package puts it) with JetStream on a free
// loopback port, keeping its streams in a temporary directory, and stops
// it when the test ends. It tests against the server version the machine
// runs (Debian 12's is 2.9.10), which the embedded server of [Start]
// cannot. When no binary is found it skips the test with a hint on how to
// install one, or fails it when [RequireBinaryEnv] is "1".
func StartBinary(tb testing.TB) *Binary {
	tb.Helper()
	bin, err := lookBinary()
	if err != nil {
		const msg = "natstest: the nats-server binary is needed for this test " +
			"(install it with: apt-get install nats-server): %v"
		if os.Getenv(RequireBinaryEnv) == "1" {
			tb.Fatalf(msg+" (%s=1, so this fails instead of skipping)", err, RequireBinaryEnv)
		}
		tb.Skipf(msg, err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		tb.Fatalf("natstest: %s --version: %v", bin, err)
	}
	version := strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server:")), "v")

	dir := tb.TempDir()
	// Port -1 is a random free port, which the server writes to a ports
	// file named after its process id: no port is picked and then lost to
	// another process.
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", filepath.Join(dir, "jetstream"),
		"--ports_file_dir", dir, "-l", filepath.Join(dir, "nats-server.log"))
	if err := cmd.Start(); err != nil {
		tb.Fatalf("natstest: starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	url, err := waitPorts(dir, cmd.Process.Pid, exited)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "nats-server.log"))
		tb.Fatalf("natstest: %s did not start: %v\n%s", bin, err, log)
	}
	return &Binary{URL: url, Version: version}
}

// lookBinary finds nats-server on PATH, else in /usr/sbin (not on every
// user's PATH).
func lookBinary() (string, error) {
	bin, err := exec.LookPath("nats-server")
	if err == nil {
		return bin, nil
	}
	if _, serr := os.Stat("/usr/sbin/nats-server"); serr == nil {
		return "/usr/sbin/nats-server", nil
	}
	return "", err
}

// waitPorts waits for the ports file of the server with process id pid,
// written once it accepts connections, and returns its client URL.
func waitPorts(dir string, pid int, exited <-chan struct{}) (string, error) {
	file := filepath.Join(dir, "nats-server_"+strconv.Itoa(pid)+".ports")
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return "", errors.New("the process exited")
		default:
		}
		if b, err := os.ReadFile(file); err == nil {
			var ports struct {
				Nats []string `json:"nats"`
			}
			if json.Unmarshal(b, &ports) == nil && len(ports.Nats) > 0 {
				return ports.Nats[0], nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", fmt.Errorf("no ports file after %v", readyTimeout)
}
