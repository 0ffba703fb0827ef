package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (c *cli) getCommand() *cobra.Command {
	var k keyFlags
	cmd := &cobra.Command{
		Use:   "get [STORE_KEY]",
		Short: "Show one key's entry and what every retry of it is answered",
		Long: `get shows one key's entry: its state, etag, fingerprint, size, when it was
claimed and completed and when it expires, and for a completed key its
outcome as a person reads it (status, details, metadata, the response as
JSON). Name the key by its store key (as list prints it), or as the client
sent it: --method (or --operation, or --namespace), --scope and --key.

A record sealed for a scope (idempotency.WithSealing) opens only for that
scope: with a store key, give the scope its calls had with --scope, used
only to open the record (the store key already names the entry).

It exits 3 when the key holds no live entry: never claimed, released,
purged, or expired.`,
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
					return notFoundHint(cn, ref, callError(cn, err))
				}
				if c.json {
					return printJSON(c.stdout, resp)
				}
				printEntry(c.stdout, resp.GetEntry(), time.Now())
				return nil
			})
		},
	}
	k.register(cmd.Flags())
	return cmd
}

// notFoundHint adds to the not-found error of a key named by its method,
// on a store reached directly, what direct access cannot know.
func notFoundHint(cn *conn, ref keyRef, err error) error {
	var ce *codedError
	if !errors.As(err, &ce) || ce.code != exitNotFound || !cn.direct || !strings.HasPrefix(ref.client.GetName(), "/") {
		return err
	}
	ce.err = fmt.Errorf("%w\n(a store reached directly does not know the server's configuration: if the method's policy has a namespace, set in code or in a proto option not in --descriptor-set, name it with --namespace)", ce.err)
	return ce
}
