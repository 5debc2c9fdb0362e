package manifesturl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/reltable"
	"github.com/nodekit/nodekit/podconfig"
)

// allocDuring returns the bytes allocated while f ran.
func allocDuring(f func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	f()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A server that never stops sending is cut off at the default limit
// (10 MiB) with ErrBodyTooLarge, having read no more than that.
func TestEndlessBodyIsCutOffAtTheLimit(t *testing.T) {
	chunk := []byte(strings.Repeat("x", 64<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	s, err := New(Config{URL: srv.URL, NodeName: "n"})
	require.NoError(t, err)
	var u *podconfig.PodUpdate
	alloc := allocDuring(func() { u, err = pollOnce(t, s) })
	require.ErrorIs(t, err, ErrBodyTooLarge)
	assert.Nil(t, u)
	assert.Less(t, alloc, uint64(64<<20), "memory bounded by the limit")
	reltable.Print(t, reltable.Row{
		Test: "podconfig/manifesturl: TestEndlessBodyIsCutOffAtTheLimit",
		Done: "manifest URL whose body never ends",
		Held: fmt.Sprintf("ErrBodyTooLarge at the 10 MiB limit; %.1f MiB allocated by the poll; nothing sent", float64(alloc)/(1<<20)),
		Run:  "go test -run EndlessBody -v ./podconfig/manifesturl",
	})
}

// A server that drips its body a byte a second is abandoned when the
// request's Timeout ends; the poll returns the deadline error and sends
// nothing.
func TestSlowBodyTimesOut(t *testing.T) {
	body := podJSON(t, testPod("foo", "111"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range len(body) {
			if _, err := w.Write([]byte{body[i]}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	}))
	defer srv.Close()
	s, err := New(Config{URL: srv.URL, NodeName: "n", Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	start := time.Now()
	u, err := pollOnce(t, s)
	took := time.Since(start)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	assert.Nil(t, u)
	reltable.Print(t, reltable.Row{
		Test: "podconfig/manifesturl: TestSlowBodyTimesOut",
		Done: "manifest URL dripping its body a byte a second (Timeout 300 ms)",
		Held: fmt.Sprintf("poll ends with the deadline error after %v; nothing sent", took.Round(10*time.Millisecond)),
		Run:  "go test -run SlowBody -v ./podconfig/manifesturl",
	})
}

// Malformed bodies are refused with an error and a FailedValidation event;
// nothing is sent, so the pods of the last good body stay.
func TestMalformedBodiesAreRefused(t *testing.T) {
	good := podJSON(t, testPod("foo", "111"))
	cases := []struct{ name, body string }{
		{"binary junk", "\x00\x01\x02\xff\xfe garbage"},
		{"truncated JSON", good[:len(good)/2]},
		{"wrong kind", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}`},
		{"JSON nested 100,000 deep", strings.Repeat("[", 100000) + strings.Repeat("]", 100000)},
		{"YAML nested 100,000 deep", strings.Repeat("- ", 100000) + "x"},
		{"YAML alias bomb", "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"},
		{"name over 253 characters", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + strings.Repeat("n", 300) + `"},"spec":{"containers":[{"name":"c","image":"i"}]}}`},
		{"container name over 63 characters", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"` + strings.Repeat("c", 64) + `","image":"i"}]}}`},
		{"pod without containers", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{}}`},
	}
	srv := newServer(t)
	var worst uint64
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, rec := newSource(t, srv, nil)
			srv.serve(http.StatusOK, good)
			u, err := pollOnce(t, s)
			require.NoError(t, err)
			require.NotNil(t, u)
			<-srv.requests

			srv.serve(http.StatusOK, c.body)
			alloc := allocDuring(func() { u, err = pollOnce(t, s) })
			<-srv.requests
			require.Error(t, err)
			t.Logf("%s: %.200s (%d bytes allocated)", c.name, err, alloc)
			assert.Nil(t, u, "nothing sent: the last good pods stay")
			assert.Len(t, rec.Events(), 1)
			worst = max(worst, alloc)
		})
	}
	reltable.Print(t, reltable.Row{
		Test: "podconfig/manifesturl: TestMalformedBodiesAreRefused",
		Done: "manifest URL bodies: binary junk, truncated JSON, a Service, JSON and YAML nested 100,000 deep, a YAML alias bomb, a pod name of 300 and a container name of 64 characters, a pod without containers",
		Held: fmt.Sprintf("each refused with an error and a FailedValidation event; the last good pods stay; at most %.1f MiB allocated per poll", float64(worst)/(1<<20)),
		Run:  "go test -run MalformedBodies -v ./podconfig/manifesturl",
	})
}

// A PodList of 10,000 pods within the size limit is decoded and sent whole;
// admission (MaxPods) is the agent's business.
func TestPodListOfTenThousandPods(t *testing.T) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	for i := range 10000 {
		p := testPod(fmt.Sprintf("p%05d", i), "")
		p.UID = ""
		list.Items = append(list.Items, p)
	}
	body := podJSON(t, list)
	srv := newServer(t)
	srv.serve(http.StatusOK, body)
	s, _ := newSource(t, srv, nil)
	var u *podconfig.PodUpdate
	var err error
	start := time.Now()
	alloc := allocDuring(func() { u, err = pollOnce(t, s) })
	took := time.Since(start)
	require.NoError(t, err)
	require.NotNil(t, u)
	assert.Len(t, u.Pods, 10000)
	reltable.Print(t, reltable.Row{
		Test: "podconfig/manifesturl: TestPodListOfTenThousandPods",
		Done: fmt.Sprintf("manifest URL serving a PodList of 10,000 pods (%.1f MiB)", float64(len(body))/(1<<20)),
		Held: fmt.Sprintf("decoded and sent whole in %v, %.0f MiB allocated (%.1f KiB per pod)", took.Round(time.Millisecond), float64(alloc)/(1<<20), float64(alloc)/10000/1024),
		Run:  "go test -run TenThousandPods -v ./podconfig/manifesturl",
	})
}
