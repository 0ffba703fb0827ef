package redistest

import (
	"bytes"
	"context"
	"strconv"
	"strings"
)

// fillValueSize is the size of each value [Server.FillMemory] writes.
const fillValueSize = 64 << 10

// fillLimit bounds the values [Server.FillMemory] writes (64 MiB in all),
// so a server started without a small maxmemory fails the test instead
// of eating the machine's memory.
const fillLimit = 1024

// FillMemory writes 64 KiB values under the keys prefix0, prefix1, … until
// the server refuses a write for lack of memory (an OOM error), and
// returns how many it wrote. The server must run with a small maxmemory
// (a few megabytes) and maxmemory-policy noeviction, for example
// StartServer(tb, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction").
//
// A server just over maxmemory drops back under it as soon as a client's
// buffers shrink, so FillMemory then lowers maxmemory to half the memory
// in use: the server stays out of memory however the small allocations
// around it move, until [Server.FreeMemory]. It fails the test on any
// other error, or when the server still takes writes after 64 MiB.
func (s *Server) FillMemory(ctx context.Context, prefix string) int {
	s.tb.Helper()
	rdb := s.Client()
	limit, err := rdb.ConfigGet(ctx, "maxmemory").Result()
	if err != nil {
		s.tb.Fatalf("redistest: fill memory: CONFIG GET maxmemory: %v", err)
	}
	value := bytes.Repeat([]byte{'x'}, fillValueSize)
	for n := range fillLimit {
		err := rdb.Set(ctx, prefix+strconv.Itoa(n), value, 0).Err()
		if err == nil {
			continue
		}
		if !strings.HasPrefix(err.Error(), "OOM ") {
			s.tb.Fatalf("redistest: fill memory: SET %s%d: %v", prefix, n, err)
		}
		used, err := rdb.InfoMap(ctx, "memory").Result()
		if err != nil {
			s.tb.Fatalf("redistest: fill memory: INFO memory: %v", err)
		}
		bytesUsed, err := strconv.ParseInt(used["Memory"]["used_memory"], 10, 64)
		if err != nil {
			s.tb.Fatalf("redistest: fill memory: used_memory: %v", err)
		}
		if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(bytesUsed/2, 10)).Err(); err != nil {
			s.tb.Fatalf("redistest: fill memory: CONFIG SET maxmemory: %v", err)
		}
		if s.maxmemory == "" {
			s.maxmemory = limit["maxmemory"]
		}
		return n
	}
	s.tb.Fatalf("redistest: fill memory: the server took %d values of %d bytes without running out of memory; start it with a small maxmemory and maxmemory-policy noeviction", fillLimit, fillValueSize)
	return 0
}

// FreeMemory deletes the n values [Server.FillMemory] wrote under prefix
// and sets maxmemory back to what it was before. It fails the test on an
// error.
func (s *Server) FreeMemory(ctx context.Context, prefix string, n int) {
	s.tb.Helper()
	rdb := s.Client()
	for i := range n {
		if err := rdb.Del(ctx, prefix+strconv.Itoa(i)).Err(); err != nil {
			s.tb.Fatalf("redistest: free memory: DEL %s%d: %v", prefix, i, err)
		}
	}
	if s.maxmemory != "" {
		if err := rdb.ConfigSet(ctx, "maxmemory", s.maxmemory).Err(); err != nil {
			s.tb.Fatalf("redistest: free memory: CONFIG SET maxmemory: %v", err)
		}
	}
}
