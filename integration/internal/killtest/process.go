package killtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
)

// Process is one running server binary.
type Process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // held open: the binary exits when it closes
	lines  chan string    // its standard output, a line at a time; closed at EOF
	quit   chan struct{}  // closed by kill: lines are dropped from then on
	read   chan struct{}  // closed once standard output is read to EOF
	stderr lockedBuffer
	addr   string

	once    sync.Once
	waitErr error
}

// Start runs the binary bin with args and waits, within ctx, for it to
// serve. The process is killed when tb ends, if it still runs.
func Start(ctx context.Context, tb testing.TB, bin string, args ...string) *Process {
	tb.Helper()
	p := &Process{
		cmd:   exec.Command(bin, args...),
		lines: make(chan string),
		quit:  make(chan struct{}),
		read:  make(chan struct{}),
	}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("killtest: %v", err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		tb.Fatalf("killtest: %v", err)
	}
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("killtest: starting %s: %v", bin, err)
	}
	go p.readLines(stdout)
	tb.Cleanup(p.kill)
	line := p.next(ctx, tb, "listening line")
	addr, ok := killpoint.ParseListening(line)
	if !ok {
		tb.Fatalf("killtest: process %d wrote %q, want its listening line; its stderr:\n%s", p.PID(), line, p.stderr.String())
	}
	p.addr = addr
	return p
}

// readLines passes each line of the process's standard output to lines
// until EOF; after kill, it drops them.
func (p *Process) readLines(stdout io.Reader) {
	defer close(p.read)
	defer close(p.lines)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		select {
		case p.lines <- sc.Text():
		case <-p.quit:
		}
	}
	_, _ = io.Copy(io.Discard, stdout) // a line too long for the scanner
}

// next returns the next line the process writes, and fails tb when ctx
// ends first or the process exits, with what it wrote on its standard
// error.
func (p *Process) next(ctx context.Context, tb testing.TB, what string) string {
	tb.Helper()
	select {
	case line, ok := <-p.lines:
		if ok {
			return line
		}
		p.kill()
		tb.Fatalf("killtest: process %d exited (%v) before %s; its stderr:\n%s", p.PID(), p.waitErr, what, p.stderr.String())
	case <-ctx.Done():
		tb.Fatalf("killtest: process %d: no %s: %v; its stderr:\n%s", p.PID(), what, context.Cause(ctx), p.stderr.String())
	}
	return ""
}

// Addr is the address the process serves on.
func (p *Process) Addr() string { return p.addr }

// PID is the process's ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// WaitStop waits, within ctx, for the process to write that a call
// reached its kill point, and returns what the line says. The call stays
// blocked there until [Process.Kill].
func (p *Process) WaitStop(ctx context.Context, tb testing.TB) killpoint.Stop {
	tb.Helper()
	line := p.next(ctx, tb, "kill point line")
	s, ok := killpoint.ParseAt(line)
	if !ok {
		tb.Fatalf("killtest: process %d wrote %q, want a kill point line; its stderr:\n%s", p.PID(), line, p.stderr.String())
	}
	return s
}

// Kill kills the process with SIGKILL and waits for it to exit. It fails
// tb when the process had ended otherwise: then the kill proves nothing.
func (p *Process) Kill(tb testing.TB) {
	tb.Helper()
	p.kill()
	var exit *exec.ExitError
	if !errors.As(p.waitErr, &exit) || !killed(exit) {
		tb.Fatalf("killtest: process %d ended with %v, want killed by SIGKILL; its stderr:\n%s", p.PID(), p.waitErr, p.stderr.String())
	}
}

// Terminate stops the process as a deploy does, with SIGTERM, and waits
// within ctx for it to exit. It fails tb unless the process exits with
// status 0: it stops serving once the calls under way have ended, then
// closes its stores. Lines it writes meanwhile are dropped.
func (p *Process) Terminate(ctx context.Context, tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("killtest: SIGTERM to process %d: %v", p.PID(), err)
	}
	for exited := false; !exited; {
		select {
		case _, ok := <-p.lines:
			exited = !ok
		case <-ctx.Done():
			tb.Fatalf("killtest: process %d did not exit after SIGTERM: %v; its stderr:\n%s", p.PID(), context.Cause(ctx), p.stderr.String())
		}
	}
	p.once.Do(func() {
		close(p.quit)
		<-p.read
		_ = p.stdin.Close()
		p.waitErr = p.cmd.Wait()
	})
	if p.waitErr != nil {
		tb.Fatalf("killtest: process %d ended with %v after SIGTERM, want status 0; its stderr:\n%s", p.PID(), p.waitErr, p.stderr.String())
	}
}

// killed reports whether exit is that of a process ended by SIGKILL.
func killed(exit *exec.ExitError) bool {
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// kill sends SIGKILL, once, and reaps the process: standard output is
// read to its end before Wait, as os/exec requires.
func (p *Process) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		close(p.quit)
		<-p.read
		_ = p.stdin.Close()
		p.waitErr = p.cmd.Wait()
	})
}

// lockedBuffer is the process's standard error, written by os/exec's
// copying goroutine and read by failure messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
