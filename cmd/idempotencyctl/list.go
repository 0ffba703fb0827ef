package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

// maxPage is the largest page the admin service examines
// (store.MaxListLimit).
const maxPage = 1000

// listFlags select the entries of list.
type listFlags struct {
	state       string
	olderThan   time.Duration
	limit       int
	all         bool
	pageToken   string
	fingerprint string
}

func (c *cli) listCommand() *cobra.Command {
	var l listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the store's keys, by state and age",
		Long: `list prints the store's live entries, without their outcomes, in the
store's own order (not by age): their store key, state, age (since the
claim), the time left before their lease or retention ends, size and etag.

--state in_flight --older-than 5m lists the keys in flight for more than
five minutes; --state abandoned the keys whose server died mid-handler,
which a method that blocks abandoned keys refuses until they are resolved
(see resolve). With --json it prints each entry as one line of protojson
(an idempotency.admin.v1.Entry), so that a line is an entry. It walks the store page by page until --limit entries are
printed (100; a Redis page may add a few) or the walk ends, and then says
how to go on (--page-token); --all walks to the end. --fingerprint keeps the
entries claimed with that fingerprint (as get prints it): the same request,
under whatever key. An entry whose store key is not UTF-8 (copied or written
by hand: no key the server derives) is printed with its key quoted and
escaped, and named on stderr once the walk stops.`,
		Example: `  idempotencyctl --addr admin:9090 -H x-operator-token=$TOKEN list --state in_flight --older-than 5m
  idempotencyctl --postgres postgres://ops@db/shop list --state completed --all --fingerprint 'fZ1…='`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, fp, err := l.request(cmd)
			if err != nil {
				return err
			}
			return c.with(cmd.Context(), func(cn *conn) error { return c.list(cmd, cn, l, req, fp) })
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&l.state, "state", "", "in_flight, abandoned or completed (default: every state)")
	fs.DurationVar(&l.olderThan, "older-than", 0, "keep the entries claimed at least this long ago (5m, 1h30m), and those whose claim time the store does not know")
	fs.IntVar(&l.limit, "limit", 100, "stop once this many entries are printed")
	fs.BoolVar(&l.all, "all", false, "walk the whole store")
	fs.StringVar(&l.pageToken, "page-token", "", "go on from where an earlier list stopped")
	fs.StringVar(&l.fingerprint, "fingerprint", "", "keep the entries with this fingerprint (base64, as get prints it)")
	return cmd
}

// request returns the first page's request and the fingerprint to keep.
func (l *listFlags) request(cmd *cobra.Command) (*adminv1.ListKeysRequest, []byte, error) {
	req := &adminv1.ListKeysRequest{PageToken: l.pageToken}
	switch l.state {
	case "":
	case "in_flight":
		req.State = adminv1.State_STATE_IN_FLIGHT
	case "completed":
		req.State = adminv1.State_STATE_COMPLETED
	case "abandoned":
		req.State = adminv1.State_STATE_ABANDONED
	default:
		return nil, nil, usageError("--state %q: want in_flight, abandoned or completed", l.state)
	}
	switch {
	case l.olderThan < 0:
		return nil, nil, usageError("--older-than must not be negative")
	case l.olderThan > 0:
		req.MinAge = durationpb.New(l.olderThan)
	}
	switch {
	case l.all && cmd.Flags().Changed("limit"):
		return nil, nil, usageError("--all and --limit: name one of them")
	case l.limit < 1:
		return nil, nil, usageError("--limit must be at least 1")
	}
	var fp []byte
	if l.fingerprint != "" {
		var err error
		if fp, err = base64.StdEncoding.DecodeString(l.fingerprint); err != nil {
			return nil, nil, usageError("--fingerprint: want base64, as get prints it: %v", err)
		}
	}
	return req, fp, nil
}

// list walks the pages req starts, printing the entries it keeps.
func (c *cli) list(cmd *cobra.Command, cn *conn, l listFlags, req *adminv1.ListKeysRequest, fp []byte) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	if !c.json {
		fmt.Fprintln(tw, "STORE KEY\tSTATE\tAGE\tEXPIRES IN\tSIZE\tETAG")
	}
	printed := 0
	var unreadable []string // the keys that are not UTF-8, quoted
	for {
		// A page holds at most the entries it examines: asking for no
		// more than are still to print keeps the page token exact.
		req.PageSize = maxPage
		if !l.all && fp == nil {
			req.PageSize = int32(min(l.limit-printed, maxPage))
		}
		ctx, cancel := c.call(cmd.Context())
		resp, err := cn.ListKeys(ctx, req)
		cancel()
		if err != nil {
			tw.Flush()
			return callError(cn, err)
		}
		kept := resp.GetEntries()
		if fp != nil {
			kept = slices.DeleteFunc(kept, func(e *adminv1.Entry) bool { return !bytes.Equal(e.GetFingerprint(), fp) })
		}
		printed += len(kept)
		for _, e := range kept {
			if e.GetKeyError() != "" {
				unreadable = append(unreadable, e.GetStoreKey())
			}
		}
		next := resp.GetNextPageToken()
		done := next == "" || (!l.all && printed >= l.limit)
		if err := c.printEntries(tw, kept); err != nil {
			return err
		}
		if done {
			if printed == 0 && !c.json {
				fmt.Fprintln(c.stderr, "no entries matched")
			}
			printUnreadable(c.stderr, unreadable)
			if next != "" {
				fmt.Fprintf(c.stderr, "more entries may follow: go on with --page-token %s, or walk them all with --all\n", escape(next))
			}
			return nil
		}
		req.PageToken = next
	}
}

// printEntries writes entries as rows of tw, or each as a line of
// protojson.
func (c *cli) printEntries(tw *tabwriter.Writer, entries []*adminv1.Entry) error {
	now := time.Now()
	for _, e := range entries {
		if c.json {
			if err := printJSON(c.stdout, e); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", escape(e.GetStoreKey()), stateName(e.GetState()),
			age(e.GetClaimTime(), now), left(e.GetExpireTime(), now), size(e.GetSizeBytes()), escape(e.GetEtag()))
	}
	return tw.Flush()
}

// printUnreadable says which entries listed have a store key that is not
// UTF-8: the admin service lists them quoted and escaped, with a key_error
// (keyError in --json), so that one such key stops no listing.
func printUnreadable(w io.Writer, keys []string) {
	if len(keys) == 0 {
		return
	}
	fmt.Fprintf(w, "%d listed entries have a store key that is not UTF-8, so no key the server derives (a key copied or written by hand); they are listed quoted and escaped, with keyError in --json, and cannot be named in get or purge:\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(w, "  %s\n", escape(k))
	}
}
