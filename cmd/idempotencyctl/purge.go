package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

func (c *cli) purgeCommand() *cobra.Command {
	var (
		k     keyFlags
		etag  string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "purge [STORE_KEY]",
		Short: "Delete one key's entry, so that the next call with it runs the handler again",
		Long: `purge deletes a completed entry: the next call with its key runs the
handler again, on every server. Give the --etag that get or list printed,
so that an entry purged and claimed again since you looked at it is left
alone (exit 4). With a STORE_KEY, --scope names the scope its calls had,
so that a sealed record it prints opens (idempotency.WithSealing).

An entry in flight is refused (exit 4): its handler may be running, and a
retry would run it again beside it. Force it only once its handler is known
to be gone (its server stopped holding a long lease): --force needs the
--etag of the entry you looked at, and purges that in-flight claim only.
Without it, purge looks the key up and prints the command to run.

Servers' replay caches (idempotency.WithReplayCache) drop the key when the
store tells them of the purge (the admin service's own server, at once). A
MySQL store tells no one: there the other servers' caches go on replaying
the key until their entries' ttl ends.`,
		Example: `  idempotencyctl --addr admin:9090 -H x-operator-token=$TOKEN purge 8yqvEk4bIGFmOXkJ_9d-Le-0ESHOl43QGummi2l7sS0 --etag 3q2-7w…
  idempotencyctl --redis redis://localhost:6379 purge --method /shop.v1.Payments/Charge --scope acme --key order-7 --force --etag 3q2-7w…`,
		Args: maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := k.ref(args)
			if err != nil {
				return err
			}
			return c.with(cmd.Context(), func(cn *conn) error { return c.purge(cmd.Context(), cn, ref, etag, force) })
		},
	}
	fs := cmd.Flags()
	k.register(fs)
	fs.StringVar(&etag, "etag", "", "purge only the entry get or list printed with this etag")
	fs.BoolVar(&force, "force", false, "purge an entry in flight (with its --etag): only once its handler is known to be gone")
	return cmd
}

func (c *cli) purge(ctx context.Context, cn *conn, ref keyRef, etag string, force bool) error {
	if force && etag == "" {
		// The etag fences the purge to the claim looked at: a key found in
		// flight may have been claimed again since, by a retry whose
		// handler is running. Show the entry and the command, never purge.
		e, err := c.lookup(ctx, cn, ref)
		if err != nil {
			return err
		}
		printEntry(c.stderr, e, time.Now())
		if e.GetState() != adminv1.State_STATE_IN_FLIGHT {
			return told("--force purges an entry in flight, and this one is %s: purge it without --force, with the same connection flags:\n  idempotencyctl … purge %s --etag %s%s", stateName(e.GetState()), escape(e.GetStoreKey()), escape(e.GetEtag()), ref.scopeArg())
		}
		return told("--force needs the --etag of the entry you looked at (above). Once its handler is known to be gone, run, with the same connection flags:\n  idempotencyctl … purge %s --force --etag %s%s", escape(e.GetStoreKey()), escape(e.GetEtag()), ref.scopeArg())
	}
	cctx, cancel := c.call(ctx)
	resp, err := cn.PurgeKey(cctx, ref.purgeRequest(etag, force))
	cancel()
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition && !force {
			return c.inFlightRefusal(ctx, cn, ref, err)
		}
		return c.notFoundHint(ctx, cn, ref, callError(cn, err))
	}
	if c.json {
		return printJSON(c.stdout, resp)
	}
	e := resp.GetEntry()
	fmt.Fprintf(c.stdout, "purged %s (%s): the next call with its key runs the handler again\n", escape(e.GetStoreKey()), stateName(e.GetState()))
	printEntry(c.stdout, e, time.Now())
	return nil
}

// inFlightRefusal is the refusal of a purge without --force of a key in
// flight: the entry, and what to run once its handler is known to be gone.
func (c *cli) inFlightRefusal(ctx context.Context, cn *conn, ref keyRef, refusal error) error {
	err := callError(cn, refusal)
	e, lerr := c.lookup(ctx, cn, ref)
	if lerr != nil {
		return err // gone or changed since: the refusal says enough
	}
	printEntry(c.stderr, e, time.Now())
	printForceHint(c.stderr, e, ref)
	return err
}

// printForceHint says how to force e, the entry of ref, a key in flight.
func printForceHint(w io.Writer, e *adminv1.Entry, ref keyRef) {
	fmt.Fprintf(w, `
The key is in flight: its handler may be running, and purging it would let a
retry run the handler again beside it. If its server died, its lease ends by
itself (above) and the next retry runs the handler. Force it only once its
handler is known to be gone, with the same connection flags:
  idempotencyctl … purge %s --force --etag %s%s
`, escape(e.GetStoreKey()), escape(e.GetEtag()), ref.scopeArg())
}

// told is a usage error that says what to run.
func told(format string, args ...any) error {
	return &codedError{code: exitUsage, err: fmt.Errorf(format, args...), told: true}
}

// lookup returns the entry of ref.
func (c *cli) lookup(ctx context.Context, cn *conn, ref keyRef) (*adminv1.Entry, error) {
	cctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := cn.GetKey(cctx, ref.getRequest())
	if err != nil {
		return nil, c.notFoundHint(ctx, cn, ref, callError(cn, err))
	}
	if resp.GetEntry() == nil {
		return nil, failure("%s answered no entry", cn.where)
	}
	return resp.GetEntry(), nil
}
