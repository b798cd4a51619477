package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/kube/kubeapi"
	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/observe/metrics"
	"github.com/podfence/podfence/internal/observe/status"
	"github.com/podfence/podfence/internal/observe/status/probe"
)

type statusFlags struct {
	address, output, checkpoint, pools, sysfs, cgroupRoot, nodeName string
	tokenFile, caFile                                               string
	labels                                                          []string
	timeout                                                         time.Duration
}

func newStatusCmd() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what podfence did on this node: pools drawn by core, containers, kernel features",
		Long: `status prints the node report: each pool's CPUs as a grid by socket, NUMA node and core
with the container holding each thread, each container's pool, CPUs, core-scheduling group and
SGX EPC limit and use, and the kernel features podfence relies on (SMT, core scheduling,
cgroup version and driver, misc/sgx_epc).

It reads the agent's /state at --address: over HTTPS with the bearer token in --token-file
(default: the pod's service-account token, when run in a pod), whose user needs get on the
non-resource URL /state (ClusterRole podfence-metrics-reader), or over plain HTTP from an
agent with --metrics-auth=none. Without --ca-file the agent's certificate is not verified,
and a token is sent only to an address of this machine. When the agent does not answer or
refuses the token, it reads the agent's checkpoint (--checkpoint-dir) and draws it on this
machine's topology (--sysfs) and pool config (--pools); extension data (groups, EPC) is then
missing. --address "" reads the checkpoint at once.`,
		Example: `  podfence status
  podfence status -o json
  kubectl -n podfence-system exec ds/podfence-agent -- sh -c 'podfence status --address "$POD_IP:9464"'
  podfence status --address "" --checkpoint-dir /var/lib/podfence/checkpoint --pools /etc/podfence/pools`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStatus(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.address, "address", metrics.DefaultAddress, `the agent's --metrics-address ("" reads the checkpoint)`)
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Second, "how long to wait for the agent")
	fl.StringVar(&f.tokenFile, "token-file", "",
		"file holding a bearer token for the agent (default: "+kubeapi.ServiceAccountDir+"/token, if it exists)")
	fl.StringVar(&f.caFile, "ca-file", "", "CA (PEM) verifying the agent's certificate (default: not verified)")
	fl.StringVar(&f.checkpoint, "checkpoint-dir", "/var/lib/podfence/checkpoint", "the agent's checkpoint, read when the agent is down")
	fl.StringVar(&f.pools, "pools", "/etc/podfence/pools", "the agent's pool config, with the checkpoint")
	fl.StringVar(&f.sysfs, "sysfs", "/sys", "root of the sysfs tree, with the checkpoint")
	fl.StringVar(&f.cgroupRoot, "cgroup-root", "/sys/fs/cgroup", "cgroupfs mount point, with the checkpoint")
	fl.StringVar(&f.nodeName, "node-name", "", "this node's name, to select the pool config (default $NODE_NAME, else the host name)")
	fl.StringArrayVar(&f.labels, "node-label", nil, "node label key=value, to select the pool config (repeatable)")
	return cmd
}

func runStatus(ctx context.Context, out, errOut io.Writer, f statusFlags) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("flag --output %q: want text or json", f.output)
	}
	var r status.Report
	var err error
	if f.address != "" {
		r, err = fetchState(ctx, f)
	}
	var refused *refusedError
	switch {
	case errors.As(err, &refused):
		fmt.Fprintf(errOut, "podfence status: the agent refused to show its state (%v); reading its checkpoint %s\n", err, f.checkpoint)
	case isDown(err):
		fmt.Fprintf(errOut, "podfence status: the agent does not answer (%v); reading its checkpoint %s\n", err, f.checkpoint)
	}
	if f.address == "" || refused != nil || isDown(err) {
		r, err = fromCheckpoint(f)
	}
	if err != nil {
		return err
	}
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return status.WriteText(out, r)
}

// fetchState reads the agent's report from its /state: over HTTPS with a token, or over plain
// HTTP from an agent that serves no TLS (--metrics-auth=none), without the token.
func fetchState(ctx context.Context, f statusFlags) (status.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return status.Report{}, fmt.Errorf("flag --ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return status.Report{}, fmt.Errorf("flag --ca-file %s: no PEM certificate in it", f.caFile)
		}
	} else {
		tc.InsecureSkipVerify = true // the agent's default certificate is self-signed
	}
	token, err := readToken(f.tokenFile)
	if err != nil {
		return status.Report{}, err
	}
	if token != "" && f.caFile == "" && !localAddress(f.address) {
		return status.Report{}, fmt.Errorf("agent address %q is not on this machine: give --ca-file to verify the agent before its "+
			"certificate gets the token", f.address)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig, tr.Proxy = tc, nil // straight to the agent, whose certificate may go unverified
	client := &http.Client{Transport: tr}
	r, err := getState(ctx, client, "https://"+f.address+"/state", token)
	if errors.Is(err, http.ErrSchemeMismatch) {
		r, err = getState(ctx, client, "http://"+f.address+"/state", "")
	}
	return r, err
}

// readToken reads the bearer token in file or, without one, the pod's service-account
// token, if there is one to read.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(cmp.Or(file, kubeapi.ServiceAccountDir+"/token"))
	switch {
	case err != nil && file == "":
		return "", nil
	case err != nil:
		return "", fmt.Errorf("flag --token-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// localAddress reports whether address's host is this machine (loopback or one of its
// interfaces' addresses: the node IP the agent listens on with host networking), so that
// a token sent there does not cross the network.
func localAddress(address string) bool {
	if metrics.Loopback(address) {
		return true
	}
	host, _, err := net.SplitHostPort(address)
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// refusedError is an agent's 401 or 403: the token is missing, unknown or not allowed.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func getState(ctx context.Context, client *http.Client, url, token string) (status.Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return status.Report{}, fmt.Errorf("agent address: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return status.Report{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return status.Report{}, &refusedError{err.Error()}
		}
		return status.Report{}, err
	}
	var r status.Report
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return status.Report{}, fmt.Errorf("GET %s: decode the report: %w", url, err)
	}
	return r, nil
}

// isDown reports whether err means nothing serves at the address (the agent is down),
// rather than an agent that answered badly.
func isDown(err error) bool {
	var op *net.OpError
	return err != nil && (errors.As(err, &op) && op.Op == "dial" || errors.Is(err, context.DeadlineExceeded))
}

// fromCheckpoint builds the report from the agent's checkpoint, this machine's topology and
// kernel, and the pool config.
func fromCheckpoint(f statusFlags) (status.Report, error) {
	labels, err := parseLabels(f.labels)
	if err != nil {
		return status.Report{}, err
	}
	if f.nodeName == "" {
		f.nodeName = os.Getenv("NODE_NAME")
	}
	if f.nodeName == "" {
		f.nodeName, _ = os.Hostname()
	}
	node, err := nodeagent.LoadNode(nodeagent.Config{Pools: f.pools, Sysfs: f.sysfs, NodeName: f.nodeName, NodeLabels: labels},
		slog.New(slog.DiscardHandler))
	if err != nil {
		return status.Report{}, err
	}
	if _, err := os.Stat(f.checkpoint); err != nil {
		return status.Report{}, fmt.Errorf("checkpoint: %w", err)
	}
	store, err := checkpoint.Open(f.checkpoint)
	if err != nil {
		return status.Report{}, fmt.Errorf("checkpoint %s: %w", f.checkpoint, err)
	}
	allocs, err := store.Load()
	if err != nil {
		return status.Report{}, err
	}
	r := status.Build(node, allocs, nil)
	r.Node, r.Source, r.Time = f.nodeName, "checkpoint "+f.checkpoint, time.Now()
	r.Kernel = probe.Kernel(probe.Config{Sysfs: f.sysfs, ThreadsPerCore: node.Topology.ThreadsPerCore(),
		CgroupRoot: f.cgroupRoot, CoreSched: kernel.Prctl{}.Probe()})
	for _, c := range checkpoint.Validate(allocs, node.Topology.Online(), node.PoolCPUs()) {
		r.Warnings = append(r.Warnings, fmt.Sprintf("checkpoint record %s does not fit the node: %s", c.File, c.Reason))
	}
	return r, nil
}
