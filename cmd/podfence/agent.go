package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/podfence/podfence/internal/asynclog"
	"github.com/podfence/podfence/internal/cliflags"
	"github.com/podfence/podfence/internal/kube/podresources"
	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/observe/metrics"
	"github.com/podfence/podfence/internal/sandbox"
)

type agentFlags struct {
	cfg       nodeagent.Config
	labels    []string
	log       cliflags.Log
	coreSched bool // --coresched; false sets cfg.CoreSched.Disabled
}

func newAgentCmd() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: an NRI plugin that puts containers on their CPU pools",
		Long: `agent connects to the container runtime's NRI socket (containerd or CRI-O with NRI enabled)
and sets each container's cpuset, memory nodes, CFS quota and EXCLUSIVE_CPUS/SHARED_CPUS
before it starts, from the node's pool config and the pod's podfence.io/cpu-pools and
podfence.io/exclusive-cpus annotations (for a pod without the first: the pool devices the
kubelet allocated, --pod-resources-socket). It reconnects when the runtime restarts. It also
caps SGX EPC from epc-limit.nri.io annotations through the cgroup misc controller under
--cgroup-root. It serves Prometheus metrics, health, readiness and the node report
(podfence status) on --metrics-address (HTTPS; /metrics and /state only to a bearer token
the API server allows: --metrics-auth), and posts Kubernetes Events on pods it refuses.

Every flag can also be set by an environment variable PODFENCE_<FLAG> (e.g.
PODFENCE_NRI_SOCKET; PODFENCE_NODE_LABEL takes comma-separated key=value pairs);
--node-name also reads NODE_NAME. Flags win over the environment.`,
		Example: `  podfence agent --pools /etc/podfence/pools --node-name "$NODE_NAME"
  podfence agent --nri-socket /run/nri/nri.sock --pools poolconfig-a.yaml --node-label nodeType=caas`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cliflags.FromEnv(cmd.Flags(), os.LookupEnv); err != nil {
				return err
			}
			return runAgent(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.Socket, "nri-socket", "/var/run/nri/nri.sock", "the runtime's NRI socket")
	fl.StringVar(&f.cfg.PluginName, "plugin-name", "podfence", "NRI plugin name")
	fl.StringVar(&f.cfg.PluginIndex, "plugin-index", "10", "NRI plugin index (two digits): the order among plugins")
	fl.StringVar(&f.cfg.Pools, "pools", "/etc/podfence/pools",
		"pool config: a poolconfig-*.yaml file or a directory of them (mounted ConfigMap)")
	fl.StringVar(&f.cfg.DevicePluginDir, "device-plugin-dir", "/var/lib/kubelet/device-plugins",
		`kubelet device-plugin directory where the pools are advertised as extended resources ("" disables the device plugin)`)
	fl.StringVar(&f.cfg.ResourceDomain, "resource-domain", "podfence.io",
		"domain of the advertised pool resources when the pool config sets no resourceBaseName (which wins): podfence.io, "+
			"or nokia.k8s.io for CPU-Pooler workloads")
	fl.Var(&f.cfg.Policy.CFSQuotas, "cfs-quotas", cfsQuotasHelp)
	f.cfg.PoolsReloadInterval = 10 * time.Second
	fl.Var((*nodeagent.ReloadInterval)(&f.cfg.PoolsReloadInterval), "pools-reload-interval",
		"re-read the pool config this often; a change is taken when no running container would move (0: never; negative is refused)")
	fl.StringVar(&f.cfg.NodeName, "node-name", "",
		"this node's name (default $NODE_NAME); also the label "+nodeagent.HostnameLabel+" unless given")
	fl.StringArrayVar(&f.labels, "node-label", nil, "node label key=value, matched against the pool configs' nodeSelector "+
		"(repeatable; default: the Node's labels, read and watched through the API server: RBAC get and watch on nodes)")
	fl.StringVar(&f.cfg.PodResourcesSocket, "pod-resources-socket", podresources.DefaultSocket,
		"the kubelet's pod resources API: containers of pods without a podfence.io/cpu-pools annotation get the pools of the "+
			"devices it lists for them (empty: not read)")
	fl.StringVar(&f.cfg.CheckpointDir, "checkpoint-dir", "/var/lib/podfence/checkpoint", "directory of allocation records")
	fl.StringVar(&f.cfg.DRAStateDir, "dra-state-dir", nodeagent.DefaultDRAStateDir,
		"the DRA driver's (podfence-dra) grants, one file per prepared ResourceClaim: a container whose environment names a "+
			"claim gets its CPUs, share and SGX EPC from there (empty: such containers are refused)")
	fl.StringVar(&f.cfg.Sysfs, "sysfs", "/sys", "root of the sysfs tree to read the CPU topology from")
	fl.StringVar(&f.cfg.StartBinary, "start-binary", "",
		"host path of the (static) podfence binary bind-mounted into containers with a process pinning annotation (default: this "+
			"binary; in a DaemonSet, its path on the host)")
	fl.StringVar(&f.cfg.CgroupRoot, "cgroup-root", "/sys/fs/cgroup",
		"cgroupfs mount point, where SGX EPC limits are set and read (empty: no EPC limits)")
	fl.Var(&f.cfg.EPCPolicy, "epc-policy",
		"an SGX EPC limit the kernel cannot enforce: strict refuses the container, best-effort runs it uncapped and reports it")
	fl.Var(&f.cfg.EPCApplyAt, "epc-apply-at",
		"when an SGX EPC cap is set on cgroup v2: create (in the NRI adjustment) or start (written into the cgroup at "+
			"StartContainer; for a node where an NRI plugin with a higher index, such as nri-plugins sgx-epc, sets misc.max)")
	fl.StringVar(&f.cfg.Isolation.ProcIRQ, "proc-irq", "/proc/irq",
		"the kernel's /proc/irq, writable (in a pod: the host's, mounted; the runtime's own is read-only): the interrupt affinity "+
			"of containers that ask for irq-load-balancing disable (empty: not managed)")
	fl.StringVar(&f.cfg.Isolation.WorkqueueCPUMask, "workqueue-cpumask", "/sys/devices/virtual/workqueue/cpumask",
		"the unbound-workqueue cpumask, writable: kept off the CPUs of isolated partitions (empty: not managed)")
	f.cfg.Isolation.Proc = "/proc" // hostPID: the host's processes, irqbalance among them
	f.cfg.Isolation.OnExit = nodeagent.OnExitAuto
	fl.Var(&f.cfg.Isolation.OnExit, "isolation-on-exit",
		"what the agent gives back at exit of the interrupts, workqueues and partitions it took from the node: auto (all of it "+
			"when its DaemonSet --daemonset is gone or being deleted: an uninstall; a restart keeps it), keep or release")
	fl.StringVar(&f.cfg.Isolation.DaemonSet, "daemonset", "podfence-agent",
		"the agent's DaemonSet, [<namespace>/]<name> (default namespace: the pod's), asked about at exit (RBAC: get on it)")
	fl.StringVar(&f.cfg.MetricsAddress, "metrics-address", metrics.DefaultAddress,
		"address serving /metrics, /healthz, /readyz and /state (empty: none)")
	fl.StringVar(&f.cfg.HealthAddress, "health-address", metrics.DefaultHealthAddress,
		"address serving /healthz and /readyz alone, plain HTTP, for the kubelet's probes: keep it on loopback, where "+
			"no client of the network can hold its connections (empty: none)")
	f.cfg.MetricsAuth = metrics.AuthKubernetes
	fl.Var(&f.cfg.MetricsAuth, "metrics-auth",
		"who may read /metrics and /state: kubernetes (HTTPS; a bearer token the API server reviews and allows get on the path: "+
			"TokenReview, SubjectAccessReview; RBAC: ClusterRole podfence-metrics-reader) or none (a loopback --metrics-address "+
			"only); /healthz and /readyz are open")
	fl.StringVar(&f.cfg.MetricsCert, "metrics-cert", "",
		"serving certificate (PEM) for --metrics-address, with --metrics-key (default with --metrics-auth=kubernetes: self-signed, "+
			"made at start)")
	fl.StringVar(&f.cfg.MetricsKey, "metrics-key", "", "private key (PEM) of --metrics-cert")
	fl.BoolVar(&f.cfg.Events, "events", true,
		"post Kubernetes Events on pods for refusals and degraded enforcement, when the API server is reachable")
	fl.StringVar(&f.cfg.Kubeconfig, "kubeconfig", "",
		"kubeconfig for Events, node info and labels (default: the pod's service account, when in a pod)")
	fl.BoolVar(&f.cfg.PublishNode, "publish-node-info", true,
		"label and annotate this Node (--node-name) with core-scheduling support and physical cores for podfence extender (RBAC: "+
			"patch nodes), when the API server is reachable")
	f.log.AddFlags(fl)
	addCoreSchedFlags(fl, &f) // SMT core scheduling (coresched.go)
	fl.StringSliceVar(&f.cfg.VMRuntimes, "vm-runtimes", sandbox.DefaultRuntimes(),
		"runtime handlers (names or globs) of VM sandboxes, whose shim and hypervisor get a host cgroup under --cgroup-root sized "+
			"from their pods (empty: none)")
	return cmd
}

// cfsQuotasHelp documents --cfs-quotas (agent and plan).
const cfsQuotasHelp = "which containers get a CFS quota: all (CPU-Pooler's default: a shared container its share, an " +
	"exclusive one its CPUs (cores, when a CPU is a whole core) plus 100 millicpu, one with both its exclusive CPUs plus the whole " +
	"shared pool), shared (CPU-Pooler's: no quota for exclusive-only containers; one with both is held to its share), or sum " +
	"(podfence's former rule: no quota for exclusive-only containers; one with both gets its exclusive CPUs plus its share)"

func runAgent(ctx context.Context, f agentFlags, logOut io.Writer) error {
	out, err := f.log.Logger(logOut)
	if err != nil {
		return err
	}
	// The NRI handlers log every decision: they must not wait for a stderr pipe the runtime
	// is slow to drain (package asynclog).
	async := asynclog.New(out.Handler(), asynclog.DefaultRecords)
	defer func() { _ = async.Close() }()
	log := slog.New(async)
	labels, err := parseLabels(f.labels)
	if err != nil {
		return err
	}
	f.cfg.NodeLabels = labels
	if f.cfg.MetricsAddress != "" {
		if err := metrics.CheckAuth(f.cfg.MetricsAuth, f.cfg.MetricsAddress); err != nil {
			return err
		}
	}
	f.cfg.CoreSched.Disabled = !f.coreSched
	if f.cfg.NodeName == "" {
		f.cfg.NodeName = os.Getenv("NODE_NAME")
	}
	if f.cfg.StartBinary == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the podfence binary for --start-binary: %w", err)
		}
		f.cfg.StartBinary = self
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("starting", "version", version, "socket", f.cfg.Socket, "plugin", f.cfg.PluginIndex+"-"+f.cfg.PluginName,
		"pools", f.cfg.Pools, "node", f.cfg.NodeName, "podResources", f.cfg.PodResourcesSocket, "checkpoint", f.cfg.CheckpointDir,
		"draStateDir", f.cfg.DRAStateDir,
		"sysfs", f.cfg.Sysfs,
		"startBinary", f.cfg.StartBinary, "cgroupRoot", f.cfg.CgroupRoot, "epcPolicy", f.cfg.EPCPolicy, "epcApplyAt", f.cfg.EPCApplyAt,
		"metrics", f.cfg.MetricsAddress, "metricsAuth", f.cfg.MetricsAuth, "vmRuntimes", strings.Join(f.cfg.VMRuntimes, ","))
	return nodeagent.Run(ctx, f.cfg, log)
}
