package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// client is what requests are sent through: the caller's go-redis client,
// or the client of one Cluster node.
type client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Pipeline() redis.Pipeliner
}

// newRequest returns a request for the native command args on key.
func newRequest(ctx context.Context, key string, wait bool, args ...any) *request {
	return &request{ctx: ctx, key: key, wait: wait, cmd: redis.NewCmd(ctx, args...)}
}

// newScriptRequest returns a request that runs sc on key with the
// arguments first and rest (every script takes at least one), by EVALSHA.
func newScriptRequest(ctx context.Context, sc *script, key string, wait bool, first any, rest ...any) *request {
	args := make([]any, 0, 5+len(rest))
	args = append(append(args, "evalsha", sc.sha, 1, key, first), rest...)
	return &request{ctx: ctx, key: key, wait: wait, script: sc, cmd: redis.NewCmd(ctx, args...)}
}

// do sends r, through the batcher of the node that owns its key unless
// pipelining is off, and returns once r holds its results. An error means
// r holds none: wasSent then says whether its command went out (and may
// run) or not.
func (s *Store) do(ctx context.Context, r *request) (wasSent bool, err error) {
	c, b, err := s.route(ctx, r.key)
	if err != nil {
		return false, err
	}
	if b == nil {
		s.send(ctx, c, []*request{r})
		return true, nil
	}
	return b.do(r)
}

// send sends reqs to c in one round trip, then retries with EVAL the
// scripts c did not know (NOSCRIPT), and on a Cluster follows the MOVED
// and ASK redirects of the requests whose key lives elsewhere.
func (s *Store) send(ctx context.Context, c client, reqs []*request) {
	s.exec(ctx, c, reqs, false)
	s.evalMissing(ctx, c, reqs, false)
	if s.cluster != nil {
		s.followRedirects(ctx, reqs)
	}
}

// exec sends reqs to c: one command alone as itself, anything else as one
// pipeline, each command preceded by ASKING when asking is set, and ended
// by one WAIT when a request asks for it. One WAIT covers every write
// before it on its connection, so a batch needs one.
func (s *Store) exec(ctx context.Context, c client, reqs []*request, asking bool) {
	if len(reqs) == 1 && !asking && !reqs[0].wait {
		_ = c.Process(ctx, reqs[0].cmd)
		return
	}
	p := c.Pipeline()
	wait := false
	for _, r := range reqs {
		if asking {
			_ = p.Process(ctx, redis.NewCmd(ctx, "asking"))
		}
		_ = p.Process(ctx, r.cmd)
		wait = wait || r.wait
	}
	var w *redis.IntCmd
	if wait {
		w = redis.NewIntCmd(ctx, "wait", s.minReplicas, s.waitTimeout.Milliseconds())
		_ = p.Process(ctx, w)
	}
	_, _ = p.Exec(ctx) // every command carries its own result
	if w == nil {
		return
	}
	acks, err := w.Result()
	for _, r := range reqs {
		if r.wait {
			r.acks, r.waitErr = acks, err
		}
	}
}

// evalMissing sends again, with EVAL, the scripts that c answered
// NOSCRIPT: c had not loaded them yet (a first run, a restart, a SCRIPT
// FLUSH). This is the one extra round trip the store contract allows.
func (s *Store) evalMissing(ctx context.Context, c client, reqs []*request, asking bool) {
	var missing []*request
	for _, r := range reqs {
		if r.script != nil && redis.HasErrorPrefix(r.cmd.Err(), "NOSCRIPT") {
			args := r.cmd.Args() // evalsha, sha, 1, key, the script's arguments
			args[0], args[1] = "eval", r.script.src
			r.cmd = redis.NewCmd(ctx, args...)
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		s.exec(ctx, c, missing, asking)
	}
}

// isRedisError reports whether err is a reply of Redis (as opposed to a
// network or client error).
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
