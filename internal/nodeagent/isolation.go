package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/cpu/plan"
	isoenforce "github.com/podfence/podfence/internal/isolation/enforce"
	"github.com/podfence/podfence/internal/kube/kubeapi"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// Isolation is where the agent keeps device interrupts, the load balancer and unbound
// kernel work off the exclusive CPUs of containers that ask (package isolation/enforce).
type Isolation struct {
	// ProcIRQ is /proc/irq as the agent sees it writable (the runtime mounts /proc/irq
	// read-only in containers: the DaemonSet mounts the host's at /host/proc/irq). Empty:
	// interrupts are not managed.
	ProcIRQ string
	// WorkqueueCPUMask is the unbound-workqueue cpumask file (host /sys is read-only in the
	// pod: the DaemonSet mounts /sys/devices/virtual/workqueue writable). Empty: not managed.
	WorkqueueCPUMask string
	// Proc is the host's procfs (the agent runs with hostPID), where a running irqbalance is
	// found. Empty: none is looked for.
	Proc string
	// OnExit is what the agent does with what it took out when it stops: OnExitAuto gives it
	// back only when its DaemonSet is gone or being deleted (an uninstall); a restart or a
	// rollout keeps it for the running containers, and the next agent rebuilds.
	OnExit OnExit
	// DaemonSet is the agent's DaemonSet ("<namespace>/<name>"; the namespace defaults to the
	// pod's service account's), asked about at exit under OnExitAuto.
	DaemonSet string
}

// OnExit is the agent's --isolation-on-exit.
type OnExit string

const (
	OnExitAuto    OnExit = "auto"
	OnExitKeep    OnExit = "keep"
	OnExitRelease OnExit = "release"
)

func (o *OnExit) Set(v string) error {
	switch OnExit(v) {
	case OnExitAuto, OnExitKeep, OnExitRelease:
		*o = OnExit(v)
		return nil
	}
	return fmt.Errorf("%q: want auto (give back on uninstall: the agent's DaemonSet gone or being deleted), keep or release", v)
}
func (o *OnExit) String() string { return string(*o) }
func (o *OnExit) Type() string   { return "string" }

// isolation opens the isolation manager and runs its record writer until ctx ends. node
// returns the layout in force (set once the plugin exists).
func isolation(ctx context.Context, cfg Config, node func() *plan.Node, reg prometheus.Registerer,
	log *slog.Logger) (*isoenforce.Manager, error) {
	var layout cgroups.Layout
	if cfg.CgroupRoot != "" {
		l, err := cgroups.Detect(cfg.CgroupRoot)
		if err != nil {
			log.Warn("isolation: no cgroupfs: no isolated partitions", "err", err)
		} else {
			layout = l
		}
	}
	m, err := isoenforce.New(isoenforce.Config{ProcIRQ: cfg.Isolation.ProcIRQ, Workqueue: cfg.Isolation.WorkqueueCPUMask,
		Cgroups: layout, StateDir: cfg.CheckpointDir, Node: node, Proc: cfg.Isolation.Proc,
		SelfStatus: "/proc/self/status"}, log.With("component", "isolation"))
	if err != nil {
		return nil, fmt.Errorf("isolation: %w", err)
	}
	if err := reg.Register(m.Collector()); err != nil {
		return nil, fmt.Errorf("register isolation metrics: %w", err)
	}
	go m.Run(ctx, 30*time.Second)
	return m, nil
}

// releaseIsolation gives back what the manager took out when the agent is uninstalled (see
// Isolation.OnExit); ctx bounds the API call.
func releaseIsolation(ctx context.Context, cfg Config, api *kubeapi.Client, m *isoenforce.Manager, log *slog.Logger) {
	release := cfg.Isolation.OnExit == OnExitRelease
	if cfg.Isolation.OnExit == OnExitAuto || cfg.Isolation.OnExit == "" {
		gone, why := daemonSetGone(ctx, api, cfg.Isolation.DaemonSet)
		release = gone
		log.Info("isolation at exit", "release", gone, "why", why)
	}
	if !release {
		return
	}
	if err := m.Release(); err != nil {
		log.Error("isolation: not everything given back at exit", "err", err)
		return
	}
	log.Info("isolation: interrupts, workqueues and partitions given back")
}

// daemonSetGone says whether the DaemonSet ns/name is gone or being deleted, and why it
// thinks so; false when it cannot tell.
func daemonSetGone(ctx context.Context, api *kubeapi.Client, ds string) (bool, string) {
	if api == nil {
		return false, "no API server: kept for the next agent"
	}
	ns, name, ok := strings.Cut(ds, "/")
	if !ok {
		name = ds
		b, err := os.ReadFile(filepath.Join(kubeapi.ServiceAccountDir, "namespace"))
		if err != nil {
			return false, "the agent's namespace is unknown: kept for the next agent"
		}
		ns = strings.TrimSpace(string(b))
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body, code, err := api.Do(ctx, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/daemonsets/"+name, "", nil)
	switch {
	case err != nil:
		return false, "DaemonSet " + ns + "/" + name + " not read (" + err.Error() + "): kept for the next agent"
	case code == http.StatusNotFound:
		return true, "DaemonSet " + ns + "/" + name + " is gone"
	case code != http.StatusOK:
		return false, fmt.Sprintf("DaemonSet %s/%s: HTTP %d: kept for the next agent", ns, name, code)
	}
	var obj struct {
		Metadata struct {
			DeletionTimestamp string `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return false, "DaemonSet " + ns + "/" + name + " unreadable: kept for the next agent"
	}
	if obj.Metadata.DeletionTimestamp != "" {
		return true, "DaemonSet " + ns + "/" + name + " is being deleted"
	}
	return false, "DaemonSet " + ns + "/" + name + " stays: kept for the next agent"
}
