// Package podresources reads what the kubelet allocated to the containers of its pods, through
// its pod resources API v1 (k8s.io/kubelet/pkg/apis/podresources/v1) on a unix socket,
// DefaultSocket
// (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/#monitoring-device-plugin-resources):
// per container, the device IDs of each extended resource, as device plugins' Allocate
// handed them out.
//
// Pod asks for one pod with Get where the kubelet serves it (feature gate
// KubeletPodResourcesGet: beta and on from Kubernetes 1.34, alpha and off in 1.27-1.33) and
// with List, which lists every pod, where it does not; the first refusal of Get is remembered.
// The kubelet answers both from memory. The API is keyed by namespace and name, not UID.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultSocket is where the kubelet serves the pod resources API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessage bounds an answer: a List of a node's pods (gRPC's default of 4 MiB is tight for
// hundreds of pods with many devices each).
const maxMessage = 16 << 20

// Devices are one container's allocated device IDs, by extended resource name.
type Devices map[string][]string

// Pod is the devices of a pod's containers, by container name. A container the kubelet
// lists without devices has an empty Devices.
type Pod map[string]Devices

// Ref names a pod.
type Ref struct{ Namespace, Name string }

func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// ErrNoPod: the kubelet has no pod of that namespace and name.
var ErrNoPod = errors.New("the kubelet has no such pod")

// Client reads the pod resources API. Create it with Dial; it is safe for concurrent use.
type Client struct {
	conn  *grpc.ClientConn
	api   v1.PodResourcesListerClient
	noGet atomic.Bool // the kubelet refused Get: List is used
}

// Dial returns a client of the API on socket. It does not connect yet: each call does as
// needed, so a kubelet that is not up yet (or restarts) fails calls, not Dial.
func Dial(socket string) (*Client, error) {
	abs, err := filepath.Abs(socket)
	if err != nil {
		return nil, fmt.Errorf("pod resources socket %q: %w", socket, err)
	}
	conn, err := grpc.NewClient("unix://"+abs, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("pod resources socket %s: %w", abs, err)
	}
	return &Client{conn: conn, api: v1.NewPodResourcesListerClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Pod returns the devices of pod ref's containers. It asks with Get unless the kubelet
// refused it before, and with List when Get is refused, fails other than for the connection
// or ctx, or omits container (kubelets before 1.30 leave init containers out of Get's
// answer; "" checks none). ErrNoPod when the kubelet has no such pod.
func (c *Client) Pod(ctx context.Context, ref Ref, container string) (Pod, error) {
	if !c.noGet.Load() {
		rsp, err := c.api.Get(ctx, &v1.GetPodResourcesRequest{PodNamespace: ref.Namespace, PodName: ref.Name})
		switch {
		case err == nil && rsp.GetPodResources() != nil:
			p := podOf(rsp.GetPodResources())
			if _, ok := p[container]; ok || container == "" {
				return p, nil
			}
		case getRefused(err):
			c.noGet.Store(true)
		case transportFailed(err):
			return nil, fmt.Errorf("pod resources Get %s: %w", ref, err)
		}
	}
	pods, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := pods[ref]
	if !ok {
		return nil, fmt.Errorf("pod %s: %w", ref, ErrNoPod)
	}
	return p, nil
}

// List returns the devices of every pod the kubelet has.
func (c *Client) List(ctx context.Context) (map[Ref]Pod, error) {
	rsp, err := c.api.List(ctx, &v1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("pod resources List: %w", err)
	}
	out := make(map[Ref]Pod, len(rsp.GetPodResources()))
	for _, p := range rsp.GetPodResources() {
		out[Ref{Namespace: p.GetNamespace(), Name: p.GetName()}] = podOf(p)
	}
	return out, nil
}

// GetRefused reports whether the kubelet does not serve Get: its gRPC server lacks it
// (before 1.27), or the feature gate is off ("PodResources API Get method disabled").
func getRefused(err error) bool {
	s, ok := status.FromError(err)
	return ok && (s.Code() == codes.Unimplemented || strings.Contains(s.Message(), "Get method disabled"))
}

// transportFailed reports whether err is one List would meet too: no connection, or ctx over.
func transportFailed(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// podOf collects each container's device IDs by resource (the kubelet lists one entry per
// resource and NUMA node).
func podOf(p *v1.PodResources) Pod {
	out := make(Pod, len(p.GetContainers()))
	for _, c := range p.GetContainers() {
		d := Devices{}
		for _, cd := range c.GetDevices() {
			d[cd.GetResourceName()] = append(d[cd.GetResourceName()], cd.GetDeviceIds()...)
		}
		out[c.GetName()] = d
	}
	return out
}
