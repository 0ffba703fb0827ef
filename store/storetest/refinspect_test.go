package storetest_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// The reference store's store.Inspector and store.Invalidator, with their
// own planted bugs.

func (s *refStore) info(key string, e *refEntry) store.Info {
	i := store.Info{
		Key: key, State: e.shown(), Token: e.token, Attempt: e.attempt, Fingerprint: bytes.Clone(e.fp), Data: bytes.Clone(e.data),
		Size: int64(len(key) + len(e.fp) + len(e.data)), Claimed: e.claimed, Expires: e.expires,
	}
	if e.state == store.StateCompleted {
		i.Token, i.Completed = e.winner, e.completed
	}
	if s.bug == "lookup-shares-data" {
		i.Data = e.data
	}
	return i
}

func (s *refStore) Lookup(_ context.Context, key string) (store.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key)
	var e *refEntry
	if s.bug == "lookup-expired" {
		e = s.m[key]
	} else {
		e = s.live(key)
	}
	if e == nil {
		return store.Info{}, store.ErrNotFound
	}
	return s.info(key, e), nil
}

func (s *refStore) Purge(_ context.Context, key string, opts store.PurgeOptions) (store.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key)
	e := s.live(key)
	if e == nil {
		return store.Info{}, store.ErrNotFound
	}
	info := s.info(key, e)
	switch {
	case opts.Token != "" && opts.Token != info.Token && s.bug != "purge-ignores-token":
		return info, store.ErrChanged
	case e.state == store.StateInFlight && !opts.InFlight && s.bug != "purge-inflight":
		return info, store.ErrInFlight
	case e.state == store.StateCompleted && opts.InFlight && s.bug != "purge-completed-forced":
		return info, store.ErrChanged
	}
	if s.bug == "purge-read-then-delete" {
		s.window(key)
	}
	delete(s.m, key)
	if s.bug != "purge-no-invalidation" {
		for _, ch := range s.subs {
			select {
			case ch <- store.Invalidation{Key: key}:
			default:
				select {
				case ch <- store.Invalidation{All: true}:
				default:
				}
			}
		}
	}
	return info, nil
}

// List walks the keys in order, from the key after the cursor.
func (s *refStore) List(_ context.Context, opts store.ListOptions) (store.Page, error) {
	limit, err := opts.PageSize()
	if err != nil {
		return store.Page{}, err
	}
	h, ok := strings.CutPrefix(opts.Cursor, "ref:")
	b, err := hex.DecodeString(h)
	if opts.Cursor != "" && (!ok || err != nil) {
		return store.Page{}, fmt.Errorf("cursor %q: %w", opts.Cursor, store.ErrCursor)
	}
	after := string(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.m {
		if opts.Cursor == "" || k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var page store.Page
	if len(keys) > limit {
		keys = keys[:limit]
		page.Next = "ref:" + hex.EncodeToString([]byte(keys[limit-1]))
		if s.bug == "list-cursor-unsafe" {
			page.Next = "ref: " + page.Next[len("ref:"):]
		}
	}
	now := time.Now()
	for i, k := range keys {
		e := s.live(k)
		if e == nil {
			continue
		}
		info := s.info(k, e)
		if s.bug != "list-data" {
			info.Data = nil
		}
		if s.bug == "list-ignores-state" {
			opts.State = 0
		}
		if opts.Matches(info, now) && !(s.bug == "list-skips-last" && i == len(keys)-1) {
			page.Entries = append(page.Entries, info)
		}
	}
	return page, nil
}

func (s *refStore) Stats(_ context.Context) (store.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st store.Stats
	for k := range s.m {
		if e := s.live(k); e != nil {
			c := &st.InFlight
			switch e.shown() {
			case store.StateCompleted:
				c = &st.Completed
			case store.StateAbandoned:
				c = &st.Abandoned
			}
			c.Entries++
			c.Bytes += int64(len(k) + len(e.fp) + len(e.data))
		}
	}
	return st, nil
}

func (s *refStore) Invalidations(ctx context.Context) (<-chan store.Invalidation, error) {
	ch := make(chan store.Invalidation, 1024)
	s.mu.Lock()
	s.subs = append(s.subs, ch)
	s.mu.Unlock()
	out := make(chan store.Invalidation)
	go func() {
		defer close(out)
		defer func() {
			s.mu.Lock()
			s.subs = slices.DeleteFunc(s.subs, func(c chan store.Invalidation) bool { return c == ch })
			s.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case inv := <-ch:
				select {
				case out <- inv:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
