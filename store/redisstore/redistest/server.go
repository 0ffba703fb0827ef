package redistest

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// Server is a standalone redis-server started by [StartServer]. Its methods
// are for the test goroutine.
type Server struct {
	tb   testing.TB
	proc *process
	// maxmemory is the limit before FillMemory lowered it, restored by
	// FreeMemory.
	maxmemory string
}

// StartServer starts a standalone redis-server on a free loopback port and
// stops it in tb.Cleanup. Extra redis-server arguments (for example
// "--maxmemory", "1mb") are appended to the defaults.
func StartServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	bin, _ := Require(tb)
	proc := startProcess(tb, bin, false, func(dir string, port int) []string {
		return append(baseArgs(dir, port), args...)
	})
	return &Server{tb: tb, proc: proc}
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across [Server.Restart].
func (s *Server) Addr() string { return s.proc.addr() }

// Options returns fresh client options for the server, to adjust before
// passing them to redis.NewClient; the caller closes such a client.
func (s *Server) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr()}
}

// Client returns a new client for the server, closed in tb.Cleanup before
// the server stops. Each call returns a distinct client, so hooks added to
// one do not see the others' traffic.
func (s *Server) Client() *redis.Client {
	rdb := redis.NewClient(s.Options())
	s.tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Stop kills the server and waits until it has exited; clients then get
// errors. Data is lost: persistence is off.
func (s *Server) Stop() { s.proc.stop() }

// Restart starts the server again, empty, on the same port, stopping it
// first if it is running. Existing clients reconnect on their next command.
func (s *Server) Restart() {
	s.tb.Helper()
	s.proc.restart()
}
