// Command pf-podresources prints what the kubelet's pod-resources API (v1) reports, as one
// JSON object, for test/e2e/node/run.sh: the devices allocated to each running container (List)
// and the devices the node can allocate (GetAllocatableResources). It is the kubelet's own
// view of device-plugin allocations, the one monitoring agents read; List drops the
// allocations of pods that are gone.
//
//	pf-podresources -socket /var/lib/kubelet/pod-resources/kubelet.sock
//	{"pods":[{"namespace":"ns","name":"p","containers":[{"name":"app","devices":[{"resource":"podfence.io/exclusive_a","ids":["1"]}]}]}],
//	 "allocatable":[{"resource":"podfence.io/exclusive_a","ids":["1"]}]}
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

type devices struct {
	Resource string   `json:"resource"`
	IDs      []string `json:"ids"`
}

type container struct {
	Name    string    `json:"name"`
	Devices []devices `json:"devices"`
}

type pod struct {
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name"`
	Containers []container `json:"containers"`
}

type report struct {
	Pods        []pod     `json:"pods"`
	Allocatable []devices `json:"allocatable"`
}

func main() {
	socket := flag.String("socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "the kubelet's pod-resources socket")
	timeout := flag.Duration("timeout", 10*time.Second, "for both calls")
	flag.Parse()
	if err := run(*socket, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "pf-podresources:", err)
		os.Exit(1)
	}
}

func run(socket string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", socket, err)
	}
	defer conn.Close()
	client := podresourcesv1.NewPodResourcesListerClient(conn)
	list, err := client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return fmt.Errorf("List: %w", err)
	}
	alloc, err := client.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		return fmt.Errorf("GetAllocatableResources: %w", err)
	}
	out := report{Pods: []pod{}, Allocatable: convert(alloc.GetDevices())}
	for _, p := range list.GetPodResources() {
		op := pod{Namespace: p.GetNamespace(), Name: p.GetName(), Containers: []container{}}
		for _, c := range p.GetContainers() {
			op.Containers = append(op.Containers, container{Name: c.GetName(), Devices: convert(c.GetDevices())})
		}
		out.Pods = append(out.Pods, op)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func convert(in []*podresourcesv1.ContainerDevices) []devices {
	out := []devices{}
	for _, d := range in {
		out = append(out, devices{Resource: d.GetResourceName(), IDs: append([]string{}, d.GetDeviceIds()...)})
	}
	return out
}
