package fakecri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// runtimeServer serves runtime/v1 RuntimeService over the upstream fake.
type runtimeServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	s *Server
}

func (r *runtimeServer) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if _, err := r.s.Runtime.Version(ctx, req.Version); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fakecri", RuntimeVersion: critest.FakeVersion, RuntimeApiVersion: "v1"}, nil
}

func (r *runtimeServer) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return r.s.Runtime.Status(ctx, req.Verbose)
}

func (r *runtimeServer) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	s := r.s
	cfg := req.GetConfig()
	if cfg.GetMetadata() == nil {
		return nil, status.Error(codes.InvalidArgument, "sandbox config must include metadata")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := critest.BuildSandboxName(cfg.Metadata)
	s.Runtime.Lock()
	_, exists := s.Runtime.Sandboxes[id]
	s.Runtime.Unlock()
	if exists {
		return nil, status.Errorf(codes.AlreadyExists, "sandbox name %q is reserved", id)
	}
	id, err := s.Runtime.RunPodSandbox(ctx, cfg, req.RuntimeHandler)
	if err != nil {
		return nil, err
	}
	s.Runtime.Lock()
	s.Runtime.Sandboxes[id].CreatedAt = s.clock.Now().UnixNano()
	s.publishLocked(id, id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	s.publishLocked(id, id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	s.Runtime.Unlock()
	s.sandboxConfigs[id] = cfg
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (r *runtimeServer) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Runtime.Lock()
	if _, ok := s.Runtime.Sandboxes[req.PodSandboxId]; !ok {
		s.Runtime.Unlock()
		return nil, status.Errorf(codes.NotFound, "sandbox %q not found", req.PodSandboxId)
	}
	// containerd kills what still runs in the sandbox.
	for _, c := range s.Runtime.Containers {
		if c.SandboxID == req.PodSandboxId && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			s.exitLocked(c, 137)
			s.publishLocked(c.Id, c.SandboxID, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
		}
	}
	s.Runtime.Unlock()
	if err := s.Runtime.StopPodSandbox(ctx, req.PodSandboxId); err != nil {
		return nil, err
	}
	s.publish(req.PodSandboxId, req.PodSandboxId, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *runtimeServer) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Runtime.Lock()
	for id, c := range s.Runtime.Containers {
		if c.SandboxID == req.PodSandboxId {
			delete(s.Runtime.Containers, id)
			delete(s.stopTimeouts, id)
			s.publishLocked(id, req.PodSandboxId, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
		}
	}
	_, existed := s.Runtime.Sandboxes[req.PodSandboxId]
	s.Runtime.Unlock()
	if err := s.Runtime.RemovePodSandbox(ctx, req.PodSandboxId); err != nil {
		return nil, err
	}
	if existed {
		s.publish(req.PodSandboxId, req.PodSandboxId, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	}
	delete(s.sandboxConfigs, req.PodSandboxId)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (r *runtimeServer) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	return r.s.Runtime.PodSandboxStatus(ctx, req.PodSandboxId, req.Verbose)
}

func (r *runtimeServer) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := r.s.Runtime.ListPodSandbox(ctx, req.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

func (r *runtimeServer) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	s := r.s
	cfg := req.GetConfig()
	if cfg.GetMetadata() == nil || cfg.GetImage() == nil {
		return nil, status.Error(codes.InvalidArgument, "container config must include metadata and image")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Runtime.Lock()
	sb, ok := s.Runtime.Sandboxes[req.PodSandboxId]
	ready := ok && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
	id := critest.BuildContainerName(cfg.Metadata, req.PodSandboxId)
	_, exists := s.Runtime.Containers[id]
	s.Runtime.Unlock()
	switch {
	case !ok:
		return nil, status.Errorf(codes.NotFound, "sandbox %q not found", req.PodSandboxId)
	case !ready:
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %q is not ready", req.PodSandboxId)
	case exists:
		return nil, status.Errorf(codes.AlreadyExists, "container name %q is reserved", id)
	}
	id, err := s.Runtime.CreateContainer(ctx, req.PodSandboxId, cfg, req.SandboxConfig)
	if err != nil {
		return nil, err
	}
	s.Runtime.Lock()
	c := s.Runtime.Containers[id]
	c.CreatedAt = s.clock.Now().UnixNano()
	c.Mounts = cfg.Mounts
	if cfg.LogPath != "" {
		if dir := s.sandboxConfigs[req.PodSandboxId].GetLogDirectory(); dir != "" {
			c.LogPath = filepath.Join(dir, cfg.LogPath)
		}
	}
	s.publishLocked(id, req.PodSandboxId, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	s.Runtime.Unlock()
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func (r *runtimeServer) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Runtime.Lock()
	c, ok := s.Runtime.Containers[req.ContainerId]
	var st runtimeapi.ContainerState
	if ok {
		st = c.State
	}
	s.Runtime.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q not found", req.ContainerId)
	}
	if st != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is in %s state, not created", req.ContainerId, st)
	}
	if err := s.Runtime.StartContainer(ctx, req.ContainerId); err != nil {
		return nil, err
	}
	s.Runtime.Lock()
	defer s.Runtime.Unlock()
	c.StartedAt = s.clock.Now().UnixNano()
	b := s.behaviors[c.Metadata.GetName()]
	if b.Log != "" && c.LogPath != "" {
		if err := writeLog(c.LogPath, b.Log, s.clock.Now().Format("2006-01-02T15:04:05.999999999Z07:00")); err != nil {
			return nil, status.Errorf(codes.Internal, "writing log: %v", err)
		}
	}
	s.publishLocked(c.Id, c.SandboxID, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	if b.ExitOnStart {
		s.exitLocked(c, b.ExitCode)
		s.publishLocked(c.Id, c.SandboxID, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

func writeLog(path, text, ts string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fmt.Fprintf(&b, "%s stdout F %s\n", ts, line)
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (r *runtimeServer) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Runtime.Lock()
	c, ok := s.Runtime.Containers[req.ContainerId]
	if ok {
		s.stopTimeouts[req.ContainerId] = req.Timeout
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			s.exitLocked(c, 0)
			s.publishLocked(c.Id, c.SandboxID, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
		} else if c.State == runtimeapi.ContainerState_CONTAINER_CREATED {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			c.FinishedAt = s.clock.Now().UnixNano()
			s.publishLocked(c.Id, c.SandboxID, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
		}
	}
	s.Runtime.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q not found", req.ContainerId)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *runtimeServer) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Runtime.Lock()
	c, ok := s.Runtime.Containers[req.ContainerId]
	running := ok && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	sandboxID := ""
	if ok {
		sandboxID = c.SandboxID
	}
	s.Runtime.Unlock()
	if running {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is running, stop it first", req.ContainerId)
	}
	if err := s.Runtime.RemoveContainer(ctx, req.ContainerId); err != nil {
		return nil, err
	}
	delete(s.stopTimeouts, req.ContainerId)
	if ok {
		s.publish(req.ContainerId, sandboxID, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *runtimeServer) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	items, err := r.s.Runtime.ListContainers(ctx, req.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: items}, nil
}

func (r *runtimeServer) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return r.s.Runtime.ContainerStatus(ctx, req.ContainerId, req.Verbose)
}

func (r *runtimeServer) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	var res *runtimeapi.ContainerResources
	if req.Linux != nil {
		res = &runtimeapi.ContainerResources{Linux: req.Linux}
	}
	if err := r.s.Runtime.UpdateContainerResources(ctx, req.ContainerId, res); err != nil {
		return nil, err
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog creates the log file anew, as containerd does after
// the kubelet renamed it; only a running container's log can be reopened.
func (r *runtimeServer) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	s := r.s
	s.Runtime.Lock()
	c, ok := s.Runtime.Containers[req.ContainerId]
	var st runtimeapi.ContainerState
	var path string
	if ok {
		st, path = c.State, c.LogPath
	}
	s.Runtime.Unlock()
	switch {
	case !ok:
		return nil, status.Errorf(codes.NotFound, "container %q not found", req.ContainerId)
	case st != runtimeapi.ContainerState_CONTAINER_RUNNING:
		return nil, status.Errorf(codes.FailedPrecondition, "container %q must be in running state", req.ContainerId)
	}
	if err := s.Runtime.ReopenContainerLog(ctx, req.ContainerId); err != nil {
		return nil, err
	}
	if path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "reopening log: %v", err)
		}
		f.Close()
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

func (r *runtimeServer) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	st, err := r.s.Runtime.ContainerStats(ctx, req.ContainerId)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: st}, nil
}

func (r *runtimeServer) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	st, err := r.s.Runtime.ListContainerStats(ctx, req.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: st}, nil
}

func (r *runtimeServer) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	st, err := r.s.Runtime.PodSandboxStats(ctx, req.PodSandboxId)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
}

func (r *runtimeServer) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	st, err := r.s.Runtime.ListPodSandboxStats(ctx, req.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: st}, nil
}

func (r *runtimeServer) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	if err := r.s.Runtime.UpdateRuntimeConfig(ctx, req.RuntimeConfig); err != nil {
		return nil, err
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

func (r *runtimeServer) RuntimeConfig(ctx context.Context, _ *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return r.s.Runtime.RuntimeConfig(ctx)
}

// imageServer serves runtime/v1 ImageService over the upstream fake.
type imageServer struct {
	runtimeapi.UnimplementedImageServiceServer
	s *Server
}

func (i *imageServer) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	imgs, err := i.s.Images.ListImages(ctx, req.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListImagesResponse{Images: imgs}, nil
}

func (i *imageServer) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	if req.GetImage() == nil {
		return nil, status.Error(codes.InvalidArgument, "image spec required")
	}
	return i.s.Images.ImageStatus(ctx, req.Image, req.Verbose)
}

func (i *imageServer) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	if req.GetImage() == nil {
		return nil, status.Error(codes.InvalidArgument, "image spec required")
	}
	i.s.pullsMu.Lock()
	i.s.pulls = append(i.s.pulls, Pull{Image: req.Image.Image, Auth: req.Auth})
	i.s.pullsMu.Unlock()
	ref, err := i.s.Images.PullImage(ctx, req.Image, req.Auth, req.SandboxConfig)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

func (i *imageServer) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	if req.GetImage() == nil {
		return nil, status.Error(codes.InvalidArgument, "image spec required")
	}
	if err := i.s.Images.RemoveImage(ctx, req.Image); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (i *imageServer) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return i.s.Images.ImageFsInfo(ctx)
}
