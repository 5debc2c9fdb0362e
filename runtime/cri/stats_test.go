package cri_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/stats"
)

func TestListPodStats(t *testing.T) {
	for _, tc := range []struct {
		name         string
		sandboxStats bool
		sandboxErr   error
		wantPodCPU   *uint64
	}{
		{"container stats with the sandbox's", true, nil, u64(900)},
		{"container stats alone where the sandbox has none", false, nil, nil},
		{"a runtime without ListPodSandboxStats", true, status.Error(codes.Unimplemented, "no"), nil},
		{"a failing ListPodSandboxStats leaves the pod's figures out", true, status.Error(codes.Unknown, "cgroupPath is empty"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEnv(t)
			pod := newPod("web", "busybox:1")
			b := runtime.NewBackoff(0, 0, 0, e.clock)
			e.sync(t, pod, b)
			st := e.status(t, pod)
			require.NotEmpty(t, st.SandboxStatuses)
			sbID := st.SandboxStatuses[0].ID
			ids := e.srv.ContainerIDs("main")
			require.Len(t, ids, 1)
			e.srv.Runtime.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
				Attributes:    &runtimeapi.ContainerAttributes{Id: ids[0], Metadata: &runtimeapi.ContainerMetadata{Name: "main"}},
				Cpu:           &runtimeapi.CpuUsage{Timestamp: t0.UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 500}},
				Memory:        &runtimeapi.MemoryUsage{Timestamp: t0.UnixNano(), WorkingSetBytes: &runtimeapi.UInt64Value{Value: 1000}},
				WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: t0.UnixNano(), UsedBytes: &runtimeapi.UInt64Value{Value: 4096}},
			}})
			if tc.sandboxStats {
				e.srv.Runtime.SetFakePodSandboxStats([]*runtimeapi.PodSandboxStats{{
					Attributes: &runtimeapi.PodSandboxAttributes{Id: sbID},
					Linux: &runtimeapi.LinuxPodSandboxStats{
						Cpu:     &runtimeapi.CpuUsage{Timestamp: t0.UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 900}},
						Process: &runtimeapi.ProcessUsage{ProcessCount: &runtimeapi.UInt64Value{Value: 3}},
					},
				}})
			}
			if tc.sandboxErr != nil {
				e.srv.SetError("ListPodSandboxStats", tc.sandboxErr)
			}
			for range 2 {
				got, err := e.m.ListPodStats(e.ctx)
				require.NoError(t, err)
				require.Len(t, got, 1)
				p := got[0]
				assert.Equal(t, pod.UID, p.UID)
				assert.Equal(t, sbID, p.SandboxID)
				require.Len(t, p.Containers, 1)
				c := p.Containers[0]
				assert.Equal(t, "main", c.Name)
				assert.Equal(t, ids[0], c.ID.ID)
				assert.Equal(t, u64(500), c.CPU.UsageCoreNanoSeconds)
				assert.Nil(t, c.CPU.UsageNanoCores, "no rate from the runtime")
				assert.Equal(t, u64(1000), c.Memory.WorkingSetBytes)
				assert.Equal(t, u64(4096), c.WritableLayer.UsedBytes)
				if tc.wantPodCPU == nil {
					assert.Nil(t, p.CPU)
				} else {
					assert.Equal(t, tc.wantPodCPU, p.CPU.UsageCoreNanoSeconds)
					assert.Equal(t, u64(3), p.Processes)
				}
			}
			if status.Code(tc.sandboxErr) == codes.Unimplemented {
				assert.Equal(t, 1, e.srv.Calls("ListPodSandboxStats"), "Unimplemented is not asked again")
			} else {
				assert.Equal(t, 2, e.srv.Calls("ListPodSandboxStats"))
			}
		})
	}
}

func TestListPodStatsFails(t *testing.T) {
	e := newFakeEnv(t)
	e.srv.SetError("ListContainerStats", status.Error(codes.Unavailable, "down"))
	_, err := e.m.ListPodStats(e.ctx)
	assert.ErrorContains(t, err, "ListContainerStats")
}

func u64(v uint64) *uint64 { return &v }

// TestSummaryOnContainerd measures a running busybox pod that burns some
// CPU: the runtime's stats and the stats Summary built on them have
// non-zero CPU and memory.
func TestSummaryOnContainerd(t *testing.T) {
	m, image, _ := realManager(t)
	ctx := context.Background()
	pod := realPod("stats", image, func(p *v1.Pod) {
		p.Spec.Containers[0].Command = []string{"sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exec sleep 3600"}
	})
	cleanup(t, m, pod)
	syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("main"))

	sp, err := stats.New(stats.Config{NodeName: "node-1", Runtime: m})
	require.NoError(t, err)
	var web *statsapi.PodStats
	require.Eventually(t, func() bool {
		s, err := sp.Summary(ctx, true)
		require.NoError(t, err)
		for i := range s.Pods {
			if s.Pods[i].PodRef.UID == string(pod.UID) {
				web = &s.Pods[i]
			}
		}
		return web != nil && len(web.Containers) == 1 && web.Containers[0].CPU != nil &&
			web.Containers[0].CPU.UsageCoreNanoSeconds != nil && *web.Containers[0].CPU.UsageCoreNanoSeconds > 0
	}, 30*time.Second, 200*time.Millisecond, "the pod's container uses CPU")
	c := web.Containers[0]
	assert.Equal(t, "main", c.Name)
	require.NotNil(t, c.Memory)
	require.NotNil(t, c.Memory.WorkingSetBytes)
	assert.Positive(t, *c.Memory.WorkingSetBytes, "the container's working set")
	require.NotNil(t, web.CPU)
	assert.Positive(t, *web.CPU.UsageCoreNanoSeconds, "the pod's CPU")
	require.NotNil(t, web.Memory)
	assert.Positive(t, *web.Memory.WorkingSetBytes, "the pod's working set")
	assert.NotNil(t, c.Rootfs, "the writable layer")
}
