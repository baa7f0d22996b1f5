package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/everynode/everynode/internal/dashboard"
)

func newDashboardCommand() *cobra.Command {
	var cluster clusterFlags
	var addr string
	var refresh time.Duration
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a web page that shows rollouts live, node by node",
		Long: `Serve everynode's dashboard, a web page for the cluster of your kubeconfig.

It lists every DaemonSet with its counters and Progressing condition. Pick one to see
a grid of its nodes, grouped by the rollout's waves (else by zone), each coloured by
what the rollout does there: current revision available; updating; old revision
waiting, and for what (budget, paused, partition, canary, wave, bake, back-off...);
failing; not eligible. The grid follows the cluster live: the dashboard watches it
and pushes each change to the page (server-sent events). Click a node for its
explanation, as ` + "`everynode explain DAEMONSET NODE`" + ` prints it. The Pause, Resume,
Promote and Undo buttons do what the ` + "`everynode rollout`" + ` verbs do, after you confirm.

The page and everything it needs are in the binary: it works offline. It listens on
127.0.0.1 by default and answers only to localhost there. Anyone who can reach the
address acts on the cluster with your kubeconfig's rights: think before --addr
0.0.0.0:PORT. With -n, it shows that namespace's DaemonSets only (default: all).`,
		Example: `  everynode dashboard                 # then open http://127.0.0.1:8765/
  everynode dashboard --addr 127.0.0.1:0 -n kube-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, _, err := cluster.connect()
			if err != nil {
				return err
			}
			namespace := ""
			if cmd.Flags().Changed("namespace") {
				namespace = cluster.Namespace
			}
			lis, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listening on --addr %s: %w (choose another with --addr HOST:PORT, or port 0 for any free one)", addr, err)
			}
			ctx := cmd.Context()
			c := dashboard.NewCache(client, namespace)
			if err := c.Start(ctx); err != nil {
				lis.Close()
				return err
			}
			host, _, _ := net.SplitHostPort(addr)
			ip := net.ParseIP(host)
			srv := &http.Server{
				Handler: dashboard.NewServer(c, client, dashboard.Options{Refresh: refresh,
					LoopbackOnly: host == "localhost" || (ip != nil && ip.IsLoopback())}),
				ReadHeaderTimeout: 10 * time.Second,
			}
			go func() {
				<-ctx.Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutdown)
			}()
			fmt.Fprintf(cmd.OutOrStdout(), "everynode dashboard on http://%s/ (Ctrl-C stops it)\n", lis.Addr())
			if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cluster.add(cmd.Flags())
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8765", "address to listen on (port 0: any free port, printed at start)")
	cmd.Flags().DurationVar(&refresh, "refresh", 250*time.Millisecond, "least time between two updates of a page (changes in between are sent together)")
	return cmd
}
