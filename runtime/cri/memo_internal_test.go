package cri

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

func TestStatusMemo(t *testing.T) {
	running := &runtime.ContainerStatus{State: runtime.ContainerStateRunning, StartedAt: time.Unix(1, 0)}
	for _, tc := range []struct {
		name  string
		put   runtime.ContainerState // the listed state the status was asked in
		ask   runtime.ContainerState // the listed state now
		found bool
	}{
		{"a running container listed running again is remembered", runtime.ContainerStateRunning, runtime.ContainerStateRunning, true},
		{"a running container listed exited is asked again", runtime.ContainerStateRunning, runtime.ContainerStateExited, false},
		{"a created container is never remembered", runtime.ContainerStateCreated, runtime.ContainerStateCreated, false},
		{"an unknown container is never remembered", runtime.ContainerStateUnknown, runtime.ContainerStateUnknown, false},
		{"a status that moved on since the listing is not remembered", runtime.ContainerStateExited, runtime.ContainerStateExited, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newStatusMemo()
			m.putContainer("c", tc.put, running)
			_, ok := m.container("c", tc.ask)
			require.Equal(t, tc.found, ok)
		})
	}

	t.Run("a full listing drops what it no longer shows", func(t *testing.T) {
		m := newStatusMemo()
		m.putContainer("kept", runtime.ContainerStateRunning, running)
		m.putContainer("gone", runtime.ContainerStateRunning, running)
		m.putSandbox("sb-kept", memoSandbox{ready: true})
		m.putSandbox("sb-gone", memoSandbox{ready: true})
		m.listed([]*runtimeapi.PodSandbox{{Id: "sb-kept"}}, []*runtimeapi.Container{{Id: "kept"}, {Id: "new"}})
		require.Len(t, m.containers, 1)
		require.Len(t, m.sandboxes, 1)
		_, ok := m.container("kept", runtime.ContainerStateRunning)
		require.True(t, ok)
		_, ok = m.sandbox("sb-kept", true)
		require.True(t, ok)
		_, ok = m.sandbox("sb-kept", false)
		require.False(t, ok, "a sandbox listed otherwise than when asked is asked again")
	})
}

// BenchmarkStatusMemoListed is the memo's share of a full listing of 1,000
// pods (a sandbox and a container each) whose statuses it remembers: what
// every relist on runtime/cri adds.
func BenchmarkStatusMemoListed(b *testing.B) {
	m := newStatusMemo()
	var sbs []*runtimeapi.PodSandbox
	var cs []*runtimeapi.Container
	running := &runtime.ContainerStatus{State: runtime.ContainerStateRunning, StartedAt: time.Unix(1, 0)}
	for i := range 1000 {
		id := fmt.Sprintf("%064d", i)
		sbs = append(sbs, &runtimeapi.PodSandbox{Id: "sb" + id})
		cs = append(cs, &runtimeapi.Container{Id: id})
		m.putSandbox("sb"+id, memoSandbox{ready: true, ips: []string{"10.0.0.1"}})
		m.putContainer(id, runtime.ContainerStateRunning, running)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.listed(sbs, cs)
	}
}
