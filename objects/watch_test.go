package objects_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// eventually polls cond; the deadline only keeps a broken test from hanging.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runCache(t *testing.T, c *objects.Cache) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

func cm(data string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"k": data}}
}

func value(t *testing.T, c *objects.Cache) string {
	got, err := c.GetConfigMap(context.Background(), "ns", "cm")
	if apierrors.IsNotFound(err) {
		return "<not found>"
	}
	require.NoError(t, err)
	return got.Data["k"]
}

func TestWatchKeepsObjectsCurrentWithoutGets(t *testing.T) {
	api := objectstest.New()
	api.Set(cm("1"))
	// A fake clock: on the real one a watch nobody reads for ten TTLs
	// stops, which under load races with the waits below.
	clk := clocktesting.NewFakeClock(t0)
	c := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets, Watch: true, TTL: time.Minute, Clock: clk})
	runCache(t, c)
	require.Equal(t, "1", value(t, c))
	eventually(t, "the watch", func() bool { return api.Watches() == 1 })

	api.Set(cm("2"))
	eventually(t, "the update", func() bool { return value(t, c) == "2" })
	// The watch delivers: from now on the TTL passing makes no GET. (Past
	// the TTL, well within the ten TTLs of the idle check.)
	clk.Step(2 * time.Minute)
	api.Delete("configmaps", "ns", "cm")
	eventually(t, "the deletion", func() bool { return value(t, c) == "<not found>" })
	api.Set(cm("3"))
	eventually(t, "the re-creation", func() bool { return value(t, c) == "3" })
	require.Equal(t, 1, api.Requests()["get configmaps"], "one GET, whatever the TTL: the watch keeps it current")

	t.Run("a watch the server ends is opened again", func(t *testing.T) {
		api.CloseWatches()
		eventually(t, "a new watch", func() bool { return api.Requests()["watch configmaps"] == 2 && api.Watches() == 1 })
		api.Set(cm("4"))
		eventually(t, "the update over the new watch", func() bool { return value(t, c) == "4" })
	})
	t.Run("secrets are watched too", func(t *testing.T) {
		api.Set(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"k": []byte("a")}})
		_, err := c.GetSecret(context.Background(), "ns", "s")
		require.NoError(t, err)
		eventually(t, "the secret's watch", func() bool { return api.Watches() == 2 })
		api.Set(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"k": []byte("b")}})
		eventually(t, "the secret's update", func() bool {
			s, err := c.GetSecret(context.Background(), "ns", "s")
			return err == nil && string(s.Data["k"]) == "b"
		})
		require.Equal(t, 1, api.Requests()["get secrets"])
	})
}

func TestRunEndStopsEveryWatch(t *testing.T) {
	api := objectstest.New()
	api.Set(cm("1"))
	c := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Watch: true})
	cancel := runCache(t, c)
	require.Equal(t, "1", value(t, c))
	eventually(t, "the watch", func() bool { return api.Watches() == 1 })
	cancel()
	eventually(t, "no watch left", func() bool { return api.Watches() == 0 })
}

func TestWithoutRunTheTTLApplies(t *testing.T) {
	api := objectstest.New()
	api.Set(cm("1"))
	clk := clocktesting.NewFakeClock(t0)
	c := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Watch: true, Clock: clk})
	require.Equal(t, "1", value(t, c))
	require.Zero(t, api.Watches())
	api.Set(cm("2"))
	clk.Step(2 * time.Minute)
	require.Equal(t, "2", value(t, c))
}

func TestAnUnusedObjectStopsBeingWatched(t *testing.T) {
	api := objectstest.New()
	api.Set(cm("1"))
	clk := clocktesting.NewFakeClock(t0)
	c := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Watch: true, Clock: clk, TTL: time.Second})
	runCache(t, c)
	require.Equal(t, "1", value(t, c))
	eventually(t, "the watch and its idle check", func() bool { return api.Watches() == 1 && clk.HasWaiters() })
	clk.Step(11 * time.Second)
	eventually(t, "the watch to stop", func() bool { return api.Watches() == 0 })
	require.Equal(t, "1", value(t, c), "asked again: read again")
	require.Equal(t, 2, api.Requests()["get configmaps"])
}

func TestAFailingWatchFallsBackToTheTTL(t *testing.T) {
	api := objectstest.New()
	api.Set(cm("1"))
	api.InjectError("watch", "configmaps", apierrors.NewForbidden(v1.Resource("configmaps"), "cm", nil))
	clk := clocktesting.NewFakeClock(t0)
	c := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Watch: true, Clock: clk})
	runCache(t, c)
	require.Equal(t, "1", value(t, c))
	eventually(t, "the failed watch waiting to retry", func() bool { return clk.HasWaiters() })
	api.Set(cm("2"))
	clk.Step(61 * time.Second)
	require.Equal(t, "2", value(t, c), "read again after the TTL")
}

// serverWatch is one watch of watchClient: the test ends it (as a server
// does) by closing ch; stopped is closed when the cache stops it.
type serverWatch struct {
	ch      chan watch.Event
	stopped chan struct{}
	once    sync.Once
}

func (w *serverWatch) ResultChan() <-chan watch.Event { return w.ch }
func (w *serverWatch) Stop()                          { w.once.Do(func() { close(w.stopped) }) }

// watchClient serves one configMap (at resource version 1, until deleted)
// and hands each watch opened to the test.
type watchClient struct {
	watches chan *serverWatch
	mu      sync.Mutex
	deleted bool
	rvs     []string // the resource versions watched from
}

func newWatchClient() *watchClient { return &watchClient{watches: make(chan *serverWatch, 1)} }

func (c *watchClient) Get(context.Context, string, metav1.GetOptions) (*v1.ConfigMap, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return nil, apierrors.NewNotFound(v1.Resource("configmaps"), "cm")
	}
	o := cm("1")
	o.ResourceVersion = "1"
	return o, nil
}

func (c *watchClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	c.mu.Lock()
	c.rvs = append(c.rvs, opts.ResourceVersion)
	c.mu.Unlock()
	w := &serverWatch{ch: make(chan watch.Event), stopped: make(chan struct{})}
	select {
	case c.watches <- w:
		return w, nil
	case <-ctx.Done(): // the test no longer takes watches
		return nil, ctx.Err()
	}
}

func (c *watchClient) delete() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleted = true
}

func (c *watchClient) watchedFrom() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.rvs...)
}

// nextWatch returns the cache's next watch, stepping the clock a second at
// a time through the back-off that follows a watch ended at once.
func nextWatch(t *testing.T, client *watchClient, clk *clocktesting.FakeClock) *serverWatch {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // only keeps a broken test from hanging
	for time.Now().Before(deadline) {
		select {
		case w := <-client.watches:
			return w
		case <-time.After(10 * time.Millisecond):
			clk.Step(time.Second)
		}
	}
	t.Fatal("no new watch")
	return nil
}

// startWatchedCache runs a Cache (TTL ttl, 0 for the default) on a
// watchClient and a fake clock, reads the configMap once and returns the
// first watch.
func startWatchedCache(t *testing.T, ttl time.Duration) (*watchClient, *clocktesting.FakeClock, *objects.Cache, *serverWatch) {
	t.Helper()
	client := newWatchClient()
	clk := clocktesting.NewFakeClock(t0)
	c := objects.New(objects.Config{
		ConfigMaps: func(string) objects.ConfigMapGetter { return client },
		Watch:      true, Clock: clk, TTL: ttl,
	})
	runCache(t, c)
	require.Equal(t, "1", value(t, c))
	return client, clk, c, <-client.watches
}

// watchAfter returns the cache's next watch and how much fake time passed
// before it came, stepping the clock by step at a time.
func watchAfter(t *testing.T, client *watchClient, clk *clocktesting.FakeClock, step time.Duration) (*serverWatch, time.Duration) {
	t.Helper()
	start := clk.Now()
	deadline := time.Now().Add(10 * time.Second) // only keeps a broken test from hanging
	for time.Now().Before(deadline) {
		select {
		case w := <-client.watches:
			return w, clk.Since(start)
		case <-time.After(5 * time.Millisecond):
			clk.Step(step)
		}
	}
	t.Fatal("no new watch")
	return nil, 0
}

// A server that ends every watch at once, or with an error, is asked again
// after a back-off that doubles (1s, 2s, ...), as client-go's reflector
// does; a watch that delivered is resumed at once.
func TestAWatchEndedAtOnceIsRetriedAfterABackOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(w *serverWatch)
	}{
		{"closed without an event", func(w *serverWatch) { close(w.ch) }},
		{"ended by an error event", func(w *serverWatch) {
			w.ch <- watch.Event{Type: watch.Error, Object: &apierrors.NewInternalError(errors.New("etcd down")).ErrStatus}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, clk, _, w := startWatchedCache(t, 0)
			for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
				tc.end(w)
				<-w.stopped // the cache saw the end before the clock moves
				var waited time.Duration
				w, waited = watchAfter(t, client, clk, 100*time.Millisecond)
				assert.GreaterOrEqual(t, waited, want, "watch %d opened after %v", i+2, waited)
			}

			// A watch that delivers resets the back-off, and its end is
			// followed by a new watch at once.
			o := cm("2")
			o.ResourceVersion = "2"
			w.ch <- watch.Event{Type: watch.Modified, Object: o}
			close(w.ch)
			select {
			case <-client.watches:
			case <-time.After(10 * time.Second):
				t.Fatal("no new watch at once after one that delivered")
			}
		})
	}
}

// A configMap deleted while its watch was down is not served: a watch the
// server ends is resumed from the last resource version seen (which sends
// the deletion), and one from now after an error (which sends nothing for
// an object that is gone) makes the next read read the object again.
func TestAnObjectDeletedBetweenWatchesIsNotServed(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(w *serverWatch)
		// rv is the resource version the second watch starts from.
		rv string
	}{
		{name: "watch ended by the server resumes", end: func(w *serverWatch) { close(w.ch) }, rv: "1"},
		{name: "watch ended by 410 Gone starts from now", rv: "", end: func(w *serverWatch) {
			w.ch <- watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("too old resource version").ErrStatus}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, clk, c, w := startWatchedCache(t, 0)
			client.delete()
			tc.end(w)
			w = nextWatch(t, client, clk)
			require.Equal(t, []string{"1", tc.rv}, client.watchedFrom())
			if tc.rv != "" {
				o := cm("1")
				o.ResourceVersion = "2"
				w.ch <- watch.Event{Type: watch.Deleted, Object: o}
			}
			eventually(t, "the deletion seen", func() bool { return value(t, c) == "<not found>" })
		})
	}
}

// An object nobody asks for stops being watched after ten TTLs, also when
// the server ends each watch sooner than that (an apiserver ends one after
// 30 to 60 minutes, less than ten TTLs of 5 minutes).
func TestAnUnusedObjectStopsBeingWatchedWhateverTheServerDoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// closeEvery is how often the server ends the watch; 0: never.
		closeEvery time.Duration
	}{
		{name: "server keeps the watch"},
		{name: "server ends the watch every 6 TTLs", closeEvery: 6 * time.Second},
		{name: "server ends the watch every 3 TTLs", closeEvery: 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, clk, _, w := startWatchedCache(t, time.Second)
			eventually(t, "the idle check", clk.HasWaiters)
			step := tc.closeEvery
			if step == 0 {
				step = 11 * time.Second
			}
			// Past ten TTLs unused, the cache stops the watch the server
			// still serves.
			for clk.Since(t0)+step <= 10*time.Second {
				clk.Step(step)
				close(w.ch)
				w = <-client.watches
			}
			clk.Step(step)
			select {
			case <-w.stopped:
			case <-time.After(10 * time.Second): // only keeps a broken test from hanging
				t.Fatalf("the watch of an object unused for %v is still open", clk.Since(t0))
			}
		})
	}
}

func svc(ns, name, ip string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip}}
}

// serviceIPs lists namespace's services through c as name=clusterIP.
func serviceIPs(t *testing.T, c *objects.Cache, namespace string) map[string]string {
	l, err := c.ListServices(context.Background(), namespace)
	require.NoError(t, err)
	out := map[string]string{}
	for _, s := range l {
		out[s.Name] = s.Spec.ClusterIP
	}
	return out
}

func TestWatchKeepsServiceListsCurrent(t *testing.T) {
	api := objectstest.New()
	api.Set(svc("ns", "a", "10.0.0.1"))
	api.Set(svc("other", "x", "10.0.0.9"))
	clk := clocktesting.NewFakeClock(t0)
	c := objects.New(objects.Config{Services: api.Services, Watch: true, TTL: time.Minute, Clock: clk})
	runCache(t, c)
	require.Equal(t, map[string]string{"a": "10.0.0.1"}, serviceIPs(t, c, "ns"))
	eventually(t, "the namespace's watch", func() bool { return api.Watches() == 1 })

	steps := []struct {
		name   string
		change func()
		want   map[string]string
	}{
		{"a service created after the first list is listed", func() { api.Set(svc("ns", "b", "10.0.0.2")) },
			map[string]string{"a": "10.0.0.1", "b": "10.0.0.2"}},
		{"a changed service is listed as it is now", func() { api.Set(svc("ns", "a", "10.0.0.3")) },
			map[string]string{"a": "10.0.0.3", "b": "10.0.0.2"}},
		{"a deleted service is no longer listed", func() { api.Delete("services", "ns", "b") },
			map[string]string{"a": "10.0.0.3"}},
		{"another namespace's services stay out", func() { api.Set(svc("other", "y", "10.0.0.8")) },
			map[string]string{"a": "10.0.0.3"}},
		{"a watch the server ends resumes and keeps the list current", func() {
			api.CloseWatches()
			eventually(t, "the resumed watch", func() bool { return api.Watches() == 1 })
			api.Set(svc("ns", "c", "10.0.0.4"))
		}, map[string]string{"a": "10.0.0.3", "c": "10.0.0.4"}},
		{"a watch that cannot resume lists again before watching", func() {
			api.InjectError("watch", "services", errors.New("boom"))
			api.CloseWatches()
			eventually(t, "the failed watch", func() bool { return api.Requests()["watch services"] >= 3 })
			api.Set(svc("ns", "d", "10.0.0.5")) // while no watch is open
			api.InjectError("watch", "services", nil)
			clk.Step(time.Second) // the watch's back-off
			eventually(t, "the list again", func() bool { return api.Requests()["list services"] == 2 && api.Watches() == 1 })
		}, map[string]string{"a": "10.0.0.3", "c": "10.0.0.4", "d": "10.0.0.5"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.change()
			eventually(t, "the list to change", func() bool { return assert.ObjectsAreEqual(s.want, serviceIPs(t, c, "ns")) })
		})
	}
	require.Equal(t, 2, api.Requests()["list services"], "the list is read once, and again only where a watch could not resume")
}
