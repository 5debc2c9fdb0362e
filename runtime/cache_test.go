package runtime

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type getResult struct {
	status *PodStatus
	err    error
}

// startGet runs GetNewerThan in a goroutine and returns where its result
// arrives.
func startGet(ctx context.Context, c Cache, uid types.UID, minTime time.Time) <-chan getResult {
	ch := make(chan getResult, 1)
	go func() {
		s, err := c.GetNewerThan(ctx, uid, minTime)
		ch <- getResult{s, err}
	}()
	return ch
}

func waiterCount(c Cache) int {
	cc := c.(*cache)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	n := 0
	for _, ws := range cc.waiters {
		n += len(ws)
	}
	return n
}

// canceled returns a context that has already ended: GetNewerThan with it
// returns data only if it had data without waiting.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestCacheGetNewerThanReturnsAtOnce(t *testing.T) {
	st := &PodStatus{ID: "a", Name: "pod-a"}
	errStatus := errors.New("inspect failed")
	tests := []struct {
		name    string
		setup   func(c Cache)
		uid     types.UID
		want    *PodStatus
		wantErr error
	}{
		{
			name:  "pod data newer than minTime is returned",
			setup: func(c Cache) { c.Set("a", st, nil, t0.Add(2*time.Second)) },
			uid:   "a", want: st,
		},
		{
			name:  "pod error newer than minTime is returned with its status",
			setup: func(c Cache) { c.Set("a", st, errStatus, t0.Add(2*time.Second)) },
			uid:   "a", want: st, wantErr: errStatus,
		},
		{
			name: "global update time newer than minTime returns older pod data",
			setup: func(c Cache) {
				c.Set("a", st, nil, t0)
				c.UpdateTime(t0.Add(2 * time.Second))
			},
			uid: "a", want: st,
		},
		{
			name:  "global update time newer than minTime returns an empty status for an unknown pod",
			setup: func(c Cache) { c.UpdateTime(t0.Add(2 * time.Second)) },
			uid:   "b", want: &PodStatus{ID: "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			tt.setup(c)
			got, err := c.GetNewerThan(canceled(), tt.uid, t0.Add(time.Second))
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantErr, err)
			assert.Zero(t, waiterCount(c))
		})
	}
}

func TestCacheGetNewerThanDoesNotReturnDataNotNewer(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c Cache)
	}{
		{"empty cache", func(Cache) {}},
		{"pod data older than minTime", func(c Cache) { c.Set("a", &PodStatus{ID: "a"}, nil, t0) }},
		{"pod data exactly at minTime", func(c Cache) { c.Set("a", &PodStatus{ID: "a"}, nil, t0.Add(time.Second)) }},
		{"global update time not after minTime", func(c Cache) { c.UpdateTime(t0.Add(time.Second)) }},
		{"another pod's newer data", func(c Cache) { c.Set("b", &PodStatus{ID: "b"}, nil, t0.Add(time.Hour)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			tt.setup(c)
			got, err := c.GetNewerThan(canceled(), "a", t0.Add(time.Second))
			assert.Nil(t, got)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Zero(t, waiterCount(c), "a canceled call leaves no waiter behind")
		})
	}
}

func TestCacheCallsOnWaitOnlyWhenGetNewerThanWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waits atomic.Int32
		c := NewCacheWithOnWait(func() { waits.Add(1) })
		c.Set("a", &PodStatus{ID: "a"}, nil, t0.Add(time.Second))
		_, err := c.GetNewerThan(context.Background(), "a", t0)
		require.NoError(t, err)
		assert.Zero(t, waits.Load(), "fresh data: no wait")

		got := startGet(context.Background(), c, "a", t0.Add(time.Second))
		synctest.Wait()
		assert.Equal(t, int32(1), waits.Load(), "stale data: the call waits and says so")
		c.UpdateTime(t0.Add(2 * time.Second))
		require.NoError(t, (<-got).err)
	})
}

func TestCacheGetNewerThanWakes(t *testing.T) {
	minTime := t0.Add(time.Second)
	st := &PodStatus{ID: "a", Name: "pod-a"}
	tests := []struct {
		name string
		// stale is applied while the waiter blocks and must not wake it.
		stale func(c Cache)
		wake  func(c Cache)
		want  *PodStatus
	}{
		{
			name:  "Set of newer data wakes the waiter",
			stale: func(c Cache) { c.Set("a", &PodStatus{ID: "a", Name: "old"}, nil, minTime) },
			wake:  func(c Cache) { c.Set("a", st, nil, minTime.Add(time.Nanosecond)) },
			want:  st,
		},
		{
			name: "UpdateTime after minTime wakes the waiter with the pod's data",
			stale: func(c Cache) {
				c.Set("a", st, nil, t0)
				c.UpdateTime(minTime)
			},
			wake: func(c Cache) { c.UpdateTime(minTime.Add(time.Second)) },
			want: st,
		},
		{
			name:  "UpdateTime wakes the waiter of an unknown pod with an empty status",
			stale: func(c Cache) { c.Set("b", &PodStatus{ID: "b"}, nil, minTime.Add(time.Hour)) },
			wake:  func(c Cache) { c.UpdateTime(minTime.Add(time.Second)) },
			want:  &PodStatus{ID: "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := NewCache()
				got := startGet(context.Background(), c, "a", minTime)
				synctest.Wait()
				require.Equal(t, 1, waiterCount(c))

				tt.stale(c)
				synctest.Wait()
				select {
				case r := <-got:
					t.Fatalf("woke on stale data: %+v", r)
				default:
				}

				tt.wake(c)
				r := <-got
				require.NoError(t, r.err)
				assert.Equal(t, tt.want, r.status)
				assert.Zero(t, waiterCount(c))
			})
		})
	}
}

func TestCacheGetNewerThanWakesEveryWaiterItSatisfies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		early := startGet(context.Background(), c, "a", t0)
		late := startGet(context.Background(), c, "a", t0.Add(time.Hour))
		synctest.Wait()
		require.Equal(t, 2, waiterCount(c))

		st := &PodStatus{ID: "a"}
		c.Set("a", st, nil, t0.Add(time.Minute))
		r := <-early
		assert.Same(t, st, r.status)
		synctest.Wait()
		select {
		case r := <-late:
			t.Fatalf("waiter for newer data woke early: %+v", r)
		default:
		}
		assert.Equal(t, 1, waiterCount(c))

		c.Set("a", st, nil, t0.Add(2*time.Hour))
		r = <-late
		assert.Same(t, st, r.status)
		assert.Zero(t, waiterCount(c))
	})
}

func TestCacheGetNewerThanCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		ctx, cancel := context.WithCancel(context.Background())
		got := startGet(ctx, c, "a", t0)
		other := startGet(context.Background(), c, "a", t0)
		synctest.Wait()
		require.Equal(t, 2, waiterCount(c))

		cancel()
		r := <-got
		assert.Nil(t, r.status)
		assert.ErrorIs(t, r.err, context.Canceled)
		assert.Equal(t, 1, waiterCount(c), "only the canceled waiter is removed")

		c.UpdateTime(t0.Add(time.Second))
		r = <-other
		assert.NoError(t, r.err)
		assert.Zero(t, waiterCount(c))
	})
}

func TestCacheGetNewerThanDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.GetNewerThan(ctx, "a", t0)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Zero(t, waiterCount(c))
	})
}

func TestCacheSet(t *testing.T) {
	older := &PodStatus{ID: "a", Name: "older"}
	newer := &PodStatus{ID: "a", Name: "newer"}
	tests := []struct {
		name       string
		first      time.Time
		second     time.Time
		wantStored bool
		want       *PodStatus
	}{
		{"newer data replaces older", t0, t0.Add(time.Second), true, newer},
		{"data at the same time replaces", t0, t0, true, newer},
		{"older data is refused", t0.Add(time.Second), t0, false, older},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			require.True(t, c.Set("a", older, nil, tt.first))
			assert.Equal(t, tt.wantStored, c.Set("a", newer, nil, tt.second))
			got, err := c.Get("a")
			assert.NoError(t, err)
			assert.Same(t, tt.want, got)
		})
	}
}

func TestCacheGet(t *testing.T) {
	c := NewCache()
	got, err := c.Get("unknown")
	require.NoError(t, err)
	assert.Equal(t, &PodStatus{ID: "unknown"}, got, "unknown pod gives an empty status with its ID")

	errInspect := errors.New("inspect failed")
	st := &PodStatus{ID: "a"}
	c.Set("a", st, errInspect, t0)
	got, err = c.Get("a")
	assert.Same(t, st, got)
	assert.Equal(t, errInspect, err)

	c.Delete("a")
	got, err = c.Get("a")
	assert.NoError(t, err)
	assert.Equal(t, &PodStatus{ID: "a"}, got, "deleted pod is unknown again")
}
