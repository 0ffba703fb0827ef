package faultproxy_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer is a line echo server on loopback; every line it receives is
// also sent on got.
type echoServer struct {
	ln  net.Listener
	got chan string
	wg  sync.WaitGroup
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, got: make(chan string, 100)}
	var mu sync.Mutex
	var conns []net.Conn
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					s.got <- line
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func startProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// dialer is a connection through the proxy with a line reader.
type dialer struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *faultproxy.Proxy) *dialer {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &dialer{Conn: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and reads the echo, within 10s.
func (d *dialer) roundTrip(line string) (string, error) {
	if _, err := d.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	_ = d.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := d.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

func TestForwards(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	if p.Target() != echo.ln.Addr().String() {
		t.Fatalf("Target() = %q", p.Target())
	}
	for i, c := range []*dialer{dial(t, p), dial(t, p)} {
		got, err := c.roundTrip("hello")
		if err != nil || got != "hello" {
			t.Fatalf("conn %d: %q, %v; want the echo", i, got, err)
		}
	}
	if n := p.Conns(); n != 2 {
		t.Fatalf("Conns() = %d, want 2", n)
	}
	if n := p.Accepted(); n != 2 {
		t.Fatalf("Accepted() = %d, want 2", n)
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	const d = 50 * time.Millisecond
	p.SetLatency(d)
	c := dial(t, p)
	start := time.Now()
	if got, err := c.roundTrip("slow"); err != nil || got != "slow" {
		t.Fatalf("%q, %v", got, err)
	}
	if took := time.Since(start); took < 2*d {
		t.Fatalf("round trip took %v, want at least %v (latency each way)", took, 2*d)
	}
	p.SetLatency(0)
	if got, err := c.roundTrip("fast"); err != nil || got != "fast" {
		t.Fatalf("%q, %v", got, err)
	}
}

func TestStall(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	c := dial(t, p)
	if _, err := c.roundTrip("before"); err != nil {
		t.Fatal(err)
	}
	<-echo.got
	p.Stall()
	p.Stall() // idempotent
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a stalled link: %v, want a timeout", err)
	}
	select {
	case line := <-echo.got:
		t.Fatalf("the target received %q through a stalled link", line)
	default:
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("Conns() = %d while stalled, want 1: a stall closes nothing", n)
	}
	// A new connection is accepted but stalled too.
	c2 := dial(t, p)
	if _, err := c2.Write([]byte("new\n")); err != nil {
		t.Fatal(err)
	}

	p.Resume()
	p.Resume() // idempotent
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := c.r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after Resume: %q, %v; want the held line delivered", got, err)
	}
	_ = c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := c2.r.ReadString('\n'); err != nil || got != "new\n" {
		t.Fatalf("new conn after Resume: %q, %v", got, err)
	}
}

func TestCutAll(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	c := dial(t, p)
	if _, err := c.roundTrip("x"); err != nil {
		t.Fatal(err)
	}
	if n := p.CutAll(); n != 1 {
		t.Fatalf("CutAll() = %d, want 1", n)
	}
	if _, err := c.roundTrip("y"); err == nil {
		t.Fatal("a cut connection still answered")
	}
	if p.Cuts() != 1 {
		t.Fatalf("Cuts() = %d, want 1", p.Cuts())
	}
	// New connections work after a cut.
	if got, err := dial(t, p).roundTrip("z"); err != nil || got != "z" {
		t.Fatalf("after CutAll: %q, %v", got, err)
	}
}

// TestStallThenCut: a cut wakes pumps held by a stall, so nothing hangs.
func TestStallThenCut(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	p.Stall()
	c := dial(t, p)
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	waitConns(t, p, 1)
	p.CutAll()
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal("read after a cut succeeded")
	}
	waitConns(t, p, 0)
}

func TestCutNextReply(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	c := dial(t, p)
	p.CutNextReply(1)
	if _, err := c.roundTrip("ran"); err == nil {
		t.Fatal("the reply came through an armed cut")
	}
	if got := <-echo.got; got != "ran\n" {
		t.Fatalf("target got %q, want the request: the command must reach it", got)
	}
	if got, err := dial(t, p).roundTrip("next"); err != nil || got != "next" {
		t.Fatalf("after the cut: %q, %v; want one cut only", got, err)
	}
	if p.Cuts() != 1 {
		t.Fatalf("Cuts() = %d, want 1", p.Cuts())
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p, err := faultproxy.New(echo.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p.Stall()
	p.SetLatency(time.Hour)
	c := dial(t, p)
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	waitConns(t, p, 1)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = p.Close() // safe twice
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal("read after Close succeeded")
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_ = c.Close()
		t.Fatal("dial after Close succeeded")
	}
}

func TestTargetDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := startProxy(t, addr)
	c := dial(t, p)
	if _, err := c.roundTrip("x"); err == nil {
		t.Fatal("a proxy to a closed port answered")
	}
}

// waitConns polls until the proxy has n live connections.
func waitConns(t *testing.T, p *faultproxy.Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Conns() != n {
		if time.Now().After(deadline) {
			t.Fatalf("Conns() = %d, want %d", p.Conns(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
