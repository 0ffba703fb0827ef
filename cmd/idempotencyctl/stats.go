package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

func (c *cli) statsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Count the store's live entries and their bytes, by state",
		Long: `stats counts the store's live entries and their bytes, in flight,
abandoned (a claim whose lease ran out while its handler may have run: see
resolve) and completed. The memory, PostgreSQL and MySQL stores count them exactly
(PostgreSQL and MySQL with a scan of the table); Redis estimates them from a
sample of each master's keys once it holds more than 1,000, and says so.`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.with(cmd.Context(), func(cn *conn) error {
				ctx, cancel := c.call(cmd.Context())
				defer cancel()
				resp, err := cn.GetStats(ctx, &adminv1.GetStatsRequest{})
				if err != nil {
					return callError(cn, err)
				}
				if c.json {
					return printJSON(c.stdout, resp)
				}
				tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "STATE\tENTRIES\tSIZE")
				for _, row := range []struct {
					name string
					n    *adminv1.Count
				}{{"in_flight", resp.GetInFlight()}, {"abandoned", resp.GetAbandoned()}, {"completed", resp.GetCompleted()}} {
					fmt.Fprintf(tw, "%s\t%d\t%s\n", row.name, row.n.GetEntries(), size(row.n.GetSizeBytes()))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if resp.GetEstimated() {
					fmt.Fprintln(c.stdout, "(estimated from a sample of the store's keys)")
				}
				return nil
			})
		},
	}
}
