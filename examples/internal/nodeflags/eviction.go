package nodeflags

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/eviction"
)

// Eviction are the kubelet's node-pressure eviction flags.
type Eviction struct {
	hard, soft, softGrace, minReclaim string
	transition                        time.Duration
	maxPodGrace                       int64
	memcg                             bool
	thresholds                        []eviction.Threshold
}

// AddFlags defines -eviction-hard, -eviction-soft,
// -eviction-soft-grace-period, -eviction-minimum-reclaim,
// -eviction-pressure-transition-period, -eviction-max-pod-grace-period and
// -kernel-memcg-notification on fs, with the kubelet's defaults.
func (e *Eviction) AddFlags(fs *flag.FlagSet) {
	def := eviction.DefaultEvictionHard()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(def)) {
		parts = append(parts, k+"<"+def[k])
	}
	fs.StringVar(&e.hard, "eviction-hard", strings.Join(parts, ","), "hard eviction thresholds `signal<quantity-or-percent,...` (memory.available, allocatableMemory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available); a pod is evicted at once when one is met; a value replaces the whole default; empty for none")
	fs.StringVar(&e.soft, "eviction-soft", "", "soft eviction thresholds `signal<quantity-or-percent,...`, met for their -eviction-soft-grace-period before a pod is evicted")
	fs.StringVar(&e.softGrace, "eviction-soft-grace-period", "", "grace periods `signal=duration,...` of the -eviction-soft thresholds, one for each")
	fs.StringVar(&e.minReclaim, "eviction-minimum-reclaim", "", "`signal=quantity-or-percent,...` a met threshold stays met until the signal is this much above it")
	fs.DurationVar(&e.transition, "eviction-pressure-transition-period", 5*time.Minute, "how long a pressure condition stays after its last threshold went")
	fs.Int64Var(&e.maxPodGrace, "eviction-max-pod-grace-period", 0, "grace period in seconds, at most, of pods evicted for a soft threshold; negative: the pod's own")
	fs.BoolVar(&e.memcg, "kernel-memcg-notification", false, "check memory thresholds as soon as the kernel's memory cgroup notification fires, besides every 10s (cgroup v1 only)")
}

// Validate parses the thresholds.
func (e *Eviction) Validate() error {
	var stmts [4]map[string]string
	for i, f := range []struct{ name, value, sep string }{
		{"-eviction-hard", e.hard, "<"}, {"-eviction-soft", e.soft, "<"},
		{"-eviction-soft-grace-period", e.softGrace, "="}, {"-eviction-minimum-reclaim", e.minReclaim, "="},
	} {
		m, err := eviction.ParseMap(f.value, f.sep)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUsage, f.name, err)
		}
		stmts[i] = m
	}
	ts, err := eviction.ParseThresholdConfig(false, stmts[0], stmts[1], stmts[2], stmts[3])
	if err != nil {
		return fmt.Errorf("%w: eviction flags: %w", ErrUsage, err)
	}
	if e.transition < 0 {
		return fmt.Errorf("%w: -eviction-pressure-transition-period must not be negative, got %s", ErrUsage, e.transition)
	}
	e.thresholds = append([]eviction.Threshold{}, ts...) // not nil: none means none
	return nil
}

// Thresholds are the thresholds parsed by Validate.
func (e *Eviction) Thresholds() []eviction.Threshold { return slices.Clone(e.thresholds) }

// Apply gives c an eviction manager of the flags over summary, the node's
// Summary API. A nil summary leaves c without one: there is nothing to
// watch.
func (e *Eviction) Apply(c *agent.Config, summary eviction.SummaryProvider) {
	if summary == nil {
		return
	}
	c.Eviction = &eviction.Config{
		Summary:                  summary,
		Thresholds:               append([]eviction.Threshold{}, e.thresholds...),
		PressureTransitionPeriod: e.transition,
		MaxPodGracePeriodSeconds: e.maxPodGrace,
	}
	if e.memcg {
		c.Eviction.MemoryNotifier = eviction.MemcgNotifier{}
	}
}
