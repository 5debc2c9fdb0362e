package provider_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
)

// mockStyle calls its NotifyPods callback from CreatePod and DeletePod
// without a nil check, as virtual-kubelet's mock provider does.
type mockStyle struct {
	*providertest.Notifier
	mu sync.Mutex
	cb func(*v1.Pod)
}

func (m *mockStyle) NotifyPods(ctx context.Context, cb func(*v1.Pod)) {
	m.mu.Lock()
	m.cb = cb
	m.mu.Unlock()
	m.Notifier.NotifyPods(ctx, cb)
}

func (m *mockStyle) CreatePod(ctx context.Context, pod *v1.Pod) error {
	if err := m.Notifier.CreatePod(ctx, pod); err != nil {
		return err
	}
	m.mu.Lock()
	cb := m.cb
	m.mu.Unlock()
	cb(pod) // panics if NotifyPods was not called first
	return nil
}

// TestProviderIsCalledOnlyAfterNotifyPods: SyncPod waits for the
// provider's NotifyPods to be registered (by the first event stream the
// agent opens) before CreatePod, so a provider may call its callback
// without a nil check; a sync whose context ends first fails without
// calling the provider.
func TestProviderIsCalledOnlyAfterNotifyPods(t *testing.T) {
	for _, tc := range []struct {
		name       string
		openStream bool
		wantCreate int
	}{
		{"the stream opens: CreatePod follows NotifyPods", true, 1},
		{"the sync gives up first: no CreatePod", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &mockStyle{Notifier: providertest.NewNotifier(nil)}
			rt, err := provider.New(provider.Config{Provider: p})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if !tc.openStream {
				cancel()
				ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
			}
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- rt.SyncPod(ctx, testPod("web"), nil, nil, nil).Error() }()
			time.Sleep(20 * time.Millisecond)
			assert.Zero(t, p.Calls("CreatePod"), "CreatePod before NotifyPods")
			if tc.openStream {
				openStream(t, rt)
			}
			err = <-done
			assert.Equal(t, tc.wantCreate, p.Calls("CreatePod"))
			if tc.openStream {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, "NotifyPods")
			}
		})
	}
}
