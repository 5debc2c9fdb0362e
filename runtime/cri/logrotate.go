package cri

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Defaults of the container log rotation, the kubelet's.
const (
	DefaultContainerLogMaxSize         = 10 << 20
	DefaultContainerLogMaxFiles        = 5
	DefaultContainerLogMaxWorkers      = 1
	DefaultContainerLogMonitorInterval = 10 * time.Second
)

// The kubelet's names for rotated files: <log>.<timestamp>, compressed to
// <log>.<timestamp>.gz through <log>.<timestamp>.tmp.
const (
	rotatedTimestampFormat = "20060102-150405"
	compressSuffix         = ".gz"
	tmpSuffix              = ".tmp"
)

// logRuntime is what the log manager asks of the runtime.
type logRuntime interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, in *runtimeapi.ReopenContainerLogRequest, opts ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error)
}

// ContainerLogManager rotates the log files of running containers, as the
// kubelet's (pkg/kubelet/logs): every monitor interval each running
// container's log over MaxSize is renamed to <log>.<timestamp>, the runtime
// is asked to reopen it (CRI ReopenContainerLog), the older rotated files
// are gzipped, and the oldest removed so that at most MaxFiles files
// remain, the live one included. Get it with Manager.LogManager; it is safe
// for concurrent use.
type ContainerLogManager struct {
	rt       logRuntime
	clock    clock.Clock
	log      logr.Logger
	maxSize  int64
	maxFiles int
	workers  int
	interval time.Duration
	timeout  time.Duration
	// mu keeps log removal (clean) off a rotation in progress.
	mu sync.Mutex
}

// LogManager returns the manager's container log rotation, configured by
// Config.ContainerLogMaxSize and its siblings. Run it for rotation; the
// manager's GarbageCollect and RemovePod remove logs without it.
func (m *Manager) LogManager() *ContainerLogManager { return m.logs }

func newContainerLogManager(rt logRuntime, c Config) *ContainerLogManager {
	return &ContainerLogManager{
		rt: rt, clock: c.Clock, log: c.Log.WithName("logs"),
		maxSize: c.ContainerLogMaxSize, maxFiles: c.ContainerLogMaxFiles,
		workers: c.ContainerLogMaxWorkers, interval: c.ContainerLogMonitorInterval,
		timeout: c.CallTimeout,
	}
}

// logRotationDefaults fills in and checks the rotation fields of c.
func logRotationDefaults(c *Config) error {
	switch {
	case c.ContainerLogMaxSize == 0:
		c.ContainerLogMaxSize = DefaultContainerLogMaxSize
	case c.ContainerLogMaxSize < 0:
		c.ContainerLogMaxSize = -1
	}
	if c.ContainerLogMaxFiles == 0 {
		c.ContainerLogMaxFiles = DefaultContainerLogMaxFiles
	}
	if c.ContainerLogMaxWorkers == 0 {
		c.ContainerLogMaxWorkers = DefaultContainerLogMaxWorkers
	}
	if c.ContainerLogMonitorInterval == 0 {
		c.ContainerLogMonitorInterval = DefaultContainerLogMonitorInterval
	}
	switch {
	case c.ContainerLogMaxFiles < 2:
		return fmt.Errorf("cri: ContainerLogMaxFiles %d: must be at least 2 (the live file and one rotated)", c.ContainerLogMaxFiles)
	case c.ContainerLogMaxWorkers < 0:
		return fmt.Errorf("cri: ContainerLogMaxWorkers %d: must not be negative", c.ContainerLogMaxWorkers)
	case c.ContainerLogMonitorInterval < 0:
		return fmt.Errorf("cri: ContainerLogMonitorInterval %v: must not be negative", c.ContainerLogMonitorInterval)
	}
	return nil
}

// Run rotates the logs every monitor interval until ctx ends, then
// returns nil. With rotation disabled (a negative ContainerLogMaxSize) it
// only waits for ctx.
func (l *ContainerLogManager) Run(ctx context.Context) error {
	if l.maxSize < 0 {
		<-ctx.Done()
		return nil
	}
	l.log.V(1).Info("Starting container log rotation", "maxSize", l.maxSize, "maxFiles", l.maxFiles, "workers", l.workers, "interval", l.interval)
	// the interval runs from the end of a pass, as wait.Forever's
	t := l.clock.NewTimer(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		if err := l.RotateLogs(ctx); err != nil && ctx.Err() == nil {
			l.log.Error(err, "Failed to rotate container logs")
		}
		t.Reset(l.interval)
	}
}

// RotateLogs makes one pass over the running containers, rotating each log
// over the size limit with up to the configured number of workers. The
// error is the listing's or the joined errors of the containers'
// rotations; one container's failure does not hold back the others.
func (l *ContainerLogManager) RotateLogs(ctx context.Context) error {
	if l.maxSize < 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	resp, err := l.rt.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	cancel()
	if err != nil {
		return wrapErr("ListContainers", err)
	}
	ids := make(chan string)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range min(l.workers, len(resp.Containers)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				if err := l.rotateContainer(ctx, id); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("container %s: %w", id, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range resp.Containers {
		// a runtime may ignore the filter
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			ids <- c.Id
		}
	}
	close(ids)
	wg.Wait()
	return errors.Join(errs...)
}

// rotateContainer rotates one container's log if it is over the limit. A
// missing log file is reopened first, as the kubelet does.
func (l *ContainerLogManager) rotateContainer(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	path, err := l.logPath(ctx, id)
	if err != nil || path == "" {
		return err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := l.reopen(ctx, id); err != nil {
			return fmt.Errorf("log %s is missing and reopening it failed: %w", path, err)
		}
		fi, err = os.Stat(path)
	}
	if err != nil {
		return err
	}
	if fi.Size() < l.maxSize {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.rotate(ctx, id, path); err != nil {
		return fmt.Errorf("rotating %s: %w", path, err)
	}
	l.log.V(4).Info("Rotated container log", "containerID", id, "path", path, "size", fi.Size())
	return nil
}

func (l *ContainerLogManager) logPath(ctx context.Context, id string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	st, err := l.rt.ContainerStatus(cctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return "", wrapErr("ContainerStatus", err)
	}
	return st.GetStatus().GetLogPath(), nil
}

func (l *ContainerLogManager) reopen(ctx context.Context, id string) error {
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if _, err := l.rt.ReopenContainerLog(cctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		return wrapErr("ReopenContainerLog", err)
	}
	return nil
}

// rotate is the kubelet's rotateLog: drop leftovers of failed rotations,
// keep MaxFiles-2 rotated files (the live one and the one about to be
// rotated make MaxFiles), compress them, then rotate the live one.
func (l *ContainerLogManager) rotate(ctx context.Context, id, path string) error {
	rotated, err := rotatedLogs(path, true)
	if err != nil {
		return err
	}
	keep := l.maxFiles - 2
	for len(rotated) > keep {
		if err := os.Remove(rotated[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		rotated = rotated[1:]
	}
	for _, r := range rotated {
		if !strings.HasSuffix(r, compressSuffix) {
			if err := compressLog(r); err != nil {
				return err
			}
		}
	}
	to := path + "." + l.clock.Now().Format(rotatedTimestampFormat)
	if exists(to) || exists(to+compressSuffix) {
		// rotated already this second (the names have seconds only): the
		// next pass does it, rather than overwrite that file
		return nil
	}
	if err := os.Rename(path, to); err != nil {
		return err
	}
	if err := l.reopen(ctx, id); err != nil {
		// Put it back so that the next pass tries again; the runtime still
		// writes to it.
		if rerr := os.Rename(to, path); rerr != nil {
			l.log.Error(rerr, "Failed to restore a rotated log; it is lost to the container's log", "containerID", id, "rotated", to, "log", path)
		}
		return err
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// rotatedLogs lists path's rotated files, oldest first. With cleanup it
// removes what a failed rotation left behind (temporary files, and a file
// whose compressed copy exists); without it it only skips them.
func rotatedLogs(path string, cleanup bool) ([]string, error) {
	all, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return nil, err
	}
	have := make(map[string]bool, len(all))
	for _, f := range all {
		have[f] = true
	}
	var inUse []string
	for _, f := range all {
		if strings.HasSuffix(f, tmpSuffix) || have[f+compressSuffix] {
			if cleanup {
				if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
					return nil, err
				}
			}
			continue
		}
		inUse = append(inUse, f)
	}
	sort.Strings(inUse) // the timestamps sort by time
	return inUse, nil
}

// globEscape quotes the glob metacharacters of a path.
func globEscape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// compressLog gzips f to f.gz through f.gz.tmp and removes f.
func compressLog(f string) (err error) {
	in, err := os.Open(f)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := f + compressSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	w := gzip.NewWriter(out)
	if _, err = io.Copy(w, in); err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	if err = w.Close(); err != nil {
		return err
	}
	if err = out.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, f+compressSuffix); err != nil {
		return err
	}
	return os.Remove(f)
}

// clean removes a container's log file and its rotated files, as the
// kubelet does before removing the container.
func (l *ContainerLogManager) clean(path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	all, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range append(all, path) {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
