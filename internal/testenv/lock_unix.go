//go:build unix

package testenv

import (
	"errors"
	"os"
	"syscall"
)

// errLocked is returned by a non-blocking lockFile that would block.
var errLocked = errors.New("locked")

// lockFile takes a shared or exclusive flock on path, waiting for it unless
// nonblock. Locks are per open file, so they exclude each other within one
// process as between test binaries.
func lockFile(path string, exclusive, nonblock bool) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if nonblock {
		how |= syscall.LOCK_NB
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
