// Package podresourcestest is a fake kubelet pod resources API (v1: List and Get) served over
// gRPC on a unix socket, for tests. It is imported from _test.go files only.
package podresourcestest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"google.golang.org/grpc"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Server answers as the kubelet does. Create it with Start; it stops when the test ends.
type Server struct {
	v1.UnimplementedPodResourcesListerServer
	// Socket is the unix socket it serves on.
	Socket string

	mu          sync.Mutex
	pods        map[string]*v1.PodResources // by "namespace/name"
	getOff      bool                        // Get answers as with the feature gate off
	getNoInit   map[string]bool             // containers Get leaves out, as kubelets before 1.30 do init containers
	block       chan struct{}               // non-nil: calls wait for it to close, or for their caller to give up
	gets, lists int
}

// Start serves on socket (a path in a short temp dir: unix socket paths are limited).
func Start(tb testing.TB, socket string) *Server {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{Socket: socket, pods: map[string]*v1.PodResources{}, getNoInit: map[string]bool{}}
	g := grpc.NewServer()
	v1.RegisterPodResourcesListerServer(g, s)
	go func() { _ = g.Serve(ln) }()
	tb.Cleanup(func() {
		s.Unblock()
		g.Stop()
	})
	return s
}

// SetPod records pod namespace/name with its containers' devices: container → resource
// name → device IDs. A container with a nil map has no devices.
func (s *Server) SetPod(namespace, name string, containers map[string]map[string][]string) {
	p := &v1.PodResources{Namespace: namespace, Name: name}
	names := make([]string, 0, len(containers))
	for c := range containers {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		cr := &v1.ContainerResources{Name: c}
		res := make([]string, 0, len(containers[c]))
		for r := range containers[c] {
			res = append(res, r)
		}
		sort.Strings(res)
		for _, r := range res {
			cr.Devices = append(cr.Devices, &v1.ContainerDevices{ResourceName: r, DeviceIds: containers[c][r]})
		}
		p.Containers = append(p.Containers, cr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[namespace+"/"+name] = p
}

// DisableGet makes Get fail as a kubelet with the feature gate KubeletPodResourcesGet off.
func (s *Server) DisableGet() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.getOff = true
}

// OmitFromGet leaves container out of Get's answers, as kubelets before 1.30 do init containers.
func (s *Server) OmitFromGet(container string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.getNoInit[container] = true
}

// Block makes every call wait until Unblock (or the caller's deadline): a kubelet that
// does not answer.
func (s *Server) Block() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.block == nil {
		s.block = make(chan struct{})
	}
}

// Unblock lets blocked and later calls through.
func (s *Server) Unblock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.block != nil {
		close(s.block)
		s.block = nil
	}
}

// Calls returns how many Get and List calls were answered or blocked so far.
func (s *Server) Calls() (gets, lists int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets, s.lists
}

// wait blocks while the server is blocked; false if ctx ended first.
func (s *Server) wait(ctx context.Context) bool {
	s.mu.Lock()
	b := s.block
	s.mu.Unlock()
	if b == nil {
		return true
	}
	select {
	case <-b:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) List(ctx context.Context, _ *v1.ListPodResourcesRequest) (*v1.ListPodResourcesResponse, error) {
	s.mu.Lock()
	s.lists++
	s.mu.Unlock()
	if !s.wait(ctx) {
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.pods))
	for k := range s.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rsp := &v1.ListPodResourcesResponse{}
	for _, k := range keys {
		rsp.PodResources = append(rsp.PodResources, s.pods[k])
	}
	return rsp, nil
}

func (s *Server) Get(ctx context.Context, req *v1.GetPodResourcesRequest) (*v1.GetPodResourcesResponse, error) {
	s.mu.Lock()
	s.gets++
	s.mu.Unlock()
	if !s.wait(ctx) {
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.getOff {
		return nil, fmt.Errorf("PodResources API Get method disabled") // the kubelet's words (codes.Unknown)
	}
	p, ok := s.pods[req.GetPodNamespace()+"/"+req.GetPodName()]
	if !ok {
		return nil, fmt.Errorf("pod %s in namespace %s not found", req.GetPodName(), req.GetPodNamespace())
	}
	out := &v1.PodResources{Namespace: p.Namespace, Name: p.Name}
	for _, c := range p.Containers {
		if !s.getNoInit[c.Name] {
			out.Containers = append(out.Containers, c)
		}
	}
	return &v1.GetPodResourcesResponse{PodResources: out}, nil
}
