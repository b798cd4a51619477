package deviceplugin

import (
	"os"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// TestSocketRemovedBeforeStat: the kubelet clears its dir as it starts. A socket removed
// between serve's listen and its stat leaves the endpoint with no socket identity; the
// next poll must serve it again and register it, not take the missing socket for its own.
func TestSocketRemovedBeforeStat(t *testing.T) {
	dir := shortDir(t)
	k := startKubelet(t, dir)
	p, err := New(testNode(t, testTopo, testPools), Options{Dir: dir}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	r := p.current()[0]
	e := newEndpoint(r, dir, testLog(t))
	t.Cleanup(e.stop)
	if err := e.serve(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.path()); err != nil {
		t.Fatal(err)
	}
	e.sock = statID(e.path()) // what serve's stat finds after the removal

	p.sync(ctxT(t), map[string]*endpoint{r.name: e})
	if _, err := os.Stat(e.path()); err != nil {
		t.Fatalf("not served again: %v", err)
	}
	reg := k.registrations(t, 1)[r.name]
	stream, err := dial(t, dir, reg).ListAndWatch(ctxT(t), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(devicesOf(t, stream)); n != r.capacity() {
		t.Errorf("%d devices, want %d", n, r.capacity())
	}
}
