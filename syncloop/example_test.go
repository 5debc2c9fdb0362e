package syncloop_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/syncloop"
)

// printer is a minimal Handler.
type printer struct{}

func (printer) HandlePodAdditions(_ context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		fmt.Println("add", p.Name)
	}
}
func (printer) HandlePodUpdates(context.Context, []*v1.Pod) {}
func (printer) HandlePodRemoves(_ context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		fmt.Println("remove", p.Name)
	}
}
func (printer) HandlePodReconcile(context.Context, []*v1.Pod) {}
func (printer) HandlePodSyncs(context.Context, []*v1.Pod)     {}
func (printer) HandlePodCleanups(context.Context) error       { return nil }

type noPods struct{}

func (noPods) GetPodByUID(types.UID) (*v1.Pod, bool) { return nil, false }

func ExampleLoop_Run() {
	loop, err := syncloop.New(syncloop.Config{Pods: noPods{}})
	if err != nil {
		panic(err)
	}
	updates := make(chan podconfig.PodUpdate, 2)
	web := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "1"}}
	updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{web}, Source: "file"}
	updates <- podconfig.PodUpdate{Op: podconfig.REMOVE, Pods: []*v1.Pod{web}, Source: "file"}
	close(updates) // ends the loop once both are handled
	if err := loop.Run(context.Background(), updates, printer{}); err != nil {
		panic(err)
	}
	// Output:
	// add web
	// remove web
}
