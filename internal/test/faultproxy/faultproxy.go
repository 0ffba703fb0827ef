// Package faultproxy is a fault-injecting TCP proxy for tests on loopback.
// It sits between a client (for example a go-redis client) and a server
// (for example redis-server) and can, at any moment and for every live
// connection:
//
//   - add latency to every chunk of bytes it forwards ([Proxy.SetLatency]);
//   - stall: keep connections open but stop forwarding ([Proxy.Stall],
//     [Proxy.Resume]);
//   - cut every live connection at once ([Proxy.CutAll]);
//   - cut a connection mid-command: forward the next request to the server,
//     then drop the server's reply and cut the connection, so the command
//     ran but the client never hears of it ([Proxy.CutNextReply]).
//
// Each accepted connection gets one pump goroutine per direction. Bytes a
// pump has read before a fault are forwarded once the fault lifts, as a
// real network would deliver them late; a cut drops them. [Proxy.Close]
// stops the listener, cuts every connection and waits for every goroutine
// it started, so tests that check for leaked goroutines pass.
//
// It is written for tests: it favours clear behaviour over throughput.
package faultproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds the dial to the target for each accepted connection.
const dialTimeout = 5 * time.Second

// bufSize is the largest chunk a pump reads and forwards at once.
const bufSize = 32 << 10

// Proxy forwards TCP connections from a loopback listener to a target
// address, injecting faults. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener

	latency   atomic.Int64 // time.Duration added before each chunk
	cutReply  atomic.Int64 // replies still to drop, each cutting its connection
	accepted  atomic.Int64
	cuts      atomic.Int64
	closeOnce sync.Once
	done      chan struct{} // closed by Close
	wg        sync.WaitGroup

	mu      sync.Mutex
	conns   map[*link]struct{}
	resumed chan struct{} // closed while forwarding; open while stalled
}

// New starts a proxy that listens on a free loopback port and forwards to
// target ("host:port"). The caller must call [Proxy.Close].
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		target:  target,
		ln:      ln,
		done:    make(chan struct{}),
		conns:   make(map[*link]struct{}),
		resumed: make(chan struct{}),
	}
	close(p.resumed)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients dial, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// SetLatency delays every chunk forwarded from now on, in both directions,
// by d; 0 turns latency off. A request and its reply are each delayed, so a
// round trip takes at least 2·d. Chunks on one connection keep their order.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(max(d, 0))) }

// Stall stops forwarding on every connection, live and new, without closing
// any: clients see a link that accepts bytes and never answers. New
// connections are still accepted and dialed through. [Proxy.Resume] lifts
// it. Calling Stall on a stalled proxy does nothing.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
		p.resumed = make(chan struct{})
	default:
	}
}

// Resume ends a [Proxy.Stall]: bytes held back are forwarded, in order, on
// the connections that are still open. Calling it on a proxy that is not
// stalled does nothing.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
	default:
		close(p.resumed)
	}
}

// CutAll closes every live connection at once, both sides, and returns how
// many it cut. Bytes in transit are lost. New connections are accepted as
// usual afterwards.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.cut()
	}
	p.cuts.Add(int64(len(links)))
	return len(links)
}

// CutNextReply arms n mid-command cuts: each of the next n chunks coming
// back from the target is dropped and its connection cut. The request that
// caused the reply has reached the target, so the command ran; the client
// sees a broken connection instead of its answer.
func (p *Proxy) CutNextReply(n int) { p.cutReply.Add(int64(n)) }

// ArmedCuts returns how many cuts armed by [Proxy.CutNextReply] still wait
// for a reply to drop. A test that arms cuts at a steady pace can arm the
// next one only once this is 0, so that cuts do not pile up while little
// traffic flows (every reply would then be dropped).
func (p *Proxy) ArmedCuts() int64 { return p.cutReply.Load() }

// Conns returns the number of live connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Cuts returns how many connections the proxy has cut on purpose, by
// [Proxy.CutAll] or [Proxy.CutNextReply].
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

// Close stops accepting, cuts every connection and waits until every
// goroutine of the proxy has returned. It is safe to call more than once.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.done)
		err = p.ln.Close()
		p.CutAll()
		p.wg.Wait()
	})
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for client connection c and starts its pumps.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	l := &link{client: c, server: up, done: make(chan struct{})}
	p.mu.Lock()
	select {
	case <-p.done: // closed while dialing
		p.mu.Unlock()
		l.cut()
		return
	default:
	}
	p.conns[l] = struct{}{}
	p.mu.Unlock()

	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); p.pump(l, c, up, false) }()
	go func() { defer pumps.Done(); p.pump(l, up, c, true) }()
	pumps.Wait()
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// pump copies from src to dst until either side fails or the link is cut;
// reply is set for the target-to-client direction.
func (p *Proxy) pump(l *link, src, dst net.Conn, reply bool) {
	defer l.cut()
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(l) {
				return
			}
			if reply && p.takeReplyCut() {
				p.cuts.Add(1)
				return // drops the chunk; the deferred cut closes both sides
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// EOF or a failure; half-close is not worth modelling, so
			// either ends the link.
			return
		}
	}
}

// gate waits out the latency and any stall before a chunk is forwarded. It
// returns false when the link is cut or the proxy closed meanwhile.
func (p *Proxy) gate(l *link) bool {
	if d := time.Duration(p.latency.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-l.done:
			t.Stop()
			return false
		}
	}
	p.mu.Lock()
	resumed := p.resumed
	p.mu.Unlock()
	select {
	case <-resumed:
		return true
	case <-l.done:
		return false
	}
}

// takeReplyCut consumes one armed reply cut, if any.
func (p *Proxy) takeReplyCut() bool {
	for {
		n := p.cutReply.Load()
		if n <= 0 {
			return false
		}
		if p.cutReply.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// link is one proxied connection: the client's side and the target's side.
type link struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{} // closed when the link is cut
}

// cut closes both sides and wakes any pump waiting at the gate.
func (l *link) cut() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}
