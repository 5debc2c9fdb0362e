package fake_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

var _ runtime.PodDialer = (*fake.Runtime)(nil)

func withPort(c v1.Container, port int32) v1.Container {
	c.Ports = append(c.Ports, v1.ContainerPort{ContainerPort: port})
	return c
}

// TestDialPodListensWhileAContainerRunsAndIsReady: who listens on a pod's
// ports, and what a probe's connection gets.
func TestDialPodListensWhileAContainerRunsAndIsReady(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("slow", fake.Behavior{ReadyAfter: 10 * time.Second})
	pod := newPod("web", v1.RestartPolicyAlways, withPort(ctr("slow"), 8080), ctr("side"))
	require.NoError(t, sync(t, rt, pod, nil).Error())
	ip := status(t, rt, pod).IPs[0]
	hostPod := newPod("host", v1.RestartPolicyAlways, ctr("app"))
	hostPod.Spec.HostNetwork = true
	require.NoError(t, sync(t, rt, hostPod, nil).Error())
	ctx := context.Background()
	addr := func(port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

	dial := func(address string) error {
		c, err := rt.DialPod(ctx, "tcp", address)
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	refused := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		require.Contains(t, err.Error(), "connection refused")
	}

	t.Run("a declared port is refused until its container is ready", func(t *testing.T) {
		refused(t, dial(addr(8080)))
	})
	t.Run("a port no container declares is served by any running, ready container", func(t *testing.T) {
		require.NoError(t, dial(addr(9090)))
	})
	t.Run("an unknown IP is refused", func(t *testing.T) {
		refused(t, dial("192.0.2.1:8080"))
	})
	t.Run("a bad address is an error, not a refusal", func(t *testing.T) {
		err := dial("no-port")
		require.Error(t, err)
		require.NotContains(t, err.Error(), "connection refused")
	})
	clk.Step(10 * time.Second)
	t.Run("a declared port is served once its container is ready", func(t *testing.T) {
		require.NoError(t, dial(addr(8080)))
	})
	t.Run("an HTTP request gets 200", func(t *testing.T) {
		client := &http.Client{Transport: &http.Transport{DialContext: rt.DialPod, DisableKeepAlives: true}}
		resp, err := client.Get("http://" + addr(8080) + "/healthz")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "ok", string(body))
	})
	t.Run("a gRPC health check is SERVING for any service", func(t *testing.T) {
		conn, err := grpc.NewClient("passthrough:///"+addr(8080), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return rt.DialPod(ctx, "tcp", a) }))
		require.NoError(t, err)
		defer conn.Close()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{Service: "my.Service"})
		require.NoError(t, err)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	})
	t.Run("a host-network pod is not reached through the fake network", func(t *testing.T) {
		require.Empty(t, status(t, rt, hostPod).IPs)
	})
	t.Run("a port is refused once its container exited", func(t *testing.T) {
		require.NoError(t, rt.ExitContainer(pod.UID, "slow", 1, "Error"))
		refused(t, dial(addr(8080)))
		require.NoError(t, dial(addr(9090)), "the other container still serves undeclared ports")
		require.NoError(t, rt.ExitContainer(pod.UID, "side", 0, ""))
		refused(t, dial(addr(9090)))
	})
	t.Run("only tcp is served", func(t *testing.T) {
		_, err := rt.DialPod(ctx, "udp", addr(8080))
		require.Error(t, err)
	})
}

// TestPodCIDRGivesSandboxesItsHostAddresses: with a PodCIDR, pod IPs are
// the prefix's host addresses in order, wrapping past its last, and a
// probe reaches a pod at its address; a prefix that is not IPv4 or has no
// room is refused.
func TestPodCIDRGivesSandboxesItsHostAddresses(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{PodCIDR: netip.MustParsePrefix("10.200.7.9/30")})
	var ips []string
	for i := range 3 {
		pod := newPod("p"+strconv.Itoa(i), v1.RestartPolicyAlways, withPort(ctr("app"), 80))
		require.NoError(t, sync(t, rt, pod, nil).Error())
		ips = append(ips, status(t, rt, pod).IPs[0])
	}
	require.Equal(t, []string{"10.200.7.9", "10.200.7.10", "10.200.7.9"}, ips)
	conn, err := rt.DialPod(context.Background(), "tcp", net.JoinHostPort(ips[1], "80"))
	require.NoError(t, err)
	require.NoError(t, conn.Close())

	for _, bad := range []string{"fd00::/64", "10.0.0.0/31", "10.0.0.1/32"} {
		_, err := fake.New(fake.Config{PodCIDR: netip.MustParsePrefix(bad)})
		require.ErrorIs(t, err, runtime.ErrInvalidConfig, bad)
	}
}
