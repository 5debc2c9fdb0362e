package podworkers_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/podworkers/podworkerstest"
)

func ExampleNew() {
	syncer := &podworkerstest.Syncer{} // the agent in a real program
	pw, err := podworkers.New(podworkers.Config{Syncer: syncer, Cache: podworkerstest.NewCache()})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = pw.Run(ctx); close(done) }()

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1"}}
	_ = pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod})
	<-syncer.WaitCalls(1)
	// stop the pod and wait until its containers are stopped
	if err := pw.TerminatePodAndWait(ctx, pod, podworkers.KillPodOptions{}); err != nil {
		panic(err)
	}
	<-syncer.WaitCalls(3) // SyncTerminatedPod follows
	for _, m := range syncer.Methods("1") {
		fmt.Println(m)
	}
	cancel()
	<-done
	// Output:
	// SyncPod
	// SyncTerminatingPod
	// SyncTerminatedPod
}
