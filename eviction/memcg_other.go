//go:build !linux

package eviction

import "errors"

// Notify fails: memory cgroup notifications need Linux.
func (n MemcgNotifier) Notify(bool, int64, func()) (func(), error) {
	return nil, errors.New("eviction: memory cgroup notifications need Linux cgroup v1")
}
