package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// startAttempts bounds how often a process is started on a fresh port
	// when the previous one could not bind.
	startAttempts = 5
	// readyTimeout bounds the wait for a started process to answer.
	readyTimeout = 10 * time.Second
	// pollInterval is the pause between two readiness probes.
	pollInterval = 20 * time.Millisecond
	// clusterBusOffset is the distance between a cluster node's port and
	// its cluster bus port.
	clusterBusOffset = 10000
)

// process is one redis-server (or sentinel) process. Its methods are called
// from the test goroutine only.
type process struct {
	tb   testing.TB
	bin  string
	dir  string
	port int
	// args builds the command line for a port; it may write files in dir.
	args func(port int) []string
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait has returned
}

// startProcess starts a process on a free loopback port (with a free cluster
// bus port beside it when bus is set), retrying on another port when the
// start fails, and stops it in tb.Cleanup.
func startProcess(tb testing.TB, bin string, bus bool, args func(dir string, port int) []string) *process {
	tb.Helper()
	p := &process{tb: tb, bin: bin, dir: tb.TempDir()}
	p.args = func(port int) []string { return args(p.dir, port) }
	tb.Cleanup(p.stop)
	var errs []error
	for range startAttempts {
		port, err := freePort(bus)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		if err := p.startOn(port); err != nil {
			errs = append(errs, err)
			continue
		}
		return p
	}
	tb.Fatalf("redistest: %s did not start: %v", filepath.Base(bin), errors.Join(errs...))
	return nil
}

// addr returns the loopback address the process listens on.
func (p *process) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// startOn starts the process on port and waits until it answers as itself.
func (p *process) startOn(port int) error {
	cmd := exec.Command(p.bin, p.args(port)...)
	cmd.Dir = p.dir
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done, p.port = cmd, done, port
	if err := p.waitReady(); err != nil {
		p.stop()
		return fmt.Errorf("port %d: %w\n%s", port, err, p.logTail())
	}
	return nil
}

// waitReady polls the process with INFO until it answers with its own
// process id, it exits, or readyTimeout passes. Checking the process id
// makes sure the answer does not come from another server that took the
// port first.
func (p *process) waitReady() error {
	want := fmt.Sprintf("process_id:%d\r\n", p.cmd.Process.Pid)
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited: %v", p.cmd.ProcessState)
		default:
		}
		info, err := bulkCommand(p.addr(), "INFO server")
		switch {
		case err != nil:
			last = err
		case !strings.Contains(info, want):
			last = errors.New("another process answers on this port")
		default:
			return nil
		}
		time.Sleep(pollInterval)
	}
	return fmt.Errorf("not ready after %v: %w", readyTimeout, last)
}

// stop kills the process and waits until it has exited. It does nothing
// when the process is not running.
func (p *process) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// restart starts the process again on the port it had.
func (p *process) restart() {
	p.tb.Helper()
	p.stop()
	var err error
	for range startAttempts {
		if err = p.startOn(p.port); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.tb.Fatalf("redistest: restart on port %d: %v", p.port, err)
}

// logTail returns the end of the process log, for error messages.
func (p *process) logTail() string {
	b, err := os.ReadFile(filepath.Join(p.dir, logFile))
	if err != nil {
		return ""
	}
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}

// logFile is the name of the process log in its directory.
const logFile = "redis.log"

// baseArgs returns the arguments every process gets: loopback only, no
// persistence, files and log in dir.
func baseArgs(dir string, port int) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--logfile", filepath.Join(dir, logFile),
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
	}
}

// freePort returns a loopback port that was free a moment ago. With bus
// set, port+10000 (the cluster bus port) was free too.
func freePort(bus bool) (int, error) {
	var err error
	for range 100 {
		var l net.Listener
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		if bus {
			if port+clusterBusOffset > 65535 {
				_ = l.Close()
				continue
			}
			var lb net.Listener
			lb, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+clusterBusOffset)))
			if err != nil {
				_ = l.Close()
				continue
			}
			_ = lb.Close()
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port: %v", err)
}

// bulkCommand sends an inline command whose reply is a bulk string and
// returns that string. It is used to probe processes before any client is
// built, so it speaks just enough RESP for INFO and CLUSTER INFO.
func bulkCommand(addr, command string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(conn, command+"\r\n"); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return "", fmt.Errorf("%s: unexpected reply %q", command, line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return "", fmt.Errorf("%s: unexpected reply %q", command, line)
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
