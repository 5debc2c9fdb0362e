package podview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// ErrInvalidConfig is wrapped by New when the Config is unusable.
var ErrInvalidConfig = errors.New("podview: invalid config")

// Config configures a View.
type Config struct {
	// Out receives the frames. Required.
	Out io.Writer
	// Pods lists the pods to show, for example agent.Agent.Pods. Required.
	Pods func() []*v1.Pod
	// Period is how often Run polls Pods. Default 500ms.
	Period time.Duration
	// Clock stamps frames and drives Run. Default the real clock.
	Clock clock.WithTicker
}

// View prints frames of the pod table when it changes. Its methods must not
// be called concurrently.
type View struct {
	c    Config
	last string
}

// New checks c and fills its defaults.
func New(c Config) (*View, error) {
	if c.Out == nil || c.Pods == nil {
		return nil, fmt.Errorf("%w: Out and Pods are required", ErrInvalidConfig)
	}
	if c.Period < 0 {
		return nil, fmt.Errorf("%w: negative Period %s", ErrInvalidConfig, c.Period)
	}
	if c.Period == 0 {
		c.Period = 500 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return &View{c: c}, nil
}

// Run calls Update every Period until ctx ends.
func (v *View) Run(ctx context.Context) {
	t := v.c.Clock.NewTicker(v.c.Period)
	defer t.Stop()
	v.Update()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			v.Update()
		}
	}
}

// Follow calls run while Run prints frames, then prints a last frame once
// run has returned, and returns run's error. Frames keep coming while run
// shuts down, for example while an agent stops its pods.
func (v *View) Follow(run func() error) error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.Run(ctx)
	}()
	err := run()
	cancel()
	<-done
	v.Update()
	return err
}

// Update prints a frame, a time-stamped header and the table, if the table
// differs from the last one printed, and reports whether it printed.
func (v *View) Update() bool {
	var b strings.Builder
	pods := v.c.Pods()
	Render(&b, pods)
	table := b.String()
	if table == v.last {
		return false
	}
	v.last = table
	fmt.Fprintf(v.c.Out, "--- %s  %d pods\n%s", v.c.Clock.Now().Format("15:04:05.000"), len(pods), table)
	return true
}

// Render writes pods as a table sorted by namespace and name, a line per
// container (init containers first, marked "init:"); the pod and its phase
// are repeated on each line so that the output greps well. A running
// container with a readiness probe shows "; ready" or "; not ready".
func Render(w io.Writer, pods []*v1.Pod) {
	sorted := append([]*v1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Namespace != sorted[j].Namespace {
			return sorted[i].Namespace < sorted[j].Namespace
		}
		return sorted[i].Name < sorted[j].Name
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tPHASE\tCONTAINER\tSTATE\tRESTARTS")
	for _, p := range sorted {
		name, phase := p.Name, string(p.Status.Phase)
		if p.Namespace != "" && p.Namespace != "default" {
			name = p.Namespace + "/" + name
		}
		if phase == "" {
			phase = "-"
		}
		if p.Status.Reason != "" {
			phase += " (" + p.Status.Reason + ")"
		}
		n := 0
		row := func(prefix string, cs []v1.ContainerStatus) {
			for _, c := range cs {
				st := State(c)
				if c.State.Running != nil && hasReadinessProbe(p, c.Name) {
					if c.Ready {
						st += "; ready"
					} else {
						st += "; not ready"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s%s\t%s\t%d\n", name, phase, prefix, c.Name, st, c.RestartCount)
				n++
			}
		}
		row("init:", p.Status.InitContainerStatuses)
		row("", p.Status.ContainerStatuses)
		if n == 0 {
			msg := p.Status.Message
			if msg == "" {
				msg = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t-\t%s\t-\n", name, phase, msg)
		}
	}
	_ = tw.Flush()
}

// hasReadinessProbe reports whether the pod's container (or sidecar) name
// has a readiness probe; only those show readiness, the rest are ready
// while running.
func hasReadinessProbe(p *v1.Pod, name string) bool {
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return cs[i].ReadinessProbe != nil
			}
		}
	}
	return false
}

// State describes a container's state in a few words: "running", "waiting
// <reason>" or "exited <code> (<reason>)", followed by the last exit of a
// restarted container.
func State(c v1.ContainerStatus) string {
	var s string
	switch st := c.State; {
	case st.Running != nil:
		s = "running"
	case st.Terminated != nil:
		s = terminated(st.Terminated)
	case st.Waiting != nil && st.Waiting.Reason != "":
		s = "waiting " + st.Waiting.Reason
	default:
		s = "waiting"
	}
	if t := c.LastTerminationState.Terminated; t != nil {
		s += ", last " + terminated(t)
	}
	return s
}

func terminated(t *v1.ContainerStateTerminated) string {
	if t.Reason == "" {
		return fmt.Sprintf("exited %d", t.ExitCode)
	}
	return fmt.Sprintf("exited %d (%s)", t.ExitCode, t.Reason)
}
