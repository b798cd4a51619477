package extender

import (
	"log/slog"
	"math"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/kube/nodeinfo"
)

// Cache holds the node facts scoring needs, updated incrementally by informer event handlers
// (SetPod, DeletePod, SetNode, DeleteNode) so that a request only looks them up. Pods count
// on their node once bound (spec.nodeName set) until they succeed, fail or are deleted.
// It is safe for concurrent use.
type Cache struct {
	def coresched.DefaultGroup
	log *slog.Logger

	mu    sync.RWMutex
	nodes map[string]*nodeEntry
	pods  map[types.UID]podEntry
}

// nodeEntry is one node: what the agent published, and the sums over its pods.
type nodeEntry struct {
	known     bool // published by the agent
	info      nodeinfo.Info
	tpc       int            // threads per core: capacity CPUs / physical cores, at least 1
	groups    map[string]int // group ID → pods of it on the node
	milli     int64          // CPU requests of its pods
	exclusive int            // pods of policy exclusive
	pods      int            // pods counted
}

// podEntry is what a pod adds to its node.
type podEntry struct {
	node      string
	group     string // "" for no cookie
	milli     int64
	exclusive bool
}

// NewCache returns an empty cache; def groups pods without labels, as the agents do.
func NewCache(def coresched.DefaultGroup, log *slog.Logger) *Cache {
	return &Cache{def: def, log: log, nodes: map[string]*nodeEntry{}, pods: map[types.UID]podEntry{}}
}

// PodFor is what scoring needs of pod; an unusable group label is returned as an error
// (the agent refuses such pods). The extender reads no profiles, so it takes every labelled
// group as its namespace's: namespaces' groups of one name are never merged, and a group the
// operator shares among namespaces counts once per namespace, which only makes the density
// score cautious (docs/tenancy.md).
func PodFor(def coresched.DefaultGroup, pod *corev1.Pod) (Pod, error) {
	g, err := coresched.GroupFor(def, coresched.SharedGroups{},
		coresched.Pod{UID: string(pod.UID), Namespace: pod.Namespace, Labels: pod.Labels})
	p := Pod{Group: g, MilliCPU: milliCPU(pod)}
	p.Exclusive = g.Explicit() && !g.None() && labelPolicy(pod.Labels) == coresched.PolicyExclusive
	return p, err
}

// labelPolicy is the policy label, podfence's winning over Koordinator's.
func labelPolicy(l map[string]string) string {
	if v, ok := l[coresched.LabelPolicy]; ok {
		return v
	}
	return l[coresched.KoordLabelPolicy]
}

// milliCPU is the pod's CPU request as the scheduler and the kubelet count it: its app
// containers with its native sidecars (init containers with restartPolicy Always, which run
// beside them), or a plain init container with the sidecars declared before it, whichever is
// more; pod-level requests and overhead included.
func milliCPU(pod *corev1.Pod) int64 {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return reqs.Cpu().MilliValue()
}

// SetPod adds or updates a pod.
func (c *Cache) SetPod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(pod.UID)
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	p, err := PodFor(c.def, pod)
	if err != nil {
		c.log.Debug("pod counted without a group", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
	e := podEntry{node: pod.Spec.NodeName, group: p.Group.ID(), milli: p.MilliCPU, exclusive: p.Exclusive}
	n := c.nodeLocked(e.node)
	if e.group != "" {
		n.groups[e.group]++
	}
	n.milli += e.milli
	n.pods++
	if e.exclusive {
		n.exclusive++
	}
	c.pods[pod.UID] = e
}

// DeletePod removes a pod.
func (c *Cache) DeletePod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(uid)
}

func (c *Cache) removeLocked(uid types.UID) {
	e, ok := c.pods[uid]
	if !ok {
		return
	}
	delete(c.pods, uid)
	n := c.nodes[e.node]
	if e.group != "" {
		if n.groups[e.group]--; n.groups[e.group] <= 0 {
			delete(n.groups, e.group)
		}
	}
	n.milli -= e.milli
	n.pods--
	if e.exclusive {
		n.exclusive--
	}
	c.dropIfEmptyLocked(e.node)
}

// SetNode adds or updates a node's published facts.
func (c *Cache) SetNode(node *corev1.Node) {
	info, known, err := nodeinfo.Read(node)
	if err != nil {
		c.log.Warn("node info", "err", err)
	}
	tpc := 1
	if cpus := node.Status.Capacity.Cpu().MilliValue(); info.PhysicalCores > 0 && cpus > 0 {
		tpc = max(1, int(math.Round(float64(cpus)/1000/float64(info.PhysicalCores))))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodeLocked(node.Name)
	n.known, n.info, n.tpc = known, info, tpc
	c.dropIfEmptyLocked(node.Name)
}

// DeleteNode forgets a node's published facts; its pods stay counted until they go.
func (c *Cache) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.nodes[name]; ok {
		n.known, n.info, n.tpc = false, nodeinfo.Info{}, 1
		c.dropIfEmptyLocked(name)
	}
}

func (c *Cache) nodeLocked(name string) *nodeEntry {
	n, ok := c.nodes[name]
	if !ok {
		n = &nodeEntry{groups: map[string]int{}, tpc: 1}
		c.nodes[name] = n
	}
	return n
}

func (c *Cache) dropIfEmptyLocked(name string) {
	if n := c.nodes[name]; !n.known && n.pods == 0 {
		delete(c.nodes, name)
	}
}

// Each calls f with the facts of each named node for a pod of group (a group ID, "" for
// none), under one read lock; f must not call back into c. Unknown nodes get Facts{}.
func (c *Cache) Each(names []string, group string, f func(i int, n Facts)) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, name := range names {
		e, ok := c.nodes[name]
		if !ok {
			f(i, Facts{})
			continue
		}
		n := Facts{Known: e.known, CoreSched: e.info.CoreSched, Cores: e.info.PhysicalCores, ThreadsPerCore: e.tpc,
			Groups: len(e.groups), BusyCores: max(e.exclusive, NeedCores(e.milli, e.tpc))}
		if e.milli == 0 && e.exclusive == 0 {
			n.BusyCores = 0
		}
		if group != "" {
			_, n.HasGroup = e.groups[group]
		}
		f(i, n)
	}
}

// Len is the number of nodes the cache knows of (published or running pods).
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.nodes)
}
