package nriplugin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/podapi"
)

// memStore is a checkpoint in memory: the agent's "disk".
type memStore struct {
	mu   sync.Mutex
	recs map[allocation.Key]allocation.Allocation
}

func newMemStore(recs []allocation.Allocation) *memStore {
	s := &memStore{recs: map[allocation.Key]allocation.Allocation{}}
	for _, a := range recs {
		s.recs[a.Key()] = a
	}
	return s
}

func (s *memStore) Put(a allocation.Allocation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[a.Key()] = a
	return nil
}

func (s *memStore) Delete(k allocation.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.recs, k)
	return nil
}

func (s *memStore) Load() ([]allocation.Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.recs)), nil
}

// trace is one random lifecycle: a model of the runtime (what a kubelet and containerd do)
// driving the agent's handlers, with kills at random points.
type trace struct {
	t       *testing.T
	rng     *rand.Rand
	node    *plan.Node
	agent   *nriplugin.Plugin
	disk    *memStore
	history [][]allocation.Allocation // the checkpoint after each step
	pods    map[string]*api.PodSandbox
	ctrs    map[string]*api.Container
	wants   map[string][]string // pod sandbox ID → container names to create
	seq     int
	kills   int
	seed    int
	verbose bool
	restart func(*memStore) // starts the next agent on a checkpoint; nil: on tr.node
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func (tr *trace) fatalf(format string, args ...any) {
	tr.t.Helper()
	tr.t.Fatalf("seed %d: "+format, append([]any{tr.seed}, args...)...)
}

func (tr *trace) id(prefix string) string {
	tr.seq++
	return fmt.Sprintf("%s%03d", prefix, tr.seq)
}

// request is a random pool request of one container, as annotations.
func (tr *trace) request() (pool string, ctrAnn map[string]string) {
	switch tr.rng.IntN(7) {
	case 0:
		return "", nil
	case 1:
		return fmt.Sprintf(`{"shared_s": %d}`, 1+tr.rng.IntN(800)), nil
	case 2:
		return fmt.Sprintf(`{"exclusive_a": %d}`, 1+tr.rng.IntN(2)), nil
	case 3:
		return fmt.Sprintf(`{"exclusive_b": %d}`, 1+tr.rng.IntN(3)), nil
	case 4:
		return fmt.Sprintf(`{"exclusive_b": %d, "shared_s": %d}`, 1+tr.rng.IntN(2), 1+tr.rng.IntN(300)), nil
	case 5: // the device plugin's choice, free or not
		cpus := []int{4, 5, 6, 7, 12, 13, 14, 15}
		tr.rng.Shuffle(len(cpus), func(i, j int) { cpus[i], cpus[j] = cpus[j], cpus[i] })
		return "", map[string]string{podapi.AnnotationExclusiveCPUs: cpuset.New(cpus[:1+tr.rng.IntN(2)]...).String()}
	default:
		return "", map[string]string{podapi.AnnotationExclusiveCPUs: fmt.Sprint(2 + tr.rng.IntN(2))}
	}
}

func (tr *trace) runPod() {
	id := tr.id("pod")
	n := 1 + tr.rng.IntN(2)
	var entries, names []string
	for i := range n {
		name := fmt.Sprint("c", i)
		names = append(names, name)
		if pool, _ := tr.request(); pool != "" {
			entries = append(entries, fmt.Sprintf("%q: %s", name, pool))
		}
	}
	pod := &api.PodSandbox{Id: id, Uid: "uid-" + id, Namespace: "ns", Name: "p" + id,
		Annotations: map[string]string{podapi.AnnotationCPUPools: "{" + strings.Join(entries, ", ") + "}"}}
	if tr.rng.IntN(3) == 0 { // c0 is a native sidecar: kept when it stops
		pod.Annotations[podapi.AnnotationSidecars] = "c0"
	}
	tr.pods[id] = pod
	tr.wants[id] = names
	_ = tr.agent.RunPodSandbox(context.Background(), pod)
}

// recreate re-creates a pod's sandbox under the same UID: the old one's containers stop, the
// old sandbox stays until removed.
func (tr *trace) recreate(old *api.PodSandbox) {
	for _, c := range tr.ctrs {
		if c.PodSandboxId == old.Id && c.State != api.ContainerState_CONTAINER_STOPPED {
			tr.stop(c)
		}
	}
	id := tr.id("pod")
	pod := &api.PodSandbox{Id: id, Uid: old.Uid, Namespace: old.Namespace, Name: old.Name, Annotations: old.Annotations}
	tr.pods[id] = pod
	tr.wants[id] = slices.Clone(tr.wants[old.Id])
	tr.wants[old.Id] = nil // the kubelet creates no container in a dead sandbox
	_ = tr.agent.RunPodSandbox(context.Background(), pod)
}

func (tr *trace) create(pod *api.PodSandbox, name string) {
	_, ann := tr.request()
	if tr.rng.IntN(2) == 0 {
		ann = nil
	}
	ctr := &api.Container{Id: tr.id("ctr"), PodSandboxId: pod.Id, Name: name, Annotations: ann, CreatedAt: int64(tr.seq),
		State: api.ContainerState_CONTAINER_CREATED, Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{}}}}
	adj, upd, err := tr.agent.CreateContainer(context.Background(), pod, ctr)
	if len(upd) > 0 {
		tr.fatalf("creating %s/%s updated other containers: %v", pod.Name, name, upd)
	}
	if err != nil {
		return // refused: the runtime does not create it
	}
	applyCPU(ctr.Linux.Resources.Cpu, adj.GetLinux().GetResources().GetCpu())
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	tr.ctrs[ctr.Id] = ctr
	_ = tr.agent.StartContainer(context.Background(), pod, ctr)
}

func (tr *trace) stop(c *api.Container) {
	_, _ = tr.agent.StopContainer(context.Background(), tr.pods[c.PodSandboxId], c)
	c.State = api.ContainerState_CONTAINER_STOPPED
}

func (tr *trace) removePod(pod *api.PodSandbox) {
	for id, c := range tr.ctrs {
		if c.PodSandboxId == pod.Id {
			delete(tr.ctrs, id)
		}
	}
	_ = tr.agent.RemovePodSandbox(context.Background(), pod)
	delete(tr.pods, pod.Id)
	delete(tr.wants, pod.Id)
}

// removePods removes pod's sandbox as the kubelet does, with the older sandboxes of its pod
// first: it removes a live pod's dead sandboxes oldest first (and a deleted pod's all).
func (tr *trace) removePods(pod *api.PodSandbox) {
	for _, id := range slices.Sorted(maps.Keys(tr.pods)) { // sandbox IDs grow with time
		if p := tr.pods[id]; p.Uid == pod.Uid && id <= pod.Id {
			tr.removePod(p)
		}
	}
}

// update asks a live container to run on random CPUs and applies the answer.
func (tr *trace) update(c *api.Container) {
	res := &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: []string{"0-15", "4,12", "2,10", "0-1,8-9", "3"}[tr.rng.IntN(5)]}}
	upd, err := tr.agent.UpdateContainer(context.Background(), tr.pods[c.PodSandboxId], c, res)
	if err != nil {
		return
	}
	effective := res
	for _, u := range upd {
		if u.GetContainerId() == c.Id {
			effective = u.GetLinux().GetResources()
		} else {
			tr.fatalf("an update of %s changed container %s", c.Id, u.GetContainerId())
		}
	}
	applyCPU(c.Linux.Resources.Cpu, effective.GetCpu())
}

// kill abandons the agent at this point and starts a new one on what its checkpoint holds:
// everything, nothing, an older state, a part, or damaged records. The new agent's state
// must equal the old one's.
func (tr *trace) kill() {
	tr.kills++
	reference := tr.agent.Allocations()
	var disk []allocation.Allocation
	switch tr.rng.IntN(5) {
	case 0:
		disk, _ = tr.disk.Load()
	case 1: // lost
	case 2: // lagging: an older checkpoint
		disk = tr.history[tr.rng.IntN(len(tr.history))]
	case 3: // part
		all, _ := tr.disk.Load()
		for _, a := range all {
			if tr.rng.IntN(2) == 0 {
				disk = append(disk, a)
			}
		}
	default: // damaged: CPUs, idled siblings and millicpu changed
		all, _ := tr.disk.Load()
		for _, a := range all {
			switch tr.rng.IntN(4) {
			case 0:
				a.Idled = cpuset.New(tr.rng.IntN(16), tr.rng.IntN(16))
			case 1:
				a.CPUs = cpuset.New(tr.rng.IntN(16))
			case 2:
				a.MilliCPU = int64(tr.rng.IntN(5000)) - 1000
			}
			disk = append(disk, a)
		}
	}
	_ = tr.agent.Close()
	tr.disk = newMemStore(disk)
	if tr.restart != nil {
		tr.restart(tr.disk)
	} else {
		tr.agent = nriplugin.New(tr.node, tr.disk, tr.log(), nriplugin.Options{})
	}
	pods := slices.Collect(maps.Values(tr.pods))
	ctrs := slices.Collect(maps.Values(tr.ctrs))
	if upd, err := tr.agent.Synchronize(context.Background(), pods, ctrs); err != nil || len(upd) > 0 {
		tr.fatalf("Synchronize: %v, updates %v", err, upd)
	}
	if got, want := full(tr.agent.Allocations()), full(reference); !slices.Equal(got, want) {
		tr.fatalf("kill %d: state rebuilt from the runtime and a checkpoint:\n  %s\nwant the state before the kill:\n  %s",
			tr.kills, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// step does one random thing.
func (tr *trace) step() {
	podIDs := slices.Sorted(maps.Keys(tr.pods))
	ctrIDs := slices.Sorted(maps.Keys(tr.ctrs))
	switch op := tr.rng.IntN(10); {
	case op < 2 || len(podIDs) == 0:
		tr.runPod()
	case op < 5:
		pod := tr.pods[podIDs[tr.rng.IntN(len(podIDs))]]
		names := tr.wants[pod.Id]
		if len(names) == 0 {
			return
		}
		name := names[tr.rng.IntN(len(names))]
		for _, c := range tr.ctrs { // a container that stopped may be created again (restart)
			if c.PodSandboxId == pod.Id && c.Name == name && c.State != api.ContainerState_CONTAINER_STOPPED {
				return
			}
		}
		tr.create(pod, name)
	case op == 5 && len(ctrIDs) > 0:
		if c := tr.ctrs[ctrIDs[tr.rng.IntN(len(ctrIDs))]]; c.State != api.ContainerState_CONTAINER_STOPPED {
			tr.stop(c)
		} else {
			c = tr.oldestStopped(c)
			_ = tr.agent.RemoveContainer(context.Background(), tr.pods[c.PodSandboxId], c)
			delete(tr.ctrs, c.Id)
		}
	case op == 6:
		tr.removePods(tr.pods[podIDs[tr.rng.IntN(len(podIDs))]])
	case op == 7:
		if pod := tr.pods[podIDs[tr.rng.IntN(len(podIDs))]]; len(tr.wants[pod.Id]) > 0 {
			tr.recreate(pod)
		}
	case op == 8 && len(ctrIDs) > 0:
		if c := tr.ctrs[ctrIDs[tr.rng.IntN(len(ctrIDs))]]; c.State != api.ContainerState_CONTAINER_STOPPED {
			tr.update(c)
		}
	default:
		tr.kill()
	}
}

// oldestStopped is the oldest stopped instance of c's container (its pod UID and name): the
// kubelet's garbage collection removes a container's dead instances oldest first.
func (tr *trace) oldestStopped(c *api.Container) *api.Container {
	uid := tr.pods[c.PodSandboxId].Uid
	for _, o := range tr.ctrs {
		if o.State == api.ContainerState_CONTAINER_STOPPED && o.Name == c.Name && tr.pods[o.PodSandboxId].Uid == uid &&
			o.CreatedAt < c.CreatedAt {
			c = o
		}
	}
	return c
}

// checkNoCPUTwice fails when a CPU an exclusive container holds (its CPUs and idled
// siblings) is in the cpuset of any other live container.
func (tr *trace) checkNoCPUTwice() {
	type running struct {
		key  allocation.Key
		cpus cpuset.CPUSet
	}
	var live []running
	for _, c := range tr.ctrs {
		if c.State == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		cpus, err := topology.ParseCPUList(c.Linux.Resources.Cpu.Cpus)
		if err != nil {
			tr.fatalf("%v", err)
		}
		live = append(live, running{key: allocation.Key{PodUID: tr.pods[c.PodSandboxId].Uid, Container: c.Name}, cpus: cpus})
	}
	for _, a := range tr.agent.Allocations() {
		for _, r := range live {
			if r.key != a.Key() && !r.cpus.Intersection(a.Held()).IsEmpty() {
				tr.fatalf("CPU given twice: %s holds %s (idled %s), and %s runs on %s", a.Key(), a.CPUs, a.Idled, r.key, r.cpus)
			}
		}
	}
}

// TestCrashRebuildProperty runs random lifecycles with kills at random points: after each
// kill the state rebuilt from the runtime (and whatever the checkpoint holds) equals the
// state before, and no CPU is ever held by one container while another runs on it. Some
// pods have a native sidecar, whose CPUs are kept while it is stopped.
func TestCrashRebuildProperty(t *testing.T) {
	traces, steps := 1000, 60
	if testing.Short() {
		traces = 200
	}
	node := newNode(t, testTopology, testPoolsST)
	kills := 0
	for seed := range traces {
		tr := &trace{t: t, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 12)), node: node, disk: newMemStore(nil),
			pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{}, wants: map[string][]string{}}
		tr.agent = nriplugin.New(node, tr.disk, discard, nriplugin.Options{})
		if _, err := tr.agent.Synchronize(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
		for range steps {
			tr.step()
			tr.checkNoCPUTwice()
			if err := tr.agent.Flush(); err != nil {
				t.Fatal(err)
			}
			recs, _ := tr.disk.Load()
			tr.history = append(tr.history, recs)
		}
		tr.kill()
		tr.checkNoCPUTwice()
		_ = tr.agent.Close()
		kills += tr.kills
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	t.Logf("%d traces of %d steps, %d kills: every rebuilt state equal to the one before, no CPU held twice", traces, steps, kills)
}

func (tr *trace) log() *slog.Logger {
	if tr.verbose {
		return testLogger(tr.t)
	}
	return discard
}
