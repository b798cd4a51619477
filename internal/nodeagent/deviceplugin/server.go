package deviceplugin

import (
	"context"
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// server is the DevicePlugin service of one resource. A pool config reload may swap the
// resource for one with other devices; ListAndWatch streams then send the new ones.
type server struct {
	pluginapi.UnimplementedDevicePluginServer
	cur *atomic.Pointer[resource]
	log *slog.Logger // with the resource name
}

var _ pluginapi.DevicePluginServer = (*server)(nil)

// options are what podfence's device plugins support: GetPreferredAllocation, no PreStart.
func options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}

func (s *server) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return options(), nil
}

// ListAndWatch sends the devices, then again whenever their health changes, until the
// kubelet hangs up or the server stops.
func (s *server) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		res := s.cur.Load()
		devs, changed := res.devices()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return status.Errorf(codes.Unavailable, "send the devices of %s: %v", res.name, err)
		}
		s.log.Debug("devices sent", "devices", len(devs))
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// GetPreferredAllocation answers each container request with the allocator's choice.
func (s *server) GetPreferredAllocation(_ context.Context,
	req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	res, resp := s.cur.Load(), &pluginapi.PreferredAllocationResponse{}
	for i, c := range req.ContainerRequests {
		ids, err := res.preferred(c)
		if err != nil {
			s.log.Warn("preferred allocation refused", "container", i, "err", err)
			return nil, status.Errorf(codes.InvalidArgument, "preferred allocation of %s, container request %d: %v", res.name, i, err)
		}
		s.log.Debug("preferred allocation", "container", i, "size", c.AllocationSize, "mustInclude", c.MustIncludeDeviceIDs, "devices", ids)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate tells each container its CPUs: env, and for exclusive pools the annotation the
// NRI agent takes as the container's exact CPUs.
func (s *server) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	res, resp := s.cur.Load(), &pluginapi.AllocateResponse{}
	for i, c := range req.ContainerRequests {
		r, err := res.allocate(c.DevicesIds)
		if err != nil {
			s.log.Warn("allocation refused", "container", i, "err", err)
			return nil, status.Errorf(codes.InvalidArgument, "allocate %s, container request %d: %v", res.name, i, err)
		}
		s.log.Info("allocated", "container", i, "devices", len(c.DevicesIds), "env", r.Envs, "annotations", r.Annotations)
		resp.ContainerResponses = append(resp.ContainerResponses, r)
	}
	return resp, nil
}

func (s *server) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
