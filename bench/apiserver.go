package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	kconfig "k8s.io/kubernetes/pkg/kubelet/config"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/apiserver"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/podutil"
)

// The apiserver sources are compared on one change: N pods on the node,
// listed and delivered (setup), then one MODIFIED watch event for one pod
// until the PodConfig's UPDATE of that pod. The kubelet's source
// (config.NewSourceApiserver) runs a reflector into an UndeltaStore that
// sends the whole list on every change, so its cost grows with N.
//
// Both sides talk to the same fakeAPI through a client-go REST client. The
// kubelet's source lists and watches through CoreV1().RESTClient(), which
// client-go's fake clientset returns as a nil *rest.RESTClient, so the fake
// clientset's reactors cannot serve it; fakeAPI is instead the REST
// client's HTTP transport, in the process, and its codec passes prebuilt
// objects by reference, so neither side decodes anything. nodekit's source
// uses CoreV1().Pods("") of the same clientset. Per event both sides pay the
// same client-go watch machinery: the stream watcher's goroutine reading a
// frame of a few bytes and handing the event on.

const (
	// apiNode is podconfigtest.WorkloadPod's spec.nodeName.
	apiNode = "node-1"
	// apiMediaType is fakeAPI's content type, served whatever was asked.
	apiMediaType = "application/x-nodekit-bench"
	// apiSetupTimeout bounds each wait of the setup, which fails the
	// benchmark rather than hanging it.
	apiSetupTimeout = time.Minute
)

// fakeAPI serves the pods of one node: a list of N pods (resourceVersions
// 1..N, the list's N) and watches that deliver the MODIFIED events the
// benchmark sends. Every request must select spec.nodeName=node-1, and a
// watch must start from a resourceVersion the server has handed out;
// otherwise it is refused and the setup fails with the reason.
//
// A response body names its object (a list frame, or "TYPE id" per watch
// event); apiCodec maps the name back to the object.
type fakeAPI struct {
	listRV   int
	list     *v1.PodList
	events   chan []byte   // watch frames, read by whichever watch stream is open
	watching chan struct{} // a token per watch served

	mu   sync.Mutex
	rv   int                        // the newest resourceVersion handed out
	objs map[string]kruntime.Object // pending events' objects by id
	err  error                      // the first refused request
}

func newFakeAPI(n int) *fakeAPI {
	list := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(n)}, Items: make([]v1.Pod, n)}
	for i, p := range workloadPods(n, -1, "") {
		p.ResourceVersion = strconv.Itoa(i + 1)
		list.Items[i] = *p
	}
	return &fakeAPI{listRV: n, list: list, events: make(chan []byte), watching: make(chan struct{}, 16),
		rv: n, objs: map[string]kruntime.Object{}}
}

// clientset returns a clientset whose CoreV1 is served by f, without a
// client-side rate limit.
func (f *fakeAPI) clientset() (*kubernetes.Clientset, error) {
	rc, err := rest.RESTClientForConfigAndClient(&rest.Config{
		Host:    "http://apiserver.invalid",
		APIPath: "/api",
		ContentConfig: rest.ContentConfig{GroupVersion: &v1.SchemeGroupVersion, ContentType: apiMediaType,
			AcceptContentTypes: apiMediaType, NegotiatedSerializer: apiCodec{f}},
		RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter(),
	}, &http.Client{Transport: f})
	if err != nil {
		return nil, err
	}
	return kubernetes.New(rc), nil
}

// modified returns the frame of a MODIFIED event for pod i of the list with
// a new image and the next resourceVersion, and the pod's UID and image.
func (f *fakeAPI) modified(i int) (frame []byte, uid types.UID, image string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	id := strconv.Itoa(f.rv)
	p := podconfigtest.WorkloadPod(i, "registry.example.com/web:2."+id)
	p.ResourceVersion = id
	f.objs[id] = p
	return []byte(string(watch.Modified) + " " + id), p.UID, p.Spec.Containers[0].Image
}

func (f *fakeAPI) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// refuse answers a request with an error; a bad one (fail) is also
// remembered for the setup to report.
func (f *fakeAPI) refuse(code int, fail bool, format string, args ...any) (*http.Response, error) {
	msg := fmt.Sprintf(format, args...)
	if fail {
		f.mu.Lock()
		if f.err == nil {
			f.err = errors.New(msg)
		}
		f.mu.Unlock()
	}
	return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: io.NopCloser(strings.NewReader(msg))}, nil
}

// RoundTrip serves GET /api/v1/pods: a list, or a watch whose body is a
// watchBody.
func (f *fakeAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if req.Method != http.MethodGet || req.URL.Path != "/api/v1/pods" {
		return f.refuse(http.StatusNotFound, true, "unexpected request %s %s", req.Method, req.URL)
	}
	if sel := q.Get("fieldSelector"); sel != "spec.nodeName="+apiNode {
		return f.refuse(http.StatusBadRequest, true, "request %s: field selector %q, want spec.nodeName=%s", req.URL, sel, apiNode)
	}
	header := http.Header{"Content-Type": {apiMediaType}}
	if q.Get("watch") != "true" {
		return &http.Response{StatusCode: http.StatusOK, Header: header, Body: io.NopCloser(strings.NewReader("list"))}, nil
	}
	if q.Get("sendInitialEvents") == "true" {
		// The kubelet's reflector first asks for a watch-list (client-go's
		// WatchListClient); refused, it lists and then watches, as
		// nodekit's source does. Only the setup differs.
		return f.refuse(http.StatusBadRequest, false, "watch-list not served")
	}
	f.mu.Lock()
	newest := f.rv
	f.mu.Unlock()
	if rv, err := strconv.Atoi(q.Get("resourceVersion")); err != nil || rv < f.listRV || rv > newest {
		return f.refuse(http.StatusBadRequest, true, "watch from resourceVersion %q, want %d..%d", q.Get("resourceVersion"), f.listRV, newest)
	}
	select {
	case f.watching <- struct{}{}:
	default:
	}
	return &http.Response{StatusCode: http.StatusOK, Header: header,
		Body: &watchBody{frames: f.events, closed: make(chan struct{})}}, nil
}

// object returns the object a response names and forgets a pending
// event's.
func (f *fakeAPI) object(name []byte) kruntime.Object {
	if string(name) == "list" {
		return f.list
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	obj := f.objs[string(name)]
	delete(f.objs, string(name))
	return obj
}

// watchBody is a watch response: each Read returns one frame sent on
// fakeAPI.events (a few bytes; the stream decoder reads into 1 KiB) until
// the client closes it.
type watchBody struct {
	frames <-chan []byte
	closed chan struct{}
	once   sync.Once
}

func (w *watchBody) Read(p []byte) (int, error) {
	select {
	case f := <-w.frames:
		if len(f) > len(p) {
			return 0, io.ErrShortBuffer
		}
		return copy(p, f), nil
	case <-w.closed:
		return 0, io.EOF
	}
}

func (w *watchBody) Close() error {
	w.once.Do(func() { close(w.closed) })
	return nil
}

// apiCodec is fakeAPI's serializer, stream serializer and framer: it decodes
// a response body, which names an object, into that object, without copying
// it (a list is copied shallowly into a typed client's list).
type apiCodec struct{ f *fakeAPI }

func (c apiCodec) Decode(data []byte, _ *schema.GroupVersionKind, into kruntime.Object) (kruntime.Object, *schema.GroupVersionKind, error) {
	if ev, ok := into.(*metav1.WatchEvent); ok { // a watch frame: "MODIFIED id"
		typ, id, found := bytes.Cut(data, []byte(" "))
		if !found || string(typ) != string(watch.Modified) {
			return nil, nil, fmt.Errorf("bad watch frame %q", data)
		}
		ev.Type = string(watch.Modified)
		ev.Object.Raw = id // decoded at once, before the next frame is read
		return ev, nil, nil
	}
	obj := c.f.object(data)
	if obj == nil {
		return nil, nil, fmt.Errorf("no object %q", data)
	}
	if l, ok := into.(*v1.PodList); ok && l != nil {
		*l = *obj.(*v1.PodList)
		return l, nil, nil
	}
	return obj, nil, nil
}

func (apiCodec) Encode(kruntime.Object, io.Writer) error {
	return errors.New("fakeAPI: requests carry no body")
}

func (apiCodec) Identifier() kruntime.Identifier { return "nodekit-bench" }

func (c apiCodec) SupportedMediaTypes() []kruntime.SerializerInfo {
	return []kruntime.SerializerInfo{{
		MediaType: apiMediaType, MediaTypeType: "application", MediaTypeSubType: "x-nodekit-bench",
		Serializer: c, StreamSerializer: &kruntime.StreamSerializerInfo{Serializer: c, Framer: c},
	}}
}

func (apiCodec) EncoderForVersion(e kruntime.Encoder, _ kruntime.GroupVersioner) kruntime.Encoder {
	return e
}

func (apiCodec) DecoderToVersion(d kruntime.Decoder, _ kruntime.GroupVersioner) kruntime.Decoder {
	return d
}

func (apiCodec) NewFrameReader(r io.ReadCloser) io.ReadCloser { return r } // a Read is a frame
func (apiCodec) NewFrameWriter(w io.Writer) io.Writer         { return w }

// waitWatch waits until api serves a watch, or fails b.
func waitWatch(b *testing.B, side string, api *fakeAPI) {
	select {
	case <-api.watching:
	case <-time.After(apiSetupTimeout):
		b.Fatalf("%s: no watch (fakeAPI: %v)", side, api.failure())
	}
}

// kubeletAPISide is the kubelet's apiserver source at one N, feeding a
// kubelet PodConfig. It is never stopped: NewSourceApiserver runs its
// reflector with wait.NeverStop, so its goroutine (and the stream watcher's,
// and the mux's, which ends only when its channel is closed, which the
// reflector may still send on) lives until the process exits. One side per
// N is kept for the whole run, with its N pods, and reused by every
// benchmark at that N instead of leaking one per benchmark; the figure
// lingers (see figure.lingers), so it runs after every other figure.
type kubeletAPISide struct {
	api *fakeAPI
	c   *kconfig.PodConfig
}

// kubeletAPISides holds the kubelet side of each N.
type kubeletAPISides map[int]*kubeletAPISide

func (sides kubeletAPISides) get(b *testing.B, n int) *kubeletAPISide {
	if s := sides[n]; s != nil {
		return s
	}
	api := newFakeAPI(n)
	cs, err := api.clientset()
	if err != nil {
		b.Fatal(err)
	}
	c := kconfig.NewPodConfig(&record.FakeRecorder{}, nopSLI{})
	kconfig.NewSourceApiserver(klog.Background(), cs, types.NodeName(apiNode), func() bool { return true },
		c.Channel(context.Background(), kubetypes.ApiserverSource))
	select {
	case u := <-c.Updates():
		if u.Op != kubetypes.ADD || len(u.Pods) != n {
			b.Fatalf("kubelet: got %v with %d pods", u.Op, len(u.Pods))
		}
	case <-time.After(apiSetupTimeout):
		b.Fatalf("kubelet: no pods listed (fakeAPI: %v)", api.failure())
	}
	waitWatch(b, "kubelet", api)
	s := &kubeletAPISide{api: api, c: c}
	sides[n] = s
	return s
}

// kubeletApiserverOneChange measures the kubelet's side, reusing sides'
// source of each N.
func kubeletApiserverOneChange(sides kubeletAPISides) func(n int) func(b *testing.B) {
	return func(n int) func(b *testing.B) {
		return func(b *testing.B) {
			m := newMeter(b)
			defer m.done()
			s := sides.get(b, n)
			// One collection before, none per change: a change allocates
			// little, and the background sweep after a forced collection
			// of this heap (the lingering sides' pods) would be counted.
			runtime.GC()
			m.reset()
			for i := 0; i < b.N; i++ {
				m.stop()
				frame, uid, image := s.api.modified(n / 2)
				m.start()
				s.api.events <- frame
				if u := <-s.c.Updates(); u.Op != kubetypes.UPDATE || len(u.Pods) != 1 || u.Pods[0].UID != uid || u.Pods[0].Spec.Containers[0].Image != image {
					b.Fatalf("kubelet: got %v with %d pods, want the UPDATE of %s to %s", u.Op, len(u.Pods), uid, image)
				}
			}
		}
	}
}

func nodekitApiserverOneChange(n int) func(b *testing.B) {
	return func(b *testing.B) {
		m := newMeter(b)
		defer m.done()
		api := newFakeAPI(n)
		cs, err := api.clientset()
		if err != nil {
			b.Fatal(err)
		}
		c, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
		if err != nil {
			b.Fatal(err)
		}
		src, err := apiserver.New(apiserver.Config{Client: cs.CoreV1().Pods(""), NodeName: apiNode, Log: klog.Background()})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx, c.Channel(ctx, podutil.ApiserverSource)) }()
		select {
		case u := <-c.Updates():
			if u.Op != podconfig.ADD || len(u.Pods) != n {
				b.Fatalf("nodekit: got %v with %d pods", u.Op, len(u.Pods))
			}
		case <-time.After(apiSetupTimeout):
			b.Fatalf("nodekit: no pods listed (fakeAPI: %v)", api.failure())
		}
		waitWatch(b, "nodekit", api)
		runtime.GC() // once, as the kubelet's side
		m.reset()
		for i := 0; i < b.N; i++ {
			m.stop()
			frame, uid, image := api.modified(n / 2)
			m.start()
			api.events <- frame
			if u := <-c.Updates(); u.Op != podconfig.UPDATE || len(u.Pods) != 1 || u.Pods[0].UID != uid || u.Pods[0].Spec.Containers[0].Image != image {
				b.Fatalf("nodekit: got %v with %d pods, want the UPDATE of %s to %s", u.Op, len(u.Pods), uid, image)
			}
		}
		// The source's watch (and its stream watcher goroutine) and the
		// mux's goroutine end with ctx.
		m.stop()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		m.start()
	}
}
