package nriplugin_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// podsSeen records the annotations of the pods the extensions get at Synchronize, by pod name.
type podsSeen struct {
	mu   sync.Mutex
	pods map[string]map[string]string
}

func (*podsSeen) Name() string { return "pods-seen" }

func (s *podsSeen) Synchronize(_ context.Context, pods []*api.PodSandbox, _ []*api.Container) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods = map[string]map[string]string{}
	for _, p := range pods {
		s.pods[p.GetName()] = p.GetAnnotations()
	}
	return nil
}

// TestSynchronizeEPCOfRunningClaims: at Synchronize, the extensions see the SGX EPC of the
// DRA claims of every running container as its limit annotation, beside the pod's own
// annotations, whatever other containers come before it; a stopped container's claim, a
// claim without EPC and a container without claims add nothing, and a claim without a grant
// is logged (only that one).
func TestSynchronizeEPCOfRunningClaims(t *testing.T) {
	store := grant.Store{Dir: t.TempDir()}
	var rn node
	p := rn.pod("enclave", map[string]string{"keep": "me"})
	withEnv := func(c *api.Container, env ...string) { c.Env = env }
	old := rn.run(p, "old", "", 0, 0)
	old.State = api.ContainerState_CONTAINER_STOPPED
	withEnv(old, claimEnv("e-old"))
	rn.run(p, "plain", "", 0, 0)
	withEnv(rn.run(p, "cpu", "", 0, 0), claimEnv("e-cpu"))
	withEnv(rn.run(p, "lost", "", 0, 0), claimEnv("e-lost"))
	withEnv(rn.run(p, "app", "", 0, 0), claimEnv("e-app"))
	pods := []*api.PodSandbox{p}
	putGrant(t, store, "e-old", pods, func(g *grant.Grant) { g.EPCBytes = 1 << 20 })
	putGrant(t, store, "e-app", pods, func(g *grant.Grant) { g.EPCBytes = 2 << 20 })
	putGrant(t, store, "e-cpu", pods, exclusive("exclusive_d", "3,11"))
	seen := &podsSeen{}
	_, lb := syncedLog(t, newNode(t, testTopology, draPools), nritest.NoCheckpoint{}, &rn,
		nriplugin.Options{DRAStateDir: store.Dir, Extensions: []nriplugin.Extension{seen}})
	seen.mu.Lock()
	got := seen.pods["enclave"]
	seen.mu.Unlock()
	want := map[string]string{"keep": "me", "epc-limit.nri.io/container.app": "2097152"}
	if !maps.Equal(got, want) {
		t.Errorf("extensions see annotations %v, want %v", got, want)
	}
	if len(p.Annotations) != 1 {
		t.Errorf("the runtime's pod annotations changed: %v", p.Annotations)
	}
	unread := lb.lines("running container's DRA claims unread")
	if len(unread) != 1 || !strings.Contains(unread[0], "container=lost") {
		t.Errorf("unread claims logged %q; want one line, for container lost", unread)
	}
}
