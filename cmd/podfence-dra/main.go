// Command podfence-dra is podfence's DRA driver (dra.podfence.io): a kubelet plugin that
// publishes the node's DRA CPU pools and SGX EPC as ResourceSlices and prepares
// ResourceClaims for the node agent to enforce. It is its own binary because the kubelet
// plugin helpers need client-go, which the agent does not link.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podfence/podfence/internal/cliflags"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/dra/driver"
	"github.com/podfence/podfence/internal/kube/kubeapi/clientset"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "podfence-dra:", err)
		os.Exit(1)
	}
}

type flags struct {
	cfg        driver.Config
	epc        string
	kubeconfig string
	log        cliflags.Log
}

func newCmd() *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "podfence-dra",
		Short: "Run the DRA driver dra.podfence.io: CPU pools and SGX EPC as ResourceSlices",
		Long: `podfence-dra registers with the kubelet as the DRA driver dra.podfence.io. It publishes one
resource pool named after the node: a device per request unit of each exclusive pool with
requestAPI: dra in the node's pool config (selected by the Node's labels, as the agent does),
the shared pool when it is a DRA pool (consumable millicpu) and SGX EPC when the node has it
(consumable bytes). It republishes when a reload (--reload-interval) finds other devices.
Preparing a claim stores its grant under --state-dir (the node agent enforces it) and
writes a CDI spec into --cdi-dir; unpreparing removes both.

Every flag can also be set by an environment variable PODFENCE_<FLAG>; --node-name also
reads NODE_NAME. Flags win over the environment.`,
		Example:       `  podfence-dra --node-name "$NODE_NAME" --pool-config-dir /etc/podfence/pools`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cliflags.FromEnv(cmd.Flags(), os.LookupEnv); err != nil {
				return err
			}
			if f.cfg.NodeName == "" {
				f.cfg.NodeName = os.Getenv("NODE_NAME")
			}
			return run(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.NodeName, "node-name", "", "this node's name (default $NODE_NAME): the resource pool's name")
	fl.StringVar(&f.cfg.PoolConfig, "pool-config-dir", "/etc/podfence/pools",
		"pool config file, or directory of poolconfig-*.yaml files (the agent's --pools)")
	fl.StringVar(&f.cfg.InForce, "pools-in-force", "/var/lib/podfence/checkpoint/"+pools.InForceFile,
		"the agent's record of the pool layout in force: published instead of the pool config while the agent has not "+
			"taken a changed config (empty: the pool config only)")
	fl.StringVar(&f.cfg.StateDir, "state-dir", "/var/lib/podfence/dra", "directory of the prepared claims' grants (in claims/)")
	fl.StringVar(&f.cfg.CDIDir, "cdi-dir", "/var/run/cdi", "the container runtime's CDI spec directory")
	fl.StringVar(&f.cfg.PluginsDir, "kubelet-plugins-dir", "/var/lib/kubelet/plugins",
		"the kubelet's plugins directory (the driver's socket is in <dir>/dra.podfence.io)")
	fl.StringVar(&f.cfg.RegistryDir, "kubelet-registry-dir", "/var/lib/kubelet/plugins_registry",
		"the kubelet's plugin registration directory")
	fl.StringVar(&f.epc, "epc-capacity", "",
		"the node's SGX EPC as a quantity (64Mi; 0: none); default: sgx_epc in misc.capacity under --cgroup-root")
	fl.StringVar(&f.cfg.Sysfs, "sysfs", "/sys", "root of the sysfs tree to read the CPU topology from")
	fl.StringVar(&f.cfg.CgroupRoot, "cgroup-root", "/sys/fs/cgroup", "cgroupfs root, for misc.capacity")
	fl.DurationVar(&f.cfg.ReloadInterval, "reload-interval", 30*time.Second,
		"how often the topology, pool config and node labels are read again (0: only at start)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig (default: the pod's service account)")
	f.log.AddFlags(fl)
	return cmd
}

// epcBytes reads --epc-capacity: -1 (read misc.capacity) when empty.
func epcBytes(s string) (int64, error) {
	if s == "" {
		return -1, nil
	}
	q, err := resource.ParseQuantity(s)
	n, ok := q.AsInt64()
	if err != nil || !ok || n < 0 || q.Cmp(*resource.NewQuantity(n, resource.BinarySI)) != 0 {
		return 0, fmt.Errorf("flag --epc-capacity %q: want a whole number of bytes, 0 or more, such as 64Mi or 0", s)
	}
	return n, nil
}

func run(ctx context.Context, f flags, logOut io.Writer) error {
	log, err := f.log.Logger(logOut)
	if err != nil {
		return err
	}
	if f.cfg.NodeName == "" {
		return fmt.Errorf("flag --node-name: empty and NODE_NAME unset (want this node's name)")
	}
	if f.cfg.ReloadInterval < 0 {
		return fmt.Errorf("flag --reload-interval %s: want 0 (only at start) or more", f.cfg.ReloadInterval)
	}
	if f.cfg.EPCBytes, err = epcBytes(f.epc); err != nil {
		return err
	}
	if f.cfg.Client, err = clientset.New(f.kubeconfig, "podfence-dra"); err != nil {
		return fmt.Errorf("flag --kubeconfig: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("starting", "version", version, "node", f.cfg.NodeName, "poolConfig", f.cfg.PoolConfig, "stateDir", f.cfg.StateDir,
		"cdiDir", f.cfg.CDIDir)
	return driver.Run(ctx, f.cfg, log)
}
