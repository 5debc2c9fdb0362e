package cri_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/dns"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

type dnsFunc func(*v1.Pod) (*runtimeapi.DNSConfig, error)

func (f dnsFunc) PodDNS(p *v1.Pod) (*runtimeapi.DNSConfig, error) { return f(p) }

func TestDNSFailureFailsTheSandboxAndStartsNothing(t *testing.T) {
	broken := errors.New("host resolv.conf: line 2: nameserver without an address")
	e := newFakeEnv(t, func(c *cri.Config) {
		c.DNS = dnsFunc(func(*v1.Pod) (*runtimeapi.DNSConfig, error) { return nil, broken })
	})
	res := e.sync(t, newPod("dnsfail", "busybox:1"), nil)
	require.ErrorIs(t, res.Error(), runtime.ErrCreatePodSandbox)
	require.ErrorIs(t, res.Error(), broken)
	require.Equal(t, "CreatePodSandboxError", runtime.Reason(res.Error()))
	require.Zero(t, e.srv.Calls("RunPodSandbox"))
	require.Zero(t, e.srv.Calls("CreateContainer"))
}

func TestDNSFailureWithARunningSandboxFailsItsConfiguration(t *testing.T) {
	fail := false
	e := newFakeEnv(t, func(c *cri.Config) {
		c.DNS = dnsFunc(func(*v1.Pod) (*runtimeapi.DNSConfig, error) {
			if fail {
				return nil, errors.New("unreadable")
			}
			return &runtimeapi.DNSConfig{}, nil
		})
	})
	pod := newPod("dnslate", "busybox:1", twoContainers)
	e.srv.SetBehavior("main", fakecri.Behavior{ExitOnStart: true, ExitCode: 1})
	require.NoError(t, e.sync(t, pod, nil).Error())
	fail = true
	res := e.sync(t, pod, nil) // main is to be restarted in the running sandbox
	require.ErrorIs(t, res.Error(), runtime.ErrConfigPodSandbox)
	require.Equal(t, []string{"ConfigPodSandbox " + string(pod.UID)}, steps(res))
}

func TestRealClusterFirstPodGetsTheClusterResolvConf(t *testing.T) {
	m0, image, _ := realManager(t)
	m0.Close()
	host := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(host, []byte("nameserver 192.0.2.53\nsearch corp.example\noptions timeout:2\n"), 0o644))
	d, err := dns.New(dns.Config{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: host})
	require.NoError(t, err)
	logs := t.TempDir()
	m, err := cri.New(context.Background(), cri.Config{Endpoint: testenv.CRIEndpoint(t), PodLogsRoot: logs, PodsRoot: t.TempDir(), DNS: d})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })

	tests := []struct {
		name        string
		policy      v1.DNSPolicy
		hostNetwork bool
		want        []string
	}{
		{"dnscg-clusterfirst", v1.DNSClusterFirst, false,
			[]string{"search dnscg.svc.cluster.local svc.cluster.local cluster.local corp.example", "nameserver 10.96.0.10", "options ndots:5"}},
		{"dnscg-default", v1.DNSDefault, false,
			[]string{"search corp.example", "nameserver 192.0.2.53", "options timeout:2"}},
		{"dnscg-hostnet", v1.DNSClusterFirst, true,
			[]string{"search corp.example", "nameserver 192.0.2.53", "options timeout:2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := realPod(tt.name, image, func(p *v1.Pod) {
				p.Namespace = "dnscg"
				p.Spec.DNSPolicy, p.Spec.HostNetwork = tt.policy, tt.hostNetwork
				p.Spec.Containers[0].Command = []string{"sh", "-c", "cat /etc/resolv.conf; exec sleep 3600"}
			})
			cleanup(t, m, pod)
			syncUntil(t, context.Background(), m, pod, nil, 50, 100*time.Millisecond, running("main"))
			var out string
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(filepath.Join(logDir(logs, pod), "main", "0.log"))
				out = string(b)
				return err == nil && strings.Contains(out, "nameserver")
			}, logWait, 50*time.Millisecond)
			for _, line := range tt.want {
				require.Contains(t, out, "stdout F "+line+"\n")
			}
		})
	}
}

// The sandbox's config (and so its DNS, whose MissingClusterDNS events are
// apiserver writes) is made only when a sandbox is created or a container
// starts: not on a sync with nothing to start, nor on one that finds its
// container in back-off.
func TestSandboxConfigIsMadeOnlyToStartSomething(t *testing.T) {
	calls := 0
	e := newFakeEnv(t, func(c *cri.Config) {
		c.DNS = dnsFunc(func(*v1.Pod) (*runtimeapi.DNSConfig, error) { calls++; return &runtimeapi.DNSConfig{}, nil })
	})
	pod := newPod("dnslazy", "busybox:1")
	require.NoError(t, e.sync(t, pod, nil).Error())
	require.Equal(t, 1, calls, "the new sandbox's config")
	require.NoError(t, e.sync(t, pod, nil).Error())
	require.Equal(t, 1, calls, "nothing to start")

	crash := newPod("dnsbackoff", "busybox:1")
	e.srv.SetBehavior("main", fakecri.Behavior{ExitOnStart: true, ExitCode: 1})
	b := runtime.NewBackoff(10*time.Second, time.Minute, 0, e.clock)
	require.NoError(t, e.sync(t, crash, b).Error())
	require.NoError(t, e.sync(t, crash, b).Error(), "the first restart is not held back")
	calls = 0
	require.ErrorIs(t, e.sync(t, crash, b).Error(), runtime.ErrCrashLoopBackOff)
	require.Zero(t, calls, "the restart is held back: nothing starts")
}
