package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/podfence/podfence/internal/admission"
	"github.com/podfence/podfence/internal/coresched"
	csenforce "github.com/podfence/podfence/internal/coresched/enforce"
	"github.com/podfence/podfence/internal/coresched/kernel"
)

// addCoreSchedFlags adds the agent's core-scheduling flags.
func addCoreSchedFlags(fl *pflag.FlagSet, f *agentFlags) {
	c := &f.cfg.CoreSched
	c.DefaultGroup, c.Policy, c.QoS = coresched.ByNamespace, coresched.Strict, coresched.DefaultQoS()
	fl.BoolVar(&f.coreSched, "coresched", true, "SMT core scheduling: give each pod group its own cookie where the node supports it "+
		"(false: no cookies; pods that ask for a group are then handled as on a node without support)")
	fl.Var(&c.DefaultGroup, "coresched-default-group",
		"the core-scheduling group of pods without a label: their namespace, the pod alone, one group for the whole node "+
			"(Koordinator's grouping: pods of every namespace share cores), or none")
	fl.Var(&c.QoS, "coresched-qos",
		"knobs per Koordinator QoS class (label koordinator.sh/qosClass; LSE follows LSR): <class>=on|off[+expeller][+idle],... "+
			"over the defaults shown; off: no cookie, expeller: a cookie apart from the group's other classes, idle: cpu.idle=1 on the "+
			"pod's cgroup (cgroup v2); none: the label is not read")
	fl.Var(&c.Policy, "coresched-policy",
		"a pod that asks for a group or exclusive where cookies cannot be made: strict refuses its containers, best-effort runs "+
			"them and reports it")
	fl.Var(&profilesFlag{shared: &c.Shared}, "coresched-profiles",
		"the webhook's core-scheduling profiles (YAML list; the same file): a group a profile gives is shared by its namespaces, "+
			"and any other labelled group is its pod's namespace's alone (empty: no group spans namespaces). Read at start")
	fl.DurationVar(&c.ReconcileEvery, "coresched-reconcile-interval", 10*time.Second,
		"how often every container task's cookie is checked and repaired")
	fl.StringVar(&c.ProcRoot, "proc", "/proc", "root of the host's proc tree (the agent needs the host PID namespace); "+
		"its cmdline names the CPUs the host isolated")
}

// profilesFlag reads the profile file when the flag is set and keeps the groups it shares.
type profilesFlag struct {
	path   string
	shared *coresched.SharedGroups
}

func (p *profilesFlag) String() string { return p.path }

func (p *profilesFlag) Set(path string) error {
	var shared coresched.SharedGroups
	if path != "" {
		ps, err := admission.LoadProfiles(path)
		if err != nil {
			return err
		}
		shared = admission.SharedGroups(ps)
	}
	p.path, *p.shared = path, shared
	return nil
}

func (*profilesFlag) Type() string { return "file" }

func newCoreSchedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "coresched",
		Short: "Check SMT core scheduling on this node: support and task cookies",
		Long: `coresched checks Linux core scheduling on this node (run it as root on the host, or in the
agent's pod, which has the host's PID namespace). There is no /proc file for cookies:
these commands ask the kernel with prctl(PR_SCHED_CORE).`,
		Example: `  podfence coresched probe
  podfence coresched get 4242`,
	}
	cmd.AddCommand(newCoreSchedProbeCmd(), newCoreSchedGetCmd())
	return cmd
}

func newCoreSchedProbeCmd() *cobra.Command {
	var proc string
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Say whether this kernel can give tasks cookies; exit 1 when not",
		Example: `  podfence coresched probe
  podfence coresched probe --proc /host/proc`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := kernel.Prctl{}.Probe()
			out := cmd.OutOrStdout()
			if s.Available() {
				fmt.Fprintln(out, s)
			}
			for _, f := range []string{kernel.GroupIdentityFile, kernel.SchedCoreFile} {
				sc, err := kernel.ReadSysctl(proc, f)
				switch {
				case err != nil:
					fmt.Fprintf(out, "%s: %v\n", filepath.Join(proc, f), err)
				case sc.Present:
					fmt.Fprintf(out, "%s = %s\n", sc.Path, sc.Before)
				}
			}
			if !s.Available() {
				return fmt.Errorf("core scheduling unavailable: %w", s.Err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&proc, "proc", "/proc", "root of the proc tree")
	return cmd
}

func newCoreSchedGetCmd() *cobra.Command {
	var proc, cgroup string
	cmd := &cobra.Command{
		Use:   "get [PID...]",
		Short: "Print the core-scheduling cookie of every thread of processes or of a cgroup",
		Long: `get prints the cookie of every thread of each PID, or of each process in the cgroup
directory given with --cgroup. Threads that share a cookie may run on sibling SMT threads
together; cookie 0 means no core scheduling. Values are opaque: compare them, nothing else.`,
		Example: `  podfence coresched get 4242
  podfence coresched get --cgroup /sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pids, err := pidsOf(args, cgroup)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 2, ' ', 0)
			fmt.Fprintln(w, "PID\tTID\tCOOKIE")
			var failed error
			for _, c := range csenforce.ReadCookies(kernel.Prctl{}, proc, pids) {
				if c.Err != nil {
					fmt.Fprintf(w, "%d\t%d\terror: %v\n", c.Pid, c.Tid, c.Err)
					failed = fmt.Errorf("some cookies could not be read")
					continue
				}
				fmt.Fprintf(w, "%d\t%d\t%#x\n", c.Pid, c.Tid, uint64(c.Cookie))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return failed
		},
	}
	cmd.Flags().StringVar(&proc, "proc", "/proc", "root of the proc tree")
	cmd.Flags().StringVar(&cgroup, "cgroup", "", "a cgroup directory: read its cgroup.procs for the PIDs")
	return cmd
}

// pidsOf parses PID arguments and adds the processes of cgroup dir, if given.
func pidsOf(args []string, dir string) ([]int, error) {
	var pids []int
	for _, a := range args {
		pid, err := strconv.Atoi(a)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("PID %q: want a positive number", a)
		}
		pids = append(pids, pid)
	}
	if dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return nil, fmt.Errorf("flag --cgroup: %w", err)
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("flag --cgroup: %s/cgroup.procs: %q is not a PID", dir, f)
			}
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no process: give PIDs or --cgroup")
	}
	return pids, nil
}
