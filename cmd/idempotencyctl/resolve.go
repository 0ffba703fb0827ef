package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

// resolveFlags say how resolve resolves its key.
type resolveFlags struct {
	etag     string
	rerun    bool
	response string
	err      string
}

func (c *cli) resolveCommand() *cobra.Command {
	var (
		k keyFlags
		r resolveFlags
	)
	cmd := &cobra.Command{
		Use:   "resolve [STORE_KEY]",
		Short: "Resolve an abandoned key: let the next call run, or store the outcome you determined",
		Long: `resolve resolves an abandoned key: its server died (or hung past its
lease) while the handler may have run, and a method whose abandon policy is
block answers every call of it OUTCOME_UNKNOWN until it is resolved. Find
out from the downstream (your ledger, the payment provider) what the
abandoned attempt did, then either:

  --rerun               it did nothing a new run would repeat: the entry is
                        deleted, and the next call runs the handler again;
  --response JSON       it succeeded: the key is completed with this response
                        (the method's response message as JSON), replayed to
                        every call, marked replayed, as the handler's would be;
  --error CODE:MESSAGE  it failed: the key is completed with this gRPC status
                        (CODE a name, FAILED_PRECONDITION, or a number).

Give the --etag that get or list printed: only that very entry, still
abandoned, is resolved; one taken over, completed or claimed again since is
left alone (exit 4), as is a key in flight or completed (exit 4). Without
--etag, resolve shows the entry and the commands to run (exit 2). With a
STORE_KEY, --method names the method whose key it is, for --response (its
response type) and the outcome's retention, and --scope the scope of its
calls, for which a sealing server seals the outcome.`,
		Example: `  idempotencyctl --addr admin:9090 -H x-operator-token=$TOKEN list --state abandoned
  idempotencyctl --addr admin:9090 -H x-operator-token=$TOKEN resolve --method /shop.v1.Payments/Charge --scope acme --key order-7 --etag 3q2-7w… --response '{"chargeId":"ch_9"}'
  idempotencyctl --addr admin:9090 -H x-operator-token=$TOKEN resolve 8yqvEk4bIGFmOXkJ_9d-Le-0ESHOl43QGummi2l7sS0 --method /shop.v1.Payments/Charge --etag 3q2-7w… --error FAILED_PRECONDITION:'card declined'
  idempotencyctl --addr admin:9090 -H x-operator-token=$TOKEN resolve 8yqvEk4bIGFmOXkJ_9d-Le-0ESHOl43QGummi2l7sS0 --etag 3q2-7w… --rerun`,
		Args: maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// With a STORE_KEY, --method (or --operation) names whose key
			// it is, not the key itself.
			var name string
			if len(args) == 1 && k.key == "" && (k.method != "" || k.operation != "") {
				name = k.operation
				if k.method != "" {
					m, err := fullMethod(k.method)
					if err != nil {
						return err
					}
					name = m
				}
				k.method, k.operation = "", ""
			}
			ref, err := k.ref(args)
			if err != nil {
				return err
			}
			ref.name = name
			req, err := r.request(ref)
			if err != nil {
				return err
			}
			return c.with(cmd.Context(), func(cn *conn) error { return c.resolve(cmd.Context(), cn, ref, req) })
		},
	}
	fs := cmd.Flags()
	k.register(fs)
	fs.StringVar(&r.etag, "etag", "", "resolve only the abandoned entry get or list printed with this etag")
	fs.BoolVar(&r.rerun, "rerun", false, "delete the abandoned entry: the next call runs the handler again")
	fs.StringVar(&r.response, "response", "", "complete the key with this response, the method's response message as JSON")
	fs.StringVar(&r.err, "error", "", "complete the key with this gRPC status, CODE:MESSAGE (CODE a name or a number)")
	return cmd
}

// request returns the ResolveKey request of ref, or a usage error. Its etag may
// be empty: resolve then shows the entry and the commands to run.
func (r resolveFlags) request(ref keyRef) (*adminv1.ResolveKeyRequest, error) {
	req := &adminv1.ResolveKeyRequest{Etag: r.etag, Name: ref.name}
	if ref.client != nil {
		req.Key = &adminv1.ResolveKeyRequest_ClientKey{ClientKey: ref.client}
	} else {
		req.Key = &adminv1.ResolveKeyRequest_StoreKey{StoreKey: ref.storeKey}
		req.Scope = ref.scope
	}
	n := 0
	if r.rerun {
		n++
		req.Resolution = &adminv1.ResolveKeyRequest_Rerun{Rerun: true}
	}
	if r.response != "" {
		n++
		req.Resolution = &adminv1.ResolveKeyRequest_ResponseJson{ResponseJson: r.response}
	}
	if r.err != "" {
		n++
		e, err := parseStatus(r.err)
		if err != nil {
			return nil, err
		}
		req.Resolution = &adminv1.ResolveKeyRequest_Error{Error: e}
	}
	if n != 1 {
		return nil, usageError("say how to resolve the key: one of --rerun, --response JSON and --error CODE:MESSAGE")
	}
	return req, nil
}

// parseStatus reads CODE:MESSAGE, CODE a gRPC code's name (either
// spelling: FAILED_PRECONDITION or FailedPrecondition) or number, not OK.
func parseStatus(s string) (*adminv1.ResolveError, error) {
	name, msg, _ := strings.Cut(s, ":")
	code, ok := codeOf(name)
	if !ok || code == codes.OK {
		return nil, usageError("--error %q: want CODE:MESSAGE, CODE a gRPC status code other than OK (FAILED_PRECONDITION, or 9)", s)
	}
	return &adminv1.ResolveError{Code: int32(code), Message: msg}, nil //nolint:gosec // a code is at most 16
}

// codeOf returns the gRPC code named s.
func codeOf(s string) (codes.Code, bool) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return codes.Code(n), n <= uint64(codes.Unauthenticated)
	}
	want := strings.ReplaceAll(strings.ToLower(s), "_", "")
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if strings.ToLower(c.String()) == want {
			return c, true
		}
	}
	return 0, false
}

func (c *cli) resolve(ctx context.Context, cn *conn, ref keyRef, req *adminv1.ResolveKeyRequest) error {
	if req.GetEtag() == "" {
		// The etag fences the resolution to the entry looked at: a key
		// found abandoned may have been taken over since, by a retry
		// whose handler is running. Show the entry and the commands.
		e, err := c.lookup(ctx, cn, ref)
		if err != nil {
			return err
		}
		printEntry(c.stderr, e, time.Now())
		if e.GetState() != adminv1.State_STATE_ABANDONED {
			return told("resolve resolves an abandoned entry, and this one is %s", stateName(e.GetState()))
		}
		printAbandonedHint(c.stderr, e, ref)
		return told("resolve needs the --etag of the entry you looked at (above)")
	}
	cctx, cancel := c.call(ctx)
	resp, err := cn.ResolveKey(cctx, req)
	cancel()
	if err != nil {
		return c.notFoundHint(ctx, cn, ref, callError(cn, err))
	}
	if c.json {
		return printJSON(c.stdout, resp)
	}
	e := resp.GetEntry()
	if req.GetRerun() {
		fmt.Fprintf(c.stdout, "resolved %s: deleted; the next call with its key runs the handler again\n", escape(e.GetStoreKey()))
	} else {
		fmt.Fprintf(c.stdout, "resolved %s: completed; every call with its key is answered this outcome, marked replayed\n", escape(e.GetStoreKey()))
	}
	printEntry(c.stdout, e, time.Now())
	return nil
}

// printAbandonedHint says what e, the abandoned entry of ref, means, and
// the commands that resolve it.
func printAbandonedHint(w io.Writer, e *adminv1.Entry, ref keyRef) {
	key := escape(e.GetStoreKey()) + ref.methodArg()
	withMethod := key // a response is read as the method's response type
	if ref.methodArg() == "" {
		withMethod += " --method /PACKAGE.SERVICE/METHOD"
	}
	fmt.Fprintf(w, `
The key is abandoned: attempt %d claimed it and its lease ran out before it
stored an outcome (its server died or hung), so its handler may have run, in
part or in full. A method whose abandon policy is block answers every call
of it OUTCOME_UNKNOWN until it is resolved. Find out from the downstream
(your ledger, the payment provider, asked with the same key) what the
attempt did, then run one of these, with the same connection flags:
  it did nothing:  idempotencyctl … resolve %s --etag %s%s --rerun
  it succeeded:    idempotencyctl … resolve %s --etag %s%s --response 'JSON'
  it failed:       idempotencyctl … resolve %s --etag %s%s --error CODE:MESSAGE
`, e.GetAttempt(), key, escape(e.GetEtag()), ref.scopeArg(), withMethod, escape(e.GetEtag()), ref.scopeArg(), key, escape(e.GetEtag()), ref.scopeArg())
}

// methodArg is the --method (or --operation) argument that names r's
// method beside its store key in a resolve command printed to run, which
// a response needs; "" when r names no method.
func (r keyRef) methodArg() string {
	name := r.name
	if r.client != nil {
		name = r.client.GetName()
	}
	switch {
	case strings.HasPrefix(name, "/"):
		return " --method " + shellQuote(name)
	case name != "":
		return " --operation " + shellQuote(name)
	}
	return ""
}
