package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/podfence/podfence/internal/admission"
	"github.com/podfence/podfence/internal/cliflags"
)

type webhookFlags struct {
	listen, certFile, keyFile string
	pools, profiles           string
	reload                    time.Duration
	maxInFlight               int
	maxInFlightBytes          int64
	inFlightWait              time.Duration
	log                       cliflags.Log
}

func newWebhookCmd() *cobra.Command {
	var f webhookFlags
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Run the admission webhook: pod pool requests, EPC limits and core-scheduling groups",
		Long: `webhook serves Kubernetes admission reviews (admission.k8s.io/v1) for pod CREATE over HTTPS:
POST ` + admission.PathMutate + ` writes the agent's podfence.io/cpu-pools annotation from the pool resources,
epc-limit.nri.io/container.<name> from sgx.intel.com/epc limits, and core-scheduling labels
from --coresched-profiles; POST ` + admission.PathValidate + ` refuses pods whose pool or EPC resources,
process pinning annotation or core-scheduling labels are invalid. GET ` + admission.PathHealthz + ` answers ok.

The certificate, the pool configs and the profiles are read again when they change.
Every flag can also be set by an environment variable PODFENCE_<FLAG> (e.g. PODFENCE_TLS_CERT).`,
		Example: `  podfence webhook --tls-cert /etc/podfence/tls/tls.crt --tls-key /etc/podfence/tls/tls.key \
    --pools /etc/podfence/pools --coresched-profiles /etc/podfence/profiles.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cliflags.FromEnv(cmd.Flags(), os.LookupEnv); err != nil {
				return err
			}
			return runWebhook(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", ":8443", "address to serve HTTPS on")
	fl.StringVar(&f.certFile, "tls-cert", "", "PEM certificate (chain) file, e.g. a mounted Secret's tls.crt (required)")
	fl.StringVar(&f.keyFile, "tls-key", "", "PEM private key file, e.g. a mounted Secret's tls.key (required)")
	fl.StringVar(&f.pools, "pools", "",
		"pool configs (a poolconfig-*.yaml file or a directory of them): refuse pool names none declares; empty: do not check names")
	fl.StringVar(&f.profiles, "coresched-profiles", "", "core-scheduling profiles (YAML list) that label pods with a group; empty: none")
	fl.DurationVar(&f.reload, "reload-interval", 10*time.Second, "how often to check the certificate, pool configs and profiles for changes")
	fl.IntVar(&f.maxInFlight, "max-inflight", admission.DefaultMaxInFlight,
		"reviews worked on at once; each counts at least max-inflight-bytes/max-inflight bytes")
	fl.Int64Var(&f.maxInFlightBytes, "max-inflight-bytes", admission.DefaultMaxInFlightBytes,
		"request bytes worked on at once (a large review's heap peaks at about 4 times its body); a larger review runs alone")
	fl.DurationVar(&f.inFlightWait, "inflight-wait", admission.DefaultInFlightWait,
		"how long a review waits for room before it is refused with 429 (the webhook's failurePolicy decides)")
	f.log.AddFlags(fl)
	return cmd
}

func runWebhook(ctx context.Context, f webhookFlags, logOut io.Writer) error {
	log, err := f.log.Logger(logOut)
	if err != nil {
		return err
	}
	if f.certFile == "" || f.keyFile == "" {
		return fmt.Errorf("flags --tls-cert and --tls-key are required: the API server calls webhooks over HTTPS only")
	}
	switch {
	case f.maxInFlight < 1:
		return fmt.Errorf("flag --max-inflight %d: want at least 1", f.maxInFlight)
	case f.maxInFlightBytes < 1:
		return fmt.Errorf("flag --max-inflight-bytes %d: want at least 1", f.maxInFlightBytes)
	case f.inFlightWait <= 0:
		return fmt.Errorf("flag --inflight-wait %s: want a duration above 0, such as 1s", f.inFlightWait)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("flag --listen: %w", err)
	}
	log.Info("starting", "version", version, "listen", f.listen, "cert", f.certFile, "pools", f.pools,
		"profiles", f.profiles, "reloadInterval", f.reload, "maxInFlight", f.maxInFlight, "maxInFlightBytes", f.maxInFlightBytes,
		"inFlightWait", f.inFlightWait)
	return admission.Serve(ctx, ln, admission.Options{
		CertFile:       f.certFile,
		KeyFile:        f.keyFile,
		LoadConfig:     func() (*admission.Config, error) { return admission.Load(f.pools, f.profiles) },
		ReloadInterval: f.reload,
		Limits:         admission.Limits{MaxInFlight: f.maxInFlight, MaxInFlightBytes: f.maxInFlightBytes, Wait: f.inFlightWait},
	}, log)
}
