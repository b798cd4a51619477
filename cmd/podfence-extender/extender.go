package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/podfence/podfence/internal/cliflags"
	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/extender"
	"github.com/podfence/podfence/internal/kube/kubeapi/clientset"
)

type extenderFlags struct {
	cfg        extender.Config
	kubeconfig string
	log        cliflags.Log
}

func newExtenderCmd() *cobra.Command {
	f := extenderFlags{cfg: extender.Config{DefaultGroup: coresched.ByNamespace}}
	cmd := &cobra.Command{
		Use:   "podfence-extender",
		Short: "Run the kube-scheduler extender: place pods where SMT core scheduling costs least",
		Long: `podfence-extender serves the kube-scheduler HTTP extender API. POST /filter refuses nodes without core
scheduling (node label podfence.io/core-sched, published by the agents) for pods that explicitly
ask for a core-scheduling group or policy exclusive; POST /prioritize scores nodes 0..10 by cookie
density: nodes that already run the pod's group and have fewer distinct groups per physical core
score higher, and exclusive pods prefer free whole cores. GET /healthz answers ok.

It watches bound pods and nodes and serves once its informers have synced. By default it
listens on loopback, for a kube-scheduler in the same pod; on another address it serves
HTTPS (--tls-cert, --tls-key), or plain HTTP only with --insecure-listen. Every flag can
also be set by an environment variable PODFENCE_<FLAG>.`,
		Example: `  podfence-extender
  podfence-extender --listen :8443 --tls-cert /etc/podfence/tls.crt --tls-key /etc/podfence/tls.key
  podfence-extender --kubeconfig ~/.kube/config --default-group pod`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cliflags.FromEnv(cmd.Flags(), os.LookupEnv); err != nil {
				return err
			}
			return runExtender(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.Address, "listen", "127.0.0.1:8888",
		"address to serve the extender API on; loopback serves a kube-scheduler in the same pod, another address needs TLS "+
			"(--tls-cert, --tls-key) or --insecure-listen")
	fl.BoolVar(&f.cfg.Insecure, "insecure-listen", false,
		"allow plain HTTP on an address other than loopback: anyone who reaches it can read the pods and nodes the scheduler sends "+
			"and answer for the extender")
	fl.StringVar(&f.cfg.CertFile, "tls-cert", "", "PEM certificate file: serve HTTPS (with --tls-key)")
	fl.StringVar(&f.cfg.KeyFile, "tls-key", "", "PEM private key file: serve HTTPS (with --tls-cert)")
	fl.Var(&f.cfg.DefaultGroup, "default-group", "group of pods without core-scheduling labels, as the agents' --coresched-default-group")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig (default: the pod's service account)")
	f.log.AddFlags(fl)
	return cmd
}

func runExtender(ctx context.Context, f extenderFlags, logOut io.Writer) error {
	log, err := f.log.Logger(logOut)
	if err != nil {
		return err
	}
	if (f.cfg.CertFile == "") != (f.cfg.KeyFile == "") {
		return fmt.Errorf("flags --tls-cert and --tls-key: give both or neither")
	}
	if _, err := extender.CheckListen(f.cfg); err != nil {
		return fmt.Errorf("flag --listen %w", err)
	}
	client, err := clientset.New(f.kubeconfig, "podfence-extender")
	if err != nil {
		return fmt.Errorf("flag --kubeconfig: %w", err)
	}
	f.cfg.Client = client
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("starting", "version", version, "listen", f.cfg.Address, "defaultGroup", f.cfg.DefaultGroup)
	return extender.Run(ctx, f.cfg, log)
}
