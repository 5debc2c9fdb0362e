package eviction

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Notify arms a threshold of usageBytes on the cgroup's memory usage and
// calls notify from a goroutine of its own each time the kernel signals
// it; stop disarms it and returns once that goroutine ended.
func (n MemcgNotifier) Notify(allocatable bool, usageBytes int64, notify func()) (stop func(), err error) {
	dir := n.path(allocatable)
	usage, err := os.Open(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return nil, fmt.Errorf("memory cgroup notification (cgroup v1 only): %w", err)
	}
	defer usage.Close() // the kernel holds its own reference once registered
	var fds []int
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	event, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	fds = append(fds, event)
	quit, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	fds = append(fds, quit)
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("epoll: %w", err)
	}
	fds = append(fds, epfd)
	for _, fd := range []int{event, quit} {
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			closeAll()
			return nil, fmt.Errorf("epoll: %w", err)
		}
	}
	line := strconv.Itoa(event) + " " + strconv.Itoa(int(usage.Fd())) + " " + strconv.FormatInt(usageBytes, 10)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), []byte(line), 0o600); err != nil {
		closeAll()
		return nil, fmt.Errorf("memory cgroup notification: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer closeAll()
		events := make([]unix.EpollEvent, 2)
		buf := make([]byte, 8)
		for {
			k, err := unix.EpollWait(epfd, events, -1)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			for _, ev := range events[:k] {
				if int(ev.Fd) == quit {
					return
				}
				if _, err := unix.Read(event, buf); err == nil && binary.LittleEndian.Uint64(buf) > 0 {
					notify()
				}
			}
		}
	}()
	return func() {
		one := make([]byte, 8)
		binary.LittleEndian.PutUint64(one, 1)
		_, _ = unix.Write(quit, one)
		<-done
	}, nil
}
