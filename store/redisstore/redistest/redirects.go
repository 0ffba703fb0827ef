package redistest

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Redirects is a redis.Hook that counts the MOVED and ASK replies a client
// receives, by command name: the proof that a client met a Cluster whose
// slots were moving. Attach it with [Redirects.Attach]; it is safe for
// concurrent use, and its zero value is ready to use.
type Redirects struct {
	mu     sync.Mutex
	counts map[string]int // "MOVED set", "ASK evalsha", ...
	nodes  nodeHooks
}

var _ redis.Hook = (*Redirects)(nil)

// Attach adds r to rdb, and on a redis.ClusterClient to the client of
// every node, known now or met later, where redirects are answered.
func (r *Redirects) Attach(ctx context.Context, rdb redis.UniversalClient) error {
	return r.nodes.attach(ctx, rdb, r)
}

// DialHook passes dials through.
func (r *Redirects) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts the redirect a command got.
func (r *Redirects) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.record(cmd.Name(), err)
		return err
	}
}

// ProcessPipelineHook counts the redirects the commands of a pipeline got.
func (r *Redirects) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			r.record(cmd.Name(), cmd.Err())
		}
		return err
	}
}

func (r *Redirects) record(name string, err error) {
	if err == nil {
		return
	}
	kind, _, _ := strings.Cut(err.Error(), " ")
	if kind != "MOVED" && kind != "ASK" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	r.counts[kind+" "+name]++
}

// Count returns how many replies of kind ("MOVED" or "ASK") commands named
// name got; an empty name counts every command.
func (r *Redirects) Count(kind, name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, c := range r.counts {
		k, cmd, _ := strings.Cut(k, " ")
		if k == kind && (name == "" || cmd == name) {
			n += c
		}
	}
	return n
}

// String lists the counts, for logs.
func (r *Redirects) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for k, c := range r.counts {
		parts = append(parts, k+"="+strconv.Itoa(c))
	}
	return strings.Join(parts, " ")
}
