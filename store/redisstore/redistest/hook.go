package redistest

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RoundTrips is a redis.Hook that counts round trips: each processed
// command counts one, and each pipeline or transaction counts one however
// many commands it holds. Attach it with AddHook, or with
// [RoundTrips.Attach]; it is safe for concurrent use. Its zero value is
// ready to use.
//
// It sees what the client it is attached to sends. [RoundTrips.Attach]
// counts what a store sends on a Cluster too, where the
// store talks to each master's client. go-redis runs the handshake of each
// new connection (HELLO, AUTH, CLIENT SETINFO, SELECT, READONLY) through
// the hooks too, and a Cluster client asks its nodes for the slot map
// (CLUSTER SLOTS) and command table (COMMAND); those round trips belong to
// the client, not to a call, so they are counted apart, in
// [RoundTrips.Handshakes], and left out of Count and Commands.
type RoundTrips struct {
	mu         sync.Mutex
	count      int
	commands   int
	handshakes int
	names      []string // the first maxNames command names since Reset
	nodes      nodeHooks
}

// maxNames bounds the names RoundTrips keeps, so a benchmark that counts
// millions of round trips does not grow without bound.
const maxNames = 1000

var _ redis.Hook = (*RoundTrips)(nil)

// Attach adds r to rdb. On a redis.ClusterClient it adds r to the client
// of every node, those known now and those the client meets later, since
// a store sends its commands through the node clients; each round trip is
// then counted once, on the node it went to.
func (r *RoundTrips) Attach(ctx context.Context, rdb redis.UniversalClient) error {
	return r.nodes.attach(ctx, rdb, r)
}

// DialHook passes dials through uncounted.
func (r *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts one round trip per command.
func (r *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record(cmd.Name(), 1, isHandshake(cmd))
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts one round trip per pipeline.
func (r *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		handshake := true
		for i, cmd := range cmds {
			names[i] = cmd.Name()
			handshake = handshake && isHandshake(cmd)
		}
		r.record("pipeline("+strings.Join(names, ",")+")", len(cmds), handshake)
		return next(ctx, cmds)
	}
}

// isHandshake reports whether cmd is one go-redis sends to set up a new
// connection, or to learn a Cluster's slot map and command table.
func isHandshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "auth", "client", "select", "readonly", "cluster", "command":
		return true
	}
	return false
}

func (r *RoundTrips) record(name string, commands int, handshake bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if handshake {
		r.handshakes++
		return
	}
	r.count++
	r.commands += commands
	if len(r.names) < maxNames {
		r.names = append(r.names, name)
	}
}

// Handshakes returns the number of connection handshake round trips since
// the last Reset.
func (r *RoundTrips) Handshakes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handshakes
}

// Count returns the number of round trips since the last Reset, not
// counting connection handshakes.
func (r *RoundTrips) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// CommandCount returns the number of commands sent in the round trips
// Count counts: one for a command sent alone, the length of a pipeline.
func (r *RoundTrips) CommandCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commands
}

// Commands returns the command name of each round trip since the last
// Reset, in order ("pipeline(a,b)" for a pipeline), for failure messages;
// at most the first 1000.
func (r *RoundTrips) Commands() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

// Reset sets the count back to zero.
func (r *RoundTrips) Reset() {
	r.mu.Lock()
	r.count, r.commands, r.handshakes, r.names = 0, 0, 0, nil
	r.mu.Unlock()
}
