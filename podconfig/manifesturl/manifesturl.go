package manifesturl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/safeevent"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/internal/fieldwarn"
	"github.com/nodekit/nodekit/podconfig/staticpod"
	"github.com/nodekit/nodekit/podutil"
)

// Errors of a poll, wrapped with detail.
var (
	// ErrStatus: the server answered other than 200 OK.
	ErrStatus = errors.New("manifesturl: unexpected HTTP status")
	// ErrBodyTooLarge: the body exceeds Config.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("manifesturl: manifest body too large")
)

// Doer sends an HTTP request; *http.Client is one.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// Config configures a Source.
type Config struct {
	// URL serves the manifest (http or https). Required.
	URL string
	// Header is sent with every request.
	Header http.Header
	// NodeName names the node; static pods' names get it as a suffix.
	// Required.
	NodeName string
	// CheckFrequency is the polling period. Default 20s, as the kubelet's
	// http-check-frequency.
	CheckFrequency time.Duration
	// Timeout bounds each request, body included. Default 10s.
	Timeout time.Duration
	// MaxBodyBytes is the largest body accepted. Default 10 MiB, the
	// kubelet's limit for a manifest.
	MaxBodyBytes int64
	// Client sends the requests. Default a fresh &http.Client{}.
	Client Doer
	// Clock ticks the polls. Default the real clock.
	Clock clock.WithTicker
	// Log receives the source's logs. Default logr.Discard().
	Log logr.Logger
	// Recorder receives a FailedValidation event on the node for a body
	// that cannot be used. Default none.
	Recorder podconfig.EventRecorder
}

// Source polls a manifest URL; see the package doc.
type Source struct {
	c        Config
	node     *v1.ObjectReference
	last     []byte // last body processed, good or bad
	failures int
}

// New validates c, fills its defaults and returns a Source. Bad config gets
// an error wrapping podconfig.ErrInvalidConfig.
func New(c Config) (*Source, error) {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("manifesturl: URL %q is not an http(s) URL: %w", c.URL, podconfig.ErrInvalidConfig)
	}
	if c.NodeName == "" {
		return nil, fmt.Errorf("manifesturl: NodeName is required: %w", podconfig.ErrInvalidConfig)
	}
	if c.CheckFrequency < 0 || c.Timeout < 0 || c.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("manifesturl: negative setting: %w", podconfig.ErrInvalidConfig)
	}
	if c.CheckFrequency == 0 {
		c.CheckFrequency = 20 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 10 << 20
	}
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	c.Header = c.Header.Clone()
	return &Source{c: c, node: &v1.ObjectReference{Kind: "Node", Name: c.NodeName, UID: types.UID(c.NodeName)}}, nil
}

// Run polls at once and then every CheckFrequency, sending SETs on updates,
// until ctx ends; then it returns nil.
func (s *Source) Run(ctx context.Context, updates chan<- podconfig.PodUpdate) error {
	t := s.c.Clock.NewTicker(s.c.CheckFrequency)
	defer t.Stop()
	s.c.Log.V(1).Info("Watching URL", "url", s.c.URL)
	for {
		s.report(s.poll(ctx, updates))
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// report logs a poll's error; after three in a row it drops to V(4), as the
// kubelet does, so a URL that stays down does not flood the log.
func (s *Source) report(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		if err == nil && s.failures > 0 {
			s.c.Log.Info("Successfully read pods from URL", "url", s.c.URL)
			s.failures = 0
		}
		return
	}
	switch {
	case s.failures < 3:
		s.c.Log.Error(err, "Failed to read pods from URL", "url", s.c.URL)
	case s.failures == 3:
		s.c.Log.Error(err, "Failed to read pods from URL; further failures are logged at V(4)", "url", s.c.URL)
	default:
		s.c.Log.V(4).Info("Failed to read pods from URL", "url", s.c.URL, "err", err.Error())
	}
	s.failures++
}

// poll fetches the manifest once and sends a SET if it changed.
func (s *Source) poll(ctx context.Context, updates chan<- podconfig.PodUpdate) error {
	data, err := s.fetch(ctx)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		// An empty body is an empty set; forget the last body so the same
		// manifest coming back is applied again.
		s.last = nil
		return send(ctx, updates, nil)
	}
	if bytes.Equal(data, s.last) {
		return nil
	}
	s.last = data
	pods, err := s.decode(data)
	if err != nil {
		if evErr := safeevent.Eventf(s.c.Recorder, s.node, v1.EventTypeWarning, podconfig.ReasonFailedValidation,
			"Error validating manifest from %s: %v", s.c.URL, err); evErr != nil {
			s.c.Log.Error(evErr, "Recording event")
		}
		return err
	}
	return send(ctx, updates, pods)
}

func (s *Source) decode(data []byte) ([]*v1.Pod, error) {
	ms, err := staticpod.DecodeStrict(data, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.c.URL, err)
	}
	o := staticpod.Origin{Source: podutil.HTTPSource, Location: s.c.URL, NodeName: s.c.NodeName}
	pods := make([]*v1.Pod, len(ms))
	for i, m := range ms {
		name := m.Pod.Name
		if err := m.Prepare(o); err != nil {
			return nil, fmt.Errorf("%s: pod %d (%q): %w", s.c.URL, i, name, err)
		}
		pods[i] = m.Pod
	}
	for _, m := range ms {
		fieldwarn.Record(s.c.Recorder, s.c.Log, m.Pod, s.c.URL, m.Warnings)
	}
	return pods, nil
}

func (s *Source) fetch(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.c.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header = s.c.Header.Clone()
	resp, err := s.c.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: %s", ErrStatus, s.c.URL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.c.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading body: %w", s.c.URL, err)
	}
	if int64(len(data)) > s.c.MaxBodyBytes {
		return nil, fmt.Errorf("%w: %s: more than %d bytes", ErrBodyTooLarge, s.c.URL, s.c.MaxBodyBytes)
	}
	return data, nil
}

func send(ctx context.Context, updates chan<- podconfig.PodUpdate, pods []*v1.Pod) error {
	if pods == nil {
		pods = []*v1.Pod{}
	}
	select {
	case updates <- podconfig.PodUpdate{Pods: pods, Op: podconfig.SET, Source: podutil.HTTPSource}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
