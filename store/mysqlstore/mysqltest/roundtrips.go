package mysqltest

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// MySQL client commands the counter tells apart.
const (
	comQuit        = 0x01
	comQuery       = 0x03
	comStmtPrepare = 0x16
	comStmtExecute = 0x17
	comStmtClose   = 0x19
)

// RoundTrips counts, on the wire, the commands a pool sends that wait for
// an answer: a text query (COM_QUERY), the preparation of a statement
// (COM_STMT_PREPARE) and the execution of a prepared one
// (COM_STMT_EXECUTE, named by the SQL it was prepared with), each one round
// trip. Closing a statement and quitting wait for nothing and are not
// counted, nor is the connection handshake. It reads the protocol's
// packets as the driver writes them, so the pool must not use TLS or
// compression. Install it with [RoundTrips.Install].
type RoundTrips struct {
	// Match selects the commands counted, by a substring of their SQL
	// (every command when empty). Set it before the pool connects.
	Match string
	// OnCommand, when set, is called with each matching command as the
	// driver writes it, before its bytes go on the wire: a test can arm a
	// fault for that command's reply (see internal/test/faultproxy). Set it
	// before the pool connects.
	OnCommand func(Command)

	mu       sync.Mutex
	commands []Command
}

// Command is one command counted by a [RoundTrips].
type Command struct {
	// Kind is "query", "prepare", "execute" or "other".
	Kind string
	// SQL is the statement's text: the query, the statement prepared, or
	// the prepared statement executed.
	SQL string
}

// Install makes cfg's connections dial through r.
func (r *RoundTrips) Install(cfg *mysql.Config) {
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: c, r: r, stmts: map[uint32]string{}}, nil
	}
}

// Commands returns the matching commands sent since the last Reset, in
// order.
func (r *RoundTrips) Commands() []Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Command(nil), r.commands...)
}

// Count returns how many matching commands were sent since the last
// Reset: the round trips.
func (r *RoundTrips) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.commands))
}

// Statements returns how many matching statements were run (queries and
// executions, not preparations) since the last Reset.
func (r *RoundTrips) Statements() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, c := range r.commands {
		if c.Kind == "query" || c.Kind == "execute" {
			n++
		}
	}
	return n
}

// Reset forgets the commands counted so far.
func (r *RoundTrips) Reset() {
	r.mu.Lock()
	r.commands = nil
	r.mu.Unlock()
}

func (r *RoundTrips) add(c Command) {
	if !strings.Contains(c.SQL, r.Match) {
		return
	}
	r.mu.Lock()
	r.commands = append(r.commands, c)
	r.mu.Unlock()
	if r.OnCommand != nil {
		r.OnCommand(c)
	}
}

// countedConn parses the packets of one connection: those the client
// writes, to count its commands, and those the server answers, to learn
// the id of each statement prepared.
type countedConn struct {
	net.Conn
	r *RoundTrips

	mu        sync.Mutex
	out, in   []byte            // bytes of a packet not yet complete
	preparing string            // the SQL of a COM_STMT_PREPARE awaiting its answer
	awaiting  bool              // the next server packet answers preparing
	stmts     map[uint32]string // prepared statement id → SQL
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, p...)
	for {
		payload, seq, rest, ok := nextPacket(c.out)
		if !ok {
			break
		}
		c.out = rest
		if seq == 0 && len(payload) > 0 {
			c.command(payload)
		}
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.in = append(c.in, p[:n]...)
	for {
		payload, _, rest, ok := nextPacket(c.in)
		if !ok {
			break
		}
		c.in = rest
		if c.awaiting {
			c.awaiting = false
			if len(payload) >= 5 && payload[0] == 0x00 { // COM_STMT_PREPARE_OK
				c.stmts[binary.LittleEndian.Uint32(payload[1:5])] = c.preparing
			}
		}
	}
	c.mu.Unlock()
	return n, err
}

// command counts the command whose first packet is payload.
func (c *countedConn) command(payload []byte) {
	switch payload[0] {
	case comQuit, comStmtClose:
	case comQuery:
		c.r.add(Command{Kind: "query", SQL: string(payload[1:])})
	case comStmtPrepare:
		c.preparing, c.awaiting = string(payload[1:]), true
		c.r.add(Command{Kind: "prepare", SQL: c.preparing})
	case comStmtExecute:
		var sql string
		if len(payload) >= 5 {
			sql = c.stmts[binary.LittleEndian.Uint32(payload[1:5])]
		}
		c.r.add(Command{Kind: "execute", SQL: sql})
	default:
		c.r.add(Command{Kind: "other"})
	}
}

// nextPacket splits the first whole packet off b: its payload, its
// sequence id and the bytes after it.
func nextPacket(b []byte) (payload []byte, seq byte, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, 0, b, false
	}
	n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
	if len(b) < 4+n {
		return nil, 0, b, false
	}
	return b[4 : 4+n], b[3], b[4+n:], true
}
