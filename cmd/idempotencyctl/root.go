package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// Exit codes, as the root command's help lists them.
const (
	exitOK       = 0
	exitError    = 1 // the admin service or the store failed, or a file could not be read
	exitUsage    = 2 // a command line that cannot work
	exitNotFound = 3 // the key holds no live entry
	exitRefused  = 4 // a purge or a resolution refused: the key is in flight (or not abandoned), or changed since it was looked at
	exitDenied   = 5 // the admin service refused the caller
	exitSealed   = 6 // get: the record is sealed and did not open here
)

// cli is one run of the command: its flags and where it writes.
type cli struct {
	conn    connFlags
	json    bool
	timeout time.Duration
	stdout  io.Writer
	stderr  io.Writer
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	root := c.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ce *codedError
	if !errors.As(err, &ce) {
		// cobra's own errors: an unknown command, a flag it cannot parse.
		ce = &codedError{code: exitUsage, err: err}
	}
	fmt.Fprintf(stderr, "idempotencyctl: %v\n", ce.err)
	if ce.code == exitUsage && !ce.told {
		fmt.Fprintln(stderr, "Run 'idempotencyctl --help' for usage.")
	}
	return ce.code
}

const rootLong = `idempotencyctl looks up, lists, purges and counts the keys of an
idempotency server's store.

It reaches either the admin service a server registers
(idempotency.admin.v1.AdminService):

  --addr host:port  with TLS (--tls-ca, --tls-cert, --tls-key) or --insecure,
                    and the credentials the server's authorization function
                    reads as --header key=value

or, when that service is down, the store itself, through the same code:

  --redis URL | --redis-cluster URL | --redis-sentinel URL  [--redis-prefix P]
  --postgres URL [--table T]
  --mysql DSN [--table T]   (MySQL, MariaDB: user:password@tcp(host:3306)/db)
  --sqlite PATH [--table T] (the database file of a SQLite store, on this host)

A store reached directly knows nothing of the server's configuration: give
--descriptor-set to decode stored messages (buf build -o file.binpb, or
protoc --include_imports --descriptor_set_out), and name a method whose
policy has a namespace set in code with --namespace.

Exit codes: 0 success; 1 error (the service or the store failed); 2 a
command line that cannot work; 3 the key holds no live entry; 4 a purge
refused (the key is in flight, or changed since it was looked at); 5 the
admin service refused the caller; 6 get found a sealed record that does not
open here (a store reached directly has no sealing keys).

Guide: https://github.com/grpc-idempotency/idempotency/blob/main/docs/operations.md#the-command-line-idempotencyctl`

// rootCommand returns the command tree.
func (c *cli) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "idempotencyctl",
		Short:         "Look up, list, purge and count the keys of an idempotency store",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Name() == "help" {
				return nil
			}
			if c.timeout <= 0 {
				return usageError("--timeout must be positive")
			}
			return c.conn.validate(cmd.Flags())
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &codedError{code: exitUsage, err: err} })
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	c.conn.register(pf)
	pf.BoolVar(&c.json, "json", false, "print protojson of the admin messages, one document per line, instead of tables")
	pf.DurationVar(&c.timeout, "timeout", 30*time.Second, "deadline of each call to the service or the store")
	root.AddCommand(c.getCommand(), c.listCommand(), c.purgeCommand(), c.statsCommand(), c.resolveCommand())
	return root
}

// codedError is an error and the exit code it gives.
type codedError struct {
	code int
	err  error
	// told is set on a usage error that says itself what to run instead
	// of pointing at --help.
	told bool
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// usageError is a command line that cannot work: exit code 2.
func usageError(format string, args ...any) error {
	return &codedError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// failure is an error of the service, the store or the system: exit code 1.
func failure(format string, args ...any) error {
	return &codedError{code: exitError, err: fmt.Errorf(format, args...)}
}

// maxArgs accepts at most n positional arguments, as a usage error.
func maxArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > n {
			return usageError("at most %d argument expected, got %q", n, args)
		}
		return nil
	}
}
