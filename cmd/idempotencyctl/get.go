package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

func (c *cli) getCommand() *cobra.Command {
	var k keyFlags
	cmd := &cobra.Command{
		Use:   "get [STORE_KEY]",
		Short: "Show one key's entry and what every retry of it is answered",
		Long: `get shows one key's entry: its state, etag, fingerprint, size, when it was
claimed and completed and when it expires, and for a completed key its
outcome as a person reads it (status, details, metadata, the response as
JSON). For an abandoned key it says what that means and the two ways to
resolve it. Name the key by its store key (as list prints it), or as the client
sent it: --method (or --operation, or --namespace), --scope and --key.

A record sealed for a scope (idempotency.WithSealing) opens only for that
scope: with a store key, give the scope its calls had with --scope, used
only to open the record (the store key already names the entry).

It exits 3 when the key holds no live entry: never claimed, released,
purged, or expired; reached directly, it says which --redis-prefix or
--table it looked in, and when that holds nothing at all (then the server's
store is elsewhere). It exits 6 when the record is sealed and did not open
(--json: entry.sealedUnopened): a store reached directly has no sealing
keys, and a sealed record opens only through the admin service of a server
that holds its key, for the scope of its calls.`,
		Example: `  idempotencyctl --addr admin:9090 -H x-operator-token=$TOKEN get --method /shop.v1.Payments/Charge --scope acme --key order-1042
  idempotencyctl --redis redis://localhost:6379 --descriptor-set shop.binpb get 8yqvEk4bIGFmOXkJ_9d-Le-0ESHOl43QGummi2l7sS0
  idempotencyctl --addr admin:9090 -H x-operator-token=$TOKEN get 8yqvEk4bIGFmOXkJ_9d-Le-0ESHOl43QGummi2l7sS0 --scope acme`,
		Args: maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := k.ref(args)
			if err != nil {
				return err
			}
			return c.with(cmd.Context(), func(cn *conn) error {
				ctx, cancel := c.call(cmd.Context())
				defer cancel()
				resp, err := cn.GetKey(ctx, ref.getRequest())
				if err != nil {
					return c.notFoundHint(cmd.Context(), cn, ref, callError(cn, err))
				}
				if c.json {
					if err := printJSON(c.stdout, resp); err != nil {
						return err
					}
				} else {
					printEntry(c.stdout, resp.GetEntry(), time.Now())
					if resp.GetEntry().GetState() == adminv1.State_STATE_ABANDONED {
						printAbandonedHint(c.stdout, resp.GetEntry(), ref)
					}
				}
				return sealedError(cn, ref, resp.GetEntry())
			})
		},
	}
	k.register(cmd.Flags())
	return cmd
}

// notFoundHint adds to the error of a key not found on a store reached
// directly what direct access cannot know: where it looked (the prefix or
// the table its flags name, and whether that holds anything at all) and,
// for a key named by its method, the method's namespace. To a store's
// failure it adds that the table does not exist, when it does not.
func (c *cli) notFoundHint(ctx context.Context, cn *conn, ref keyRef, err error) error {
	var ce *codedError
	if !errors.As(err, &ce) || !cn.direct || cn.place == nil || (ce.code != exitNotFound && ce.code != exitError) {
		return err
	}
	pctx, cancel := c.call(ctx)
	defer cancel()
	if h := cn.place.hint(pctx, ce.code == exitNotFound); h != "" {
		ce.err = fmt.Errorf("%w\n%s", ce.err, h)
	}
	if ce.code == exitNotFound && strings.HasPrefix(ref.client.GetName(), "/") {
		ce.err = fmt.Errorf("%w\n(a store reached directly does not know the server's configuration: if the method's policy has a namespace, set in code or in a proto option not in --descriptor-set, name it with --namespace)", ce.err)
	}
	return ce
}

// sealedError is the error of get when e's record is sealed and did not
// open (exit 6), saying where it opens; nil otherwise.
func sealedError(cn *conn, ref keyRef, e *adminv1.Entry) error {
	if !e.GetSealedUnopened() {
		return nil
	}
	if cn.direct {
		return &codedError{code: exitSealed, err: fmt.Errorf("sealed: the record is sealed by key %s, and a store reached directly has no sealing keys: it opens only through the admin service of a server that holds that key, for the scope of its calls:\n  idempotencyctl --addr ADMIN_HOST:PORT … get %s%s", escape(e.GetSealedBy()), escape(e.GetStoreKey()), ref.scopeArg())}
	}
	return &codedError{code: exitSealed, err: fmt.Errorf("sealed: %s could not open the record sealed by key %s (%s): it opens only for the scope of its calls (--scope with a store key), through the admin service of a server whose keyring holds that key", cn.where, escape(e.GetSealedBy()), escape(e.GetOutcomeError()))}
}
