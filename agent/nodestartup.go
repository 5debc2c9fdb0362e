package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/promutil"
)

// nodeStartupMetrics are the kubelet's node startup gauges, kept when the
// agent registers a Node (Config.Node).
type nodeStartupMetrics struct {
	preKubelet, preRegistration, registration, postRegistration, total prometheus.Gauge
}

func newNodeStartupMetrics(reg prometheus.Registerer) (*nodeStartupMetrics, error) {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: promutil.Subsystem, Name: name, Help: help})
	}
	m := &nodeStartupMetrics{
		preKubelet:       g("node_startup_pre_kubelet_duration_seconds", "Duration in seconds of node startup before kubelet starts."),
		preRegistration:  g("node_startup_pre_registration_duration_seconds", "Duration in seconds of node startup before registration."),
		registration:     g("node_startup_registration_duration_seconds", "Duration in seconds of node startup during registration."),
		postRegistration: g("node_startup_post_registration_duration_seconds", "Duration in seconds of node startup after registration."),
		total:            g("node_startup_duration_seconds", "Duration in seconds of node startup in total."),
	}
	if err := promutil.Register(reg, m.preKubelet, m.preRegistration, m.registration, m.postRegistration, m.total); err != nil {
		return nil, fmt.Errorf("registering node startup metrics: %w: %w", err, ErrInvalidConfig)
	}
	return m, nil
}

// watchNodeStartup sets the node startup gauges as the kubelet's tracker
// does: before the agent (from boot), before registration (agent start to
// the node controller's start), registration, after registration (to the
// first Ready) and in total (boot to Ready). Boot time comes from
// /proc/stat; where it cannot be read the two gauges that need it stay 0.
// Unlike the kubelet's, a Node that existed already counts as registered
// when it was reconciled.
func (a *Agent) watchNodeStartup(ctx context.Context, start, nodeStart time.Time) error {
	m := a.metrics.node
	clk := a.cfg.Clock
	boot, bootKnown := bootTime()
	if bootKnown {
		m.preKubelet.Set(start.Sub(boot).Seconds())
	}
	m.preRegistration.Set(nodeStart.Sub(start).Seconds())
	select {
	case <-ctx.Done():
		return nil
	case <-a.node.Registered():
	}
	registered := clk.Now()
	m.registration.Set(registered.Sub(nodeStart).Seconds())
	t := clk.NewTicker(time.Second)
	defer t.Stop()
	for !isNodeReady(a.node.Node()) {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
	ready := clk.Now()
	m.postRegistration.Set(ready.Sub(registered).Seconds())
	if bootKnown {
		m.total.Set(ready.Sub(boot).Seconds())
	}
	return nil
}

func isNodeReady(n *v1.Node) bool {
	if n == nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// bootTime reads the host's boot time (btime of /proc/stat).
func bootTime() (time.Time, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(s, 0), true
		}
	}
	return time.Time{}, false
}
