package podconfig

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// SourcesReadyFunc reports whether all sources are ready, given those the
// caller has seen updates from; PodConfig.SeenAllSources is one.
type SourcesReadyFunc func(seen sets.Set[string]) bool

// SourcesReady tracks which sources the consumer of Updates() has heard
// from. The kubelet holds back destructive housekeeping (killing pods it
// does not know) until AllReady, so a slow source does not look empty.
type SourcesReady struct {
	ready SourcesReadyFunc
	mu    sync.RWMutex
	seen  sets.Set[string]
}

// NewSourcesReady returns a tracker that asks ready whether the sources seen
// so far are all there are. A nil ready is never ready.
func NewSourcesReady(ready SourcesReadyFunc) *SourcesReady {
	return &SourcesReady{ready: ready, seen: sets.New[string]()}
}

// AddSource records that an update from source was received.
func (s *SourcesReady) AddSource(source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen.Insert(source)
}

// AllReady reports whether every source has been seen and is ready.
func (s *SourcesReady) AllReady() bool {
	if s.ready == nil {
		return false
	}
	s.mu.RLock()
	seen := s.seen.Clone()
	s.mu.RUnlock()
	return s.ready(seen)
}
