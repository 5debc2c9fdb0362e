package vkadapt_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/e2e/vkadapt"
	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/runtime"
)

// virtual-kubelet's node/api starts opencensus's view worker at init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// vkProvider has virtual-kubelet's methods and the three lines that give
// it nodekit's.
type vkProvider struct {
	logOpts api.ContainerLogOpts
	sizes   []api.TermSize
}

var (
	_ api.ContainerLogsHandlerFunc   = (&vkProvider{}).GetContainerLogs
	_ api.ContainerExecHandlerFunc   = (&vkProvider{}).RunInContainer
	_ api.ContainerAttachHandlerFunc = (&vkProvider{}).AttachToContainer

	_ provider.ContainerLogsProvider   = (*vkProvider)(nil)
	_ provider.ContainerExecProvider   = (*vkProvider)(nil)
	_ provider.ContainerAttachProvider = (*vkProvider)(nil)
)

func (p *vkProvider) GetContainerLogs(_ context.Context, ns, pod, c string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	p.logOpts = opts
	return io.NopCloser(strings.NewReader(ns + "/" + pod + "/" + c)), nil
}

func (p *vkProvider) RunInContainer(_ context.Context, _, _, _ string, cmd []string, a api.AttachIO) error {
	if a.Stderr() != nil {
		return fmt.Errorf("stderr not asked for, yet not nil")
	}
	io.Copy(a.Stdout(), a.Stdin())
	fmt.Fprint(a.Stdout(), strings.Join(cmd, " "))
	return a.Stdout().Close()
}

func (p *vkProvider) AttachToContainer(ctx context.Context, _, _, _ string, a api.AttachIO) error {
	if !a.TTY() {
		return fmt.Errorf("no TTY")
	}
	for sz := range a.Resize() {
		p.sizes = append(p.sizes, sz)
	}
	return nil
}

func (p *vkProvider) ContainerLogs(ctx context.Context, ns, pod, c string, o *v1.PodLogOptions) (io.ReadCloser, error) {
	return vkadapt.ContainerLogs(ctx, p, ns, pod, c, o)
}

func (p *vkProvider) ExecInContainer(ctx context.Context, ns, pod, c string, cmd []string, s runtime.AttachIO) error {
	return vkadapt.Exec(ctx, p, ns, pod, c, cmd, s)
}

func (p *vkProvider) AttachContainer(ctx context.Context, ns, pod, c string, s runtime.AttachIO) error {
	return vkadapt.Attach(ctx, p, ns, pod, c, s)
}

func TestLogOptsAreVirtualKubeletsFieldForField(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		in   *v1.PodLogOptions
		want api.ContainerLogOpts
	}{
		{"nil is none", nil, api.ContainerLogOpts{}},
		{"every field", &v1.PodLogOptions{TailLines: ptr.To[int64](5), LimitBytes: ptr.To[int64](100), Timestamps: true,
			Follow: true, Previous: true, SinceTime: &metav1.Time{Time: since}},
			api.ContainerLogOpts{Tail: 5, LimitBytes: 100, Timestamps: true, Follow: true, Previous: true, SinceTime: since}},
		{"sinceSeconds", &v1.PodLogOptions{SinceSeconds: ptr.To[int64](30)}, api.ContainerLogOpts{SinceSeconds: 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &vkProvider{}
			rc, err := p.ContainerLogs(context.Background(), "ns", "pod", "c", tc.in)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			if string(b) != "ns/pod/c" {
				t.Errorf("logs %q", b)
			}
			if p.logOpts != tc.want {
				t.Errorf("options %+v, want %+v", p.logOpts, tc.want)
			}
		})
	}
}

func TestExecGetsTheStreamsAskedFor(t *testing.T) {
	var out bytes.Buffer
	err := (&vkProvider{}).ExecInContainer(context.Background(), "ns", "pod", "c", []string{"echo", "hi"},
		runtime.AttachIO{Stdin: strings.NewReader("in "), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "in echo hi" {
		t.Errorf("stdout %q", out.String())
	}
}

func TestAttachGetsResizesUntilItReturns(t *testing.T) {
	resize := make(chan runtime.TermSize, 2)
	resize <- runtime.TermSize{Width: 80, Height: 24}
	resize <- runtime.TermSize{Width: 100, Height: 40}
	close(resize)
	p := &vkProvider{}
	if err := p.AttachContainer(context.Background(), "ns", "pod", "c", runtime.AttachIO{TTY: true, Resize: resize}); err != nil {
		t.Fatal(err)
	}
	want := []api.TermSize{{Width: 80, Height: 24}, {Width: 100, Height: 40}}
	if fmt.Sprint(p.sizes) != fmt.Sprint(want) {
		t.Errorf("sizes %v, want %v", p.sizes, want)
	}

	// A provider that never reads the sizes does not keep the forwarder.
	pending := make(chan runtime.TermSize, 1)
	pending <- runtime.TermSize{Width: 1, Height: 1}
	err := vkadapt.WithAttachIO(context.Background(), runtime.AttachIO{TTY: true, Resize: pending}, func(api.AttachIO) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
}
