package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Requests beyond -max-in-flight wait for one to end instead of going out
// (each would need a stream, or a connection, of its own); a watch, which
// holds its stream for as long as it runs, is not counted.
func TestRequestsBeyondTheBoundWaitAndWatchesAreNotCounted(t *testing.T) {
	var mu sync.Mutex
	open, most := 0, 0
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		mu.Lock()
		open++
		most = max(most, open)
		mu.Unlock()
		<-hold
		mu.Lock()
		open--
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"n"}}`))
	}))
	defer srv.Close()
	defer close(hold)
	cs, err := newClients(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000}, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Two watches first: with the bound counting them, no GET would pass.
	for range 2 {
		w, err := cs.Pods("").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { _, _ = cs.Leases("ns").Get(ctx, "n", metav1.GetOptions{}) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		o := open
		mu.Unlock()
		if o == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d GETs reached the server, want 2 (the bound) with 2 watches open", o)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a third would arrive now
	for range 5 {
		hold <- struct{}{} // one GET at a time may answer
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if most != 2 {
		t.Errorf("at most %d GETs open at once, want 2", most)
	}
}
