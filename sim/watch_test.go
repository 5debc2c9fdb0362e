package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/sim"
)

// The store's watch starts as the apiserver's: without a resourceVersion
// (or from "0") with the current pods as Added, from a list's
// resourceVersion with only what came after it. A node agent's pod source
// lists, then watches; a pod bound between the two must reach it.
func TestWatchStartsAsTheApiserversDoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		rv   func(listRV string) string
		want []string
	}{
		{"no resourceVersion sends current pods then new ones", func(string) string { return "" },
			[]string{"ADDED a", "ADDED b", "ADDED c"}},
		{"resourceVersion 0 sends current pods then new ones", func(string) string { return "0" },
			[]string{"ADDED a", "ADDED b", "ADDED c"}},
		{"a list's resourceVersion sends only what came after it", func(rv string) string { return rv },
			[]string{"ADDED b", "ADDED c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, sim.Config{})
			pods := cl.Pods("default")
			ctx := context.Background()
			bound := func(name string) *v1.Pod {
				p := pod(name, nil)
				p.Spec.NodeName = "n9" // no agent: nothing else writes these pods
				return p
			}
			if _, err := pods.Create(ctx, bound("a"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			sel := metav1.ListOptions{FieldSelector: "spec.nodeName=n9"}
			list, err := pods.List(ctx, sel)
			if err != nil {
				t.Fatal(err)
			}
			// b is written between the list and the watch.
			if _, err := pods.Create(ctx, bound("b"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			sel.ResourceVersion = tc.rv(list.ResourceVersion)
			w, err := pods.Watch(ctx, sel)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if _, err := pods.Create(ctx, bound("c"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for len(got) < len(tc.want) {
				select {
				case ev := <-w.ResultChan():
					got = append(got, fmt.Sprintf("%s %s", ev.Type, ev.Object.(*v1.Pod).Name))
				case <-time.After(10 * time.Second):
					t.Fatalf("events %v, want %v", got, tc.want)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
			select {
			case ev := <-w.ResultChan():
				t.Errorf("extra event %s %s", ev.Type, ev.Object.(*v1.Pod).Name)
			default:
			}
		})
	}
}

func TestWatchFromBeyondHistoryIsGone(t *testing.T) {
	cl := newCluster(t, sim.Config{})
	pods := cl.Pods("default")
	ctx := context.Background()
	if _, err := pods.Create(ctx, pod("first", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// More writes than the store keeps history of.
	for i := range 5000 {
		p := pod(fmt.Sprintf("p%d", i), nil)
		p.Spec.NodeName = "n9"
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("watch from a compacted resourceVersion: %v, want 410 Gone", err)
	}
}
