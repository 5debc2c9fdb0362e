package cri

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// blockingImages is an image client whose pulls wait for release and
// record how many ran at once.
type blockingImages struct {
	runtimeapi.ImageServiceClient
	mu       sync.Mutex
	inFlight int
	maxSeen  int
	started  chan struct{}
	release  chan struct{}
}

func (b *blockingImages) PullImage(ctx context.Context, in *runtimeapi.PullImageRequest, _ ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	b.mu.Lock()
	b.inFlight++
	b.maxSeen = max(b.maxSeen, b.inFlight)
	b.mu.Unlock()
	b.started <- struct{}{}
	<-b.release
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	return &runtimeapi.PullImageResponse{ImageRef: in.Image.Image}, nil
}

func TestPullParallelism(t *testing.T) {
	for _, tt := range []struct {
		name     string
		parallel int
		want     int
	}{
		{"pulls are serialized by default", 0, 1},
		{"parallel pulls are bounded", 2, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Endpoint: "unix:///x", MaxParallelImagePulls: tt.parallel, RegistryPullQPS: -1, Clock: clocktesting.NewFakeClock(t0())}
			require.NoError(t, setDefaults(&cfg))
			img := &blockingImages{started: make(chan struct{}), release: make(chan struct{})}
			p := newPuller(cfg, img)
			const n = 4
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					_, _, err := p.pull(context.Background(), &runtimeapi.ImageSpec{Image: "x"}, nil, nil)
					assert.NoError(t, err) // not require: FailNow must not run off the test goroutine
				})
			}
			// Let the limit fill up before releasing anything, so the
			// measured maximum does not depend on scheduling.
			for range tt.want {
				<-img.started
			}
			for i := range n {
				img.release <- struct{}{}
				if i+tt.want < n {
					<-img.started
				}
			}
			wg.Wait()
			require.Equal(t, tt.want, img.maxSeen)
		})
	}
}
