package nriplugin_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// The DRA test node: the test topology (core c has threads c and c+8) with pools in
// CPU-Pooler's cores meaning, three of them requested through DRA.
const draPools = `
exclusiveCPUs: cores
pools:
  default:     {cpus: "0,8"}
  shared_s:    {cpus: "1,9", requestAPI: dra}
  exclusive_d: {cpus: "2-3", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  exclusive_t: {cpus: "4-5", requestAPI: dra}
  exclusive_p: {cpus: "6-7", hyperThreadingPolicy: multiThreaded}
`

// claimEnv is the marker a claim's CDI device puts in its containers.
func claimEnv(uid string) string { return grant.EnvName(uid) + "=" + uid }

// putGrant stores a grant for claim uid reserved for pods.
func putGrant(t *testing.T, s grant.Store, uid string, pods []*api.PodSandbox, edit func(*grant.Grant)) {
	t.Helper()
	g := grant.Grant{ClaimUID: uid, Namespace: "ns", Name: "claim-" + uid}
	for _, p := range pods {
		g.PodUIDs = append(g.PodUIDs, p.Uid)
	}
	edit(&g)
	if err := s.Put(g); err != nil {
		t.Fatal(err)
	}
}

func exclusive(pool, cpus string) func(*grant.Grant) {
	return func(g *grant.Grant) { g.Exclusive = map[string]cpuset.CPUSet{pool: mustCPUs(cpus)} }
}

// allocationOf returns what the agent holds for pod's container name.
func allocationOf(a *nriplugin.Plugin, pod *api.PodSandbox, name string) (allocation.Allocation, bool) {
	for _, al := range a.Allocations() {
		if al.PodUID == pod.Uid && al.Container == name {
			return al, true
		}
	}
	return allocation.Allocation{}, false
}

// TestClaimGivesGrantCPUs: a container whose environment names claims runs on exactly the
// CPUs their grants give (cpuset and EXCLUSIVE_CPUS), in the grant's pool, with the
// singleThreaded pool's siblings idled for it.
func TestClaimGivesGrantCPUs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grants map[string]func(*grant.Grant)
		cpus   string
		pool   string
		idled  string
	}{
		{name: "whole cores (multiThreaded)", grants: map[string]func(*grant.Grant){"c1": exclusive("exclusive_d", "3,11")},
			cpus: "3,11", pool: "exclusive_d", idled: ""},
		{name: "one thread per core (singleThreaded)", grants: map[string]func(*grant.Grant){"c1": exclusive("exclusive_t", "4-5")},
			cpus: "4-5", pool: "exclusive_t", idled: "12-13"},
		{name: "two claims", grants: map[string]func(*grant.Grant){"c1": exclusive("exclusive_d", "2,10"),
			"c2": exclusive("exclusive_t", "5")}, cpus: "2,5,10", pool: "exclusive_d", idled: "13"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := grant.Store{Dir: t.TempDir()}
			rt := newRuntime(t)
			ar := startAgent(t, rt, newNode(t, testTopology, draPools), openStore(t, t.TempDir()),
				nriplugin.Options{DRAStateDir: store.Dir})
			pod := rt.runPod("dra", nil)
			var env []string
			for uid, g := range tc.grants {
				putGrant(t, store, uid, []*api.PodSandbox{pod}, g)
				env = append(env, claimEnv(uid))
			}
			c, err := rt.createEnv(pod, "app", append(env, "PATH=/bin")...)
			if err != nil {
				t.Fatal(err)
			}
			if c.cpus() != tc.cpus || c.env(plan.EnvExclusiveCPUs) != commaIDs(tc.cpus) {
				t.Errorf("cpuset %q, %s=%q; want %s", c.cpus(), plan.EnvExclusiveCPUs, c.env(plan.EnvExclusiveCPUs), tc.cpus)
			}
			al, ok := allocationOf(ar.Plugin, pod, "app")
			if !ok || al.Pool != tc.pool || al.CPUs.String() != tc.cpus || al.Idled.String() != tc.idled {
				t.Errorf("allocation %+v (held %v); want pool %s, CPUs %s, idled %q", al, ok, tc.pool, tc.cpus, tc.idled)
			}
		})
	}
}

// commaIDs renders a CPU list as EXCLUSIVE_CPUS does: every ID, comma-separated.
func commaIDs(list string) string {
	var ids []string
	for _, id := range mustCPUs(list).List() {
		ids = append(ids, strconv.Itoa(id))
	}
	return strings.Join(ids, ",")
}

// TestClaimRefusals: a container is refused, holding nothing, when a claim it names has no
// grant, is not reserved for its pod, gives a pool this node does not offer through DRA or
// CPUs outside the pool, or when the agent reads no grants; the message names the claim.
func TestClaimRefusals(t *testing.T) {
	other := &api.PodSandbox{Uid: "uid-someone-else"}
	for _, tc := range []struct {
		name  string
		dir   bool                                   // the agent has a grant store
		grant func(pod *api.PodSandbox) *grant.Grant // nil: none stored
		ann   map[string]string                      // the pod's annotations
		want  []string
	}{
		{name: "no grant", dir: true, want: []string{"DRA claim c1: no grant in ", "has not prepared the claim on this node"}},
		{name: "not reserved for the pod", dir: true, grant: func(*api.PodSandbox) *grant.Grant {
			return &grant.Grant{PodUIDs: []string{other.Uid}, Exclusive: map[string]cpuset.CPUSet{"exclusive_d": cpuset.New(2, 10)}}
		}, want: []string{"DRA claim c1: claim ns/claim-c1 is reserved for pods uid-someone-else, not for pod ns/dra (uid-pod"}},
		{name: "pool not requested through DRA", dir: true, grant: func(p *api.PodSandbox) *grant.Grant {
			return &grant.Grant{PodUIDs: []string{p.Uid}, Exclusive: map[string]cpuset.CPUSet{"exclusive_p": cpuset.New(6, 14)}}
		}, want: []string{`DRA claim c1: gives pool "exclusive_p", which this node's pool config does not offer through DRA (requestAPI: devicePlugin)`}},
		{name: "unknown pool", dir: true, grant: func(p *api.PodSandbox) *grant.Grant {
			return &grant.Grant{PodUIDs: []string{p.Uid}, Shared: map[string]int64{"shared_x": 100}}
		}, want: []string{`DRA claim c1: gives shared pool "shared_x", which this node does not have`}},
		{name: "CPUs outside the pool", dir: true, grant: func(p *api.PodSandbox) *grant.Grant {
			return &grant.Grant{PodUIDs: []string{p.Uid}, Exclusive: map[string]cpuset.CPUSet{"exclusive_d": cpuset.New(2, 6)}}
		}, want: []string{`DRA claim c1: gives CPUs 6, which are not in exclusive pool "exclusive_d" (2-3,10-11)`}},
		{name: "EPC twice", dir: true, ann: map[string]string{"epc-limit.nri.io/container.app": "1Mi"},
			grant: func(p *api.PodSandbox) *grant.Grant { return &grant.Grant{PodUIDs: []string{p.Uid}, EPCBytes: 4096} },
			want:  []string{`DRA claim c1: gives SGX EPC 4096 bytes, but annotation epc-limit.nri.io/container.app="1Mi" sets the container's limit too`}},
		{name: "no grant store", want: []string{"DRA claim c1: environment variable PODFENCE_CLAIM_c1 names it, but this agent reads no DRA grants"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := grant.Store{Dir: t.TempDir()}
			opts := nriplugin.Options{}
			if tc.dir {
				opts.DRAStateDir = store.Dir
			}
			rt := newRuntime(t)
			ar := startAgent(t, rt, newNode(t, testTopology, draPools), openStore(t, t.TempDir()), opts)
			pod := rt.runPod("dra", tc.ann)
			if tc.grant != nil {
				g := tc.grant(pod)
				g.ClaimUID, g.Namespace, g.Name = "c1", "ns", "claim-c1"
				if err := store.Put(*g); err != nil {
					t.Fatal(err)
				}
			}
			_, err := rt.createEnv(pod, "app", claimEnv("c1"))
			if err == nil {
				t.Fatal("created; want a refusal")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if al, ok := allocationOf(ar.Plugin, pod, "app"); ok {
				t.Errorf("a refused container holds %+v", al)
			}
		})
	}
}

// TestClaimSharedShare: a claim's share of a DRA shared pool gives the container the pool's
// CPUs, its share as CFS quota and SHARED_CPUS.
func TestClaimSharedShare(t *testing.T) {
	store := grant.Store{Dir: t.TempDir()}
	rt := newRuntime(t)
	ar := startAgent(t, rt, newNode(t, testTopology, draPools), openStore(t, t.TempDir()), nriplugin.Options{DRAStateDir: store.Dir})
	pod := rt.runPod("web", nil)
	putGrant(t, store, "s1", []*api.PodSandbox{pod}, func(g *grant.Grant) { g.Shared = map[string]int64{"shared_s": 500} })
	c, err := rt.createEnv(pod, "app", claimEnv("s1"))
	if err != nil {
		t.Fatal(err)
	}
	if c.cpus() != "1,9" || c.quota() != 50000 || c.period() != 100000 || c.env(plan.EnvSharedCPUs) != "1,9" {
		t.Errorf("cpuset %q, quota %d/%d, %s=%q; want 1,9, 50000/100000, 1,9", c.cpus(), c.quota(), c.period(),
			plan.EnvSharedCPUs, c.env(plan.EnvSharedCPUs))
	}
	if al, _ := allocationOf(ar.Plugin, pod, "app"); al.Pool != "shared_s" || al.MilliCPU != 500 {
		t.Errorf("allocation %+v; want shared_s 500 millicpu", al)
	}
}

// TestClaimSurvivesAgentRestart: a claim container's allocation is in the checkpoint, and a
// restarted agent (after a clean stop, or killed with its grant gone since) holds it again,
// so another claim for the same CPUs is refused.
func TestClaimSurvivesAgentRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kill      bool // SIGKILL, not SIGTERM
		dropGrant bool // the grant is gone when the agent comes back
	}{
		{name: "stopped, grant kept"},
		{name: "killed, grant gone", kill: true, dropGrant: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := grant.Store{Dir: t.TempDir()}
			cpDir := t.TempDir()
			node := newNode(t, testTopology, draPools)
			opts := nriplugin.Options{DRAStateDir: store.Dir}
			rt := newRuntime(t)
			ar := startAgent(t, rt, node, openStore(t, cpDir), opts)
			pod := rt.runPod("dpdk", nil)
			putGrant(t, store, "c1", []*api.PodSandbox{pod}, exclusive("exclusive_d", "2-3,10-11"))
			if _, err := rt.createEnv(pod, "fwd", claimEnv("c1")); err != nil {
				t.Fatal(err)
			}
			if err := ar.Flush(); err != nil {
				t.Fatal(err)
			}
			recs, err := openStore(t, cpDir).Load()
			if err != nil || len(recs) != 1 || recs[0].Pool != "exclusive_d" || recs[0].CPUs.String() != "2-3,10-11" {
				t.Fatalf("checkpoint %+v (%v); want exclusive_d 2-3,10-11", recs, err)
			}
			if tc.kill {
				ar.kill()
			} else {
				ar.stop()
			}
			if tc.dropGrant {
				if err := store.Delete("c1"); err != nil {
					t.Fatal(err)
				}
			}
			ar = startAgent(t, rt, node, openStore(t, cpDir), opts)
			if al, ok := allocationOf(ar.Plugin, pod, "fwd"); !ok || al.CPUs.String() != "2-3,10-11" || al.Pool != "exclusive_d" {
				t.Fatalf("after restart: %+v (held %v); want exclusive_d 2-3,10-11", al, ok)
			}
			pod2 := rt.runPod("thief", nil)
			putGrant(t, store, "c2", []*api.PodSandbox{pod2}, exclusive("exclusive_d", "3,11"))
			_, err = rt.createEnv(pod2, "app", claimEnv("c2"))
			if err == nil || !strings.Contains(err.Error(), "CPUsUnavailable") && !strings.Contains(err.Error(), "held by") {
				t.Errorf("a second claim on held CPUs: %v; want refused as held", err)
			}
		})
	}
}

// TestClaimCPUsHeldElsewhere is the side-by-side guard: a grant whose CPUs another container
// holds (another claim's, or a container placed before the pool went to DRA) is refused by
// the planner, naming the holder.
func TestClaimCPUsHeldElsewhere(t *testing.T) {
	store := grant.Store{Dir: t.TempDir()}
	rt := newRuntime(t)
	old := rt.addPod("legacy")
	rt.addRunning(old, "app", "3,11", 0) // placed when exclusive_d was a device-plugin pool
	ar := startAgent(t, rt, newNode(t, testTopology, draPools), openStore(t, t.TempDir()), nriplugin.Options{DRAStateDir: store.Dir})
	if _, ok := allocationOf(ar.Plugin, old, "app"); !ok {
		t.Fatal("the running container was not adopted")
	}
	first := rt.runPod("first", nil)
	putGrant(t, store, "c1", []*api.PodSandbox{first}, exclusive("exclusive_d", "2,10"))
	if _, err := rt.createEnv(first, "app", claimEnv("c1")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, cpus, holder string }{
		{name: "another claim's", cpus: "2,10", holder: "first/app"},
		{name: "an adopted container's", cpus: "3,11", holder: "legacy/app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := rt.runPod("second", nil)
			uid := "x" + strings.ReplaceAll(tc.cpus, ",", "-")
			putGrant(t, store, uid, []*api.PodSandbox{pod}, exclusive("exclusive_d", tc.cpus))
			_, err := rt.createEnv(pod, "app", claimEnv(uid))
			if err == nil || !strings.Contains(err.Error(), "CPUsUnavailable") || !strings.Contains(err.Error(), tc.holder) {
				t.Errorf("error %v; want CPUsUnavailable naming %s", err, tc.holder)
			}
		})
	}
}

// epcSeen records the SGX EPC limit annotation extensions see for container "app".
type epcSeen struct {
	mu     sync.Mutex
	create string
	sync   string
}

func (*epcSeen) Name() string { return "epc-seen" }

func (e *epcSeen) CreateContainer(_ context.Context, pod *api.PodSandbox, _ *api.Container, _ plan.Decision) (*api.ContainerAdjustment, error) {
	e.mu.Lock()
	e.create = pod.GetAnnotations()["epc-limit.nri.io/container.app"]
	e.mu.Unlock()
	return nil, nil
}

func (e *epcSeen) Synchronize(_ context.Context, pods []*api.PodSandbox, _ []*api.Container) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range pods {
		if v, ok := p.GetAnnotations()["epc-limit.nri.io/container.app"]; ok {
			e.sync = v
		}
	}
	return nil
}

// TestClaimEPCReachesExtensions: a claim's SGX EPC is the container's limit annotation in
// the pod the extensions see (the EPC extension turns it into misc.max), at CreateContainer
// and, after an agent restart, at Synchronize; the runtime's pod is not changed.
func TestClaimEPCReachesExtensions(t *testing.T) {
	store := grant.Store{Dir: t.TempDir()}
	cpDir := t.TempDir()
	node := newNode(t, testTopology, draPools)
	seen := &epcSeen{}
	opts := nriplugin.Options{DRAStateDir: store.Dir, Extensions: []nriplugin.Extension{seen}}
	rt := newRuntime(t)
	ar := startAgent(t, rt, node, openStore(t, cpDir), opts)
	pod := rt.runPod("enclave", map[string]string{"keep": "me"})
	putGrant(t, store, "e1", []*api.PodSandbox{pod}, func(g *grant.Grant) {
		g.EPCBytes = 2 << 20
		g.Exclusive = map[string]cpuset.CPUSet{"exclusive_t": cpuset.New(4)}
	})
	if _, err := rt.createEnv(pod, "app", claimEnv("e1")); err != nil {
		t.Fatal(err)
	}
	seen.mu.Lock()
	if seen.create != "2097152" {
		t.Errorf("CreateContainer: extensions see limit %q, want 2097152", seen.create)
	}
	seen.sync = ""
	seen.mu.Unlock()
	if len(pod.Annotations) != 1 {
		t.Errorf("the runtime's pod annotations changed: %v", pod.Annotations)
	}
	ar.stop()
	startAgent(t, rt, node, openStore(t, cpDir), opts)
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if seen.sync != "2097152" {
		t.Errorf("Synchronize after a restart: extensions see limit %q, want 2097152", seen.sync)
	}
}

func mustCPUs(list string) cpuset.CPUSet {
	s, err := cpuset.Parse(list)
	if err != nil {
		panic(err)
	}
	return s
}

// TestClaimOneContainerAtATime: an init container and the app container after it share a
// claim's CPUs; a second container running beside the app is refused them.
func TestClaimOneContainerAtATime(t *testing.T) {
	store := grant.Store{Dir: t.TempDir()}
	rt := newRuntime(t)
	startAgent(t, rt, newNode(t, testTopology, draPools), openStore(t, t.TempDir()), nriplugin.Options{DRAStateDir: store.Dir})
	pod := rt.runPod("staged", nil)
	putGrant(t, store, "c1", []*api.PodSandbox{pod}, exclusive("exclusive_d", "2,10"))
	setup, err := rt.createEnv(pod, "setup", claimEnv("c1"))
	if err != nil {
		t.Fatal(err)
	}
	rt.stopCtr(setup.ctr)
	app, err := rt.createEnv(pod, "app", claimEnv("c1"))
	if err != nil || app.cpus() != "2,10" {
		t.Fatalf("app after the init container: cpuset %q, %v; want 2,10", app.cpus(), err)
	}
	if _, err := rt.createEnv(pod, "sidecar", claimEnv("c1")); err == nil || !strings.Contains(err.Error(), "held by [staged/app]") {
		t.Errorf("a second running container on the claim: %v; want refused, held by staged/app", err)
	}
}
