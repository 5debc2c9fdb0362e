package manifesturl

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/podconfig/staticpod"
	"github.com/nodekit/nodekit/podutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const nodeName = "different-value"

// waitTimeout only guards against a hung test.
const waitTimeout = 10 * time.Second

// server serves whatever body and status are set, and reports requests.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	status   int
	body     string
	requests chan *http.Request
}

func newServer(t *testing.T) *server {
	s := &server{status: http.StatusOK, requests: make(chan *http.Request, 10)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		status, body := s.status, s.body
		s.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		s.requests <- r
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func podJSON(t *testing.T, obj interface{}) string {
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return string(b)
}

func testPod(name string, uid string) v1.Pod {
	return v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "111", Namespace: "mynamespace"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "1", Image: "foo", ImagePullPolicy: v1.PullAlways}}},
	}
}

func newSource(t *testing.T, srv *server, mutate func(*Config)) (*Source, *podconfigtest.Recorder) {
	t.Helper()
	rec := podconfigtest.NewRecorder(0)
	c := Config{URL: srv.URL, NodeName: nodeName, Recorder: rec, Clock: clocktesting.NewFakeClock(time.Unix(0, 0))}
	if mutate != nil {
		mutate(&c)
	}
	s, err := New(c)
	require.NoError(t, err)
	return s, rec
}

// pollOnce polls and returns the error and the update sent, if any.
func pollOnce(t *testing.T, s *Source) (*podconfig.PodUpdate, error) {
	t.Helper()
	updates := make(chan podconfig.PodUpdate, 1)
	err := s.poll(context.Background(), updates)
	select {
	case u := <-updates:
		return &u, err
	default:
		return nil, err
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, c := range map[string]Config{
		"no URL":        {NodeName: "n"},
		"not http":      {URL: "file:///etc/x", NodeName: "n"},
		"no node":       {URL: "http://h/m"},
		"negative size": {URL: "http://h/m", NodeName: "n", MaxBodyBytes: -1},
	} {
		_, err := New(c)
		assert.ErrorIs(t, err, podconfig.ErrInvalidConfig, name)
	}
}

func TestExtractPodsFromHTTP(t *testing.T) {
	single := testPod("foo", "111")
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []v1.Pod{testPod("foo", "111"), testPod("bar", "222")}}
	list.Items[1].UID = "222"
	list.Items[1].Namespace = ""
	for _, tc := range []struct {
		name      string
		body      string
		wantNames []string
		wantNS    []string
	}{
		{"single pod is a SET of one", podJSON(t, single), []string{"foo-" + nodeName}, []string{"mynamespace"}},
		{"pod list is a SET of all", podJSON(t, list), []string{"foo-" + nodeName, "bar-" + nodeName}, []string{"mynamespace", "default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			srv.serve(http.StatusOK, tc.body)
			s, _ := newSource(t, srv, nil)
			u, err := pollOnce(t, s)
			require.NoError(t, err)
			require.NotNil(t, u)
			assert.Equal(t, podconfig.SET, u.Op)
			assert.Equal(t, podutil.HTTPSource, u.Source)
			require.Len(t, u.Pods, len(tc.wantNames))
			for i, p := range u.Pods {
				assert.Equal(t, tc.wantNames[i], p.Name)
				assert.Equal(t, tc.wantNS[i], p.Namespace)
				assert.Equal(t, nodeName, p.Spec.NodeName)
				assert.Equal(t, string(p.UID), p.Annotations[podutil.ConfigHashAnnotationKey])
				assert.Equal(t, v1.PodPending, p.Status.Phase)
				assert.Empty(t, p.Spec.Tolerations, "URL pods get no NoExecute toleration")
				assert.NoError(t, staticpod.Validate(p))
			}
		})
	}
}

func TestExtractInvalidPods(t *testing.T) {
	valid := testPod("foo", "111")
	for _, tc := range []struct {
		name    string
		mutate  func(p *v1.Pod)
		wantErr error
	}{
		{"no version", func(p *v1.Pod) { p.APIVersion = "" }, staticpod.ErrDecode},
		{"invalid version", func(p *v1.Pod) { p.APIVersion = "v1betta2" }, staticpod.ErrDecode},
		{"invalid volume name", func(p *v1.Pod) { p.Spec.Volumes = []v1.Volume{{Name: "_INVALID_"}} }, staticpod.ErrInvalid},
		{"duplicate volume names", func(p *v1.Pod) { p.Spec.Volumes = []v1.Volume{{Name: "repeated"}, {Name: "repeated"}} }, staticpod.ErrInvalid},
		{"unspecified container name", func(p *v1.Pod) { p.Spec.Containers[0].Name = "" }, staticpod.ErrInvalid},
		{"invalid container name", func(p *v1.Pod) { p.Spec.Containers[0].Name = "_INVALID_" }, staticpod.ErrInvalid},
		{"secret reference", func(p *v1.Pod) { p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "s"}} }, staticpod.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid.DeepCopy()
			tc.mutate(p)
			srv := newServer(t)
			srv.serve(http.StatusOK, podJSON(t, p))
			s, rec := newSource(t, srv, nil)
			u, err := pollOnce(t, s)
			assert.ErrorIs(t, err, tc.wantErr)
			assert.Nil(t, u, "no update for an invalid body")
			events := rec.Events()
			require.Len(t, events, 1)
			assert.Equal(t, podconfig.ReasonFailedValidation, events[0].Reason)
			assert.Contains(t, events[0].Message, srv.URL)
			assert.Equal(t, &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: nodeName}, events[0].Object)
		})
	}
}

func TestOneInvalidPodRejectsTheWholeListAndKeepsTheLastGoodSet(t *testing.T) {
	srv := newServer(t)
	good := testPod("foo", "111")
	srv.serve(http.StatusOK, podJSON(t, good))
	s, _ := newSource(t, srv, nil)
	u, err := pollOnce(t, s)
	require.NoError(t, err)
	require.NotNil(t, u)

	bad := testPod("bar", "222")
	bad.Spec.Containers[0].Image = ""
	srv.serve(http.StatusOK, podJSON(t, v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []v1.Pod{good, bad}}))
	u, err = pollOnce(t, s)
	assert.ErrorIs(t, err, staticpod.ErrInvalid)
	assert.Contains(t, err.Error(), `pod 1 ("bar")`)
	assert.Nil(t, u)

	// The same bad body again is skipped quietly.
	u, err = pollOnce(t, s)
	assert.NoError(t, err)
	assert.Nil(t, u)
}

func TestURLWithHeader(t *testing.T) {
	srv := newServer(t)
	srv.serve(http.StatusOK, podJSON(t, testPod("foo", "111")))
	header := http.Header{}
	header.Set("Metadata-Flavor", "Google")
	s, _ := newSource(t, srv, func(c *Config) { c.Header = header })
	u, err := pollOnce(t, s)
	require.NoError(t, err)
	require.NotNil(t, u)
	r := <-srv.requests
	assert.Equal(t, []string{"Google"}, r.Header["Metadata-Flavor"])
	assert.Len(t, u.Pods, 1)
}

func TestUnchangedBodyIsSkippedAndEmptyBodyIsEmptySet(t *testing.T) {
	srv := newServer(t)
	body := podJSON(t, testPod("foo", "111"))
	srv.serve(http.StatusOK, body)
	s, _ := newSource(t, srv, nil)

	u, err := pollOnce(t, s)
	require.NoError(t, err)
	require.NotNil(t, u)

	u, err = pollOnce(t, s)
	require.NoError(t, err)
	assert.Nil(t, u, "unchanged body sends nothing")

	srv.serve(http.StatusOK, "")
	u, err = pollOnce(t, s)
	require.NoError(t, err)
	require.NotNil(t, u)
	assert.Equal(t, podconfig.SET, u.Op)
	assert.Empty(t, u.Pods)

	// The manifest coming back after an empty body is applied again.
	srv.serve(http.StatusOK, body)
	u, err = pollOnce(t, s)
	require.NoError(t, err)
	require.NotNil(t, u)
	assert.Len(t, u.Pods, 1)
}

func TestNon200IsAnErrorAndSendsNothing(t *testing.T) {
	srv := newServer(t)
	srv.serve(http.StatusNotFound, "not here")
	s, _ := newSource(t, srv, nil)
	u, err := pollOnce(t, s)
	assert.ErrorIs(t, err, ErrStatus)
	assert.Contains(t, err.Error(), "404")
	assert.Nil(t, u)
}

func TestExtractFromHTTPBadness(t *testing.T) {
	s, err := New(Config{URL: "http://127.0.0.1:1/_not_found_", NodeName: "other"})
	require.NoError(t, err)
	u, err := pollOnce(t, s)
	assert.Error(t, err)
	assert.Nil(t, u)
}

func TestBodyLargerThanLimitIsRefused(t *testing.T) {
	srv := newServer(t)
	srv.serve(http.StatusOK, podJSON(t, testPod("foo", "111")))
	s, _ := newSource(t, srv, func(c *Config) { c.MaxBodyBytes = 50 })
	u, err := pollOnce(t, s)
	assert.ErrorIs(t, err, ErrBodyTooLarge)
	assert.Contains(t, err.Error(), "more than 50 bytes")
	assert.Nil(t, u)
}

func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	s, err := New(Config{URL: srv.URL, NodeName: "n", Timeout: 20 * time.Millisecond})
	require.NoError(t, err)
	_, err = pollOnce(t, s)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
}

func TestRunPollsAtOnceAndEveryCheckFrequency(t *testing.T) {
	srv := newServer(t)
	srv.serve(http.StatusOK, podJSON(t, testPod("foo", "111")))
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	s, err := New(Config{URL: srv.URL, NodeName: nodeName, Clock: clk})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan podconfig.PodUpdate)
	done := make(chan error)
	go func() { done <- s.Run(ctx, updates) }()

	select {
	case u := <-updates:
		assert.Equal(t, "foo-"+nodeName, u.Pods[0].Name)
	case <-time.After(waitTimeout):
		t.Fatal("no first poll")
	}
	<-srv.requests
	srv.serve(http.StatusOK, strings.Replace(podJSON(t, testPod("foo", "111")), `"foo"`, `"bar"`, 1))
	clk.Step(19 * time.Second)
	select {
	case <-srv.requests:
		t.Fatal("polled before the check frequency")
	default:
	}
	clk.Step(time.Second)
	select {
	case u := <-updates:
		assert.Equal(t, "bar-"+nodeName, u.Pods[0].Name)
	case <-time.After(waitTimeout):
		t.Fatal("no second poll")
	}
	cancel()
	assert.NoError(t, <-done)
}

func TestUnknownFieldOfAListItemGivesAWarningEventOnThatPod(t *testing.T) {
	srv := newServer(t)
	srv.serve(http.StatusOK, `{"apiVersion":"v1","kind":"PodList","items":[`+
		`{"metadata":{"name":"good"},"spec":{"containers":[{"name":"a","image":"b"}]}},`+
		`{"metadata":{"name":"typo"},"spec":{"containers":[{"name":"a","image":"b","comand":["x"]}]}}]}`)
	s, rec := newSource(t, srv, nil)
	u, err := pollOnce(t, s)
	require.NoError(t, err)
	require.NotNil(t, u)
	require.Len(t, u.Pods, 2, "both pods run")
	events := rec.Events()
	require.Len(t, events, 1)
	assert.Equal(t, v1.EventTypeWarning, events[0].Type)
	assert.Equal(t, podconfig.ReasonFieldValidationWarning, events[0].Reason)
	assert.Contains(t, events[0].Message, `unknown field "spec.containers[0].comand"`)
	assert.Same(t, u.Pods[1], events[0].Object, "on the pod whose manifest has it")
}
