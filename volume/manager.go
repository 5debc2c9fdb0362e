package volume

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/cm"
)

// ErrUnsupported is wrapped for a volume type the Manager does not set up.
var ErrUnsupported = errors.New("volume: unsupported volume")

// ErrNoSource is wrapped when a volume needs an API object (or a token) and
// the Manager has no source for it, as for static pods on a standalone node.
var ErrNoSource = errors.New("volume: no API source configured")

// ObjectGetter returns the configMaps and secrets pods reference; a missing
// object is an error for which apierrors.IsNotFound holds. objects.Cache
// satisfies it.
type ObjectGetter interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// TokenGetter returns service-account tokens; objects.Tokens satisfies it.
type TokenGetter interface {
	Token(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// TokenForgetter is implemented by token getters that cache per pod;
// TearDown calls it.
type TokenForgetter interface {
	Forget(uid types.UID)
}

// Mounter mounts and unmounts the tmpfs of memory-backed emptyDirs.
type Mounter interface {
	// MountTmpfs mounts a tmpfs at dir, of at most sizeBytes (0: the
	// kernel's default, half the RAM).
	MountTmpfs(dir string, sizeBytes int64) error
	// Unmount unmounts dir.
	Unmount(dir string) error
	// IsMountPoint reports whether something is mounted at dir.
	IsMountPoint(dir string) (bool, error)
}

// EventRecorder records an event about an object. client-go's
// record.EventRecorder satisfies it as it is.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// ReasonFailedMount is the event reason for a volume that could not be set
// up, as the kubelet's.
const ReasonFailedMount = "FailedMount"

// Config configures a Manager. PodsRoot is required.
type Config struct {
	// PodsRoot holds per-pod state (the kubelet's /var/lib/kubelet/pods);
	// volumes go to <PodsRoot>/<uid>/volumes/kubernetes.io~<kind>/<name>.
	// It must be the runtime's PodsRoot (runtime/cri's Config.PodsRoot).
	PodsRoot string
	// Objects reads configMaps and secrets. nil: such volumes fail with
	// ErrNoSource.
	Objects ObjectGetter
	// Tokens issues service-account tokens for projected volumes. nil:
	// they fail with ErrNoSource.
	Tokens TokenGetter
	// NodeAllocatable returns the node's allocatable resources, which stand
	// in for limits a container does not set in downward API
	// resourceFieldRefs. Optional (such limits are then 0).
	NodeAllocatable func() v1.ResourceList
	// Mounter mounts tmpfs for emptyDir volumes with medium Memory and for
	// secret and projected volumes. Default: mount(2) on Linux, an error
	// elsewhere.
	Mounter Mounter
	// SecretsOnDisk writes secret and projected volumes (tokens) to
	// PodsRoot's file system. Default false: each is a tmpfs, as with the
	// kubelet, so secrets never reach a disk; a node that cannot mount gets
	// a clear error for such volumes unless this is set.
	SecretsOnDisk bool
	// Recorder receives FailedMount events. Optional.
	Recorder EventRecorder
	// Clock names the atomic writer's timestamped directories. Default the
	// real clock.
	Clock clock.PassiveClock
	// Log defaults to logr.Discard().
	Log logr.Logger
}

// Manager sets up pods' volumes on the node and tears them down. It is safe
// for concurrent use; calls for one pod must not overlap (pod workers
// serialize them).
type Manager struct {
	cfg Config
	mu  sync.Mutex
	// written maps a volume directory to the hash of the payload last
	// written there, so an unchanged payload costs no disk reads.
	written map[string]uint64
}

// New returns a Manager for c.
func New(c Config) (*Manager, error) {
	if c.PodsRoot == "" {
		return nil, errors.New("volume: PodsRoot is required")
	}
	if c.Mounter == nil {
		c.Mounter = SystemMounter{}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return &Manager{cfg: c, written: map[string]uint64{}}, nil
}

// Plugin directory names, the kubelet's.
const (
	kindEmptyDir    = "kubernetes.io~empty-dir"
	kindConfigMap   = "kubernetes.io~configmap"
	kindSecret      = "kubernetes.io~secret"
	kindDownwardAPI = "kubernetes.io~downward-api"
	kindProjected   = "kubernetes.io~projected"
)

func kindOf(v *v1.Volume) string {
	switch {
	case v.EmptyDir != nil:
		return kindEmptyDir
	case v.ConfigMap != nil:
		return kindConfigMap
	case v.Secret != nil:
		return kindSecret
	case v.DownwardAPI != nil:
		return kindDownwardAPI
	case v.Projected != nil:
		return kindProjected
	}
	return ""
}

// PodDir is the pod's directory under PodsRoot.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.cfg.PodsRoot, string(uid))
}

// HostPath returns where volume vol of pod is on the host: the hostPath's
// path, or the volume's directory under the pod's. It does not set it up.
func (m *Manager) HostPath(pod *v1.Pod, vol *v1.Volume) (string, error) {
	if vol.HostPath != nil {
		return vol.HostPath.Path, nil
	}
	k := kindOf(vol)
	if k == "" {
		return "", fmt.Errorf("volume %q: %w: only hostPath, emptyDir, configMap, secret, downwardAPI and projected volumes are supported", vol.Name, ErrUnsupported)
	}
	if !plainName(string(pod.UID)) || !plainName(vol.Name) {
		return "", fmt.Errorf("volume %q of pod %q: not a plain name", vol.Name, pod.UID)
	}
	return filepath.Join(m.PodDir(pod.UID), "volumes", k, vol.Name), nil
}

// ReadOnly reports whether the volume is mounted read-only whatever the
// mount asks: the atomically written kinds are, as with the kubelet.
func ReadOnly(vol *v1.Volume) bool {
	return vol.ConfigMap != nil || vol.Secret != nil || vol.DownwardAPI != nil || vol.Projected != nil
}

// SetUp makes every volume of pod ready: hostPath types checked (and
// created for the ...OrCreate types), emptyDirs created (tmpfs for medium
// Memory), configMap, secret, downwardAPI and projected contents written
// with the atomic writer, or rewritten when their sources changed. A volume
// that fails does not stop the others; the error names each failed volume
// with the kubelet's "MountVolume.SetUp failed" message, and a FailedMount
// event is recorded for it. Nothing is written outside the pod's directory
// (hostPath volumes aside, which are the node's paths by definition).
func (m *Manager) SetUp(ctx context.Context, pod *v1.Pod) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if err := m.setUpVolume(ctx, pod, vol); err != nil {
			msg := fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", vol.Name, err)
			if m.cfg.Recorder != nil {
				m.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, ReasonFailedMount, "%s", msg)
			}
			errs = append(errs, fmt.Errorf("%s: %w", msg, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) setUpVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) error {
	if vol.HostPath != nil {
		return checkHostPath(vol.HostPath)
	}
	dir, err := m.HostPath(pod, vol)
	if err != nil {
		return err
	}
	if vol.EmptyDir != nil {
		return m.setUpEmptyDir(pod, dir, vol.EmptyDir)
	}
	payload, err := m.payload(ctx, pod, vol)
	if err != nil {
		return err
	}
	gid := -1
	if psc := pod.Spec.SecurityContext; psc != nil && psc.FSGroup != nil {
		// The kubelet's SetVolumeOwnership for read-only volumes: the
		// fsGroup owns the files and may read them (mode | 0440).
		gid = int(*psc.FSGroup)
		for k, f := range payload {
			f.Mode |= 0o440
			payload[k] = f
		}
	}
	h := hashPayload(payload)
	m.mu.Lock()
	same := m.written[dir] == h
	m.mu.Unlock()
	if same {
		if _, err := os.Lstat(filepath.Join(dir, dataDirName)); err == nil {
			return nil
		}
	}
	// An unchanged volume was written on its tmpfs (gone with it, ..data
	// would be too), so the mount is checked only when writing.
	if (vol.Secret != nil || vol.Projected != nil) && !m.cfg.SecretsOnDisk {
		if _, err := m.ensureTmpfs(dir, m.memorySize(pod, nil)); err != nil {
			return fmt.Errorf("%w (volume.Config.SecretsOnDisk keeps secrets on disk where tmpfs cannot be mounted)", err)
		}
	}
	wrote, err := writeAtomic(dir, payload, m.cfg.Clock.Now(), gid)
	if err != nil {
		return err
	}
	if wrote {
		m.cfg.Log.V(2).Info("volume written", "pod", pod.Namespace+"/"+pod.Name, "volume", vol.Name, "files", len(payload))
	}
	m.mu.Lock()
	m.written[dir] = h
	m.mu.Unlock()
	return nil
}

func (m *Manager) setUpEmptyDir(pod *v1.Pod, dir string, ed *v1.EmptyDirVolumeSource) error {
	_, err := os.Lstat(dir)
	fresh := errors.Is(err, fs.ErrNotExist)
	if err := ensureEmptyDir(dir); err != nil {
		return err
	}
	switch ed.Medium {
	case v1.StorageMediumDefault:
	case v1.StorageMediumMemory:
		mounted, err := m.ensureTmpfs(dir, m.memorySize(pod, ed.SizeLimit))
		if err != nil {
			return fmt.Errorf("emptyDir medium Memory: %w", err)
		}
		fresh = fresh || mounted
	default:
		return fmt.Errorf("emptyDir medium %q: %w: only the node's disk and Memory", ed.Medium, ErrUnsupported)
	}
	if !fresh {
		// Set up before (by this agent, or one before a restart): as the
		// kubelet's, which sets an emptyDir's ownership once, when it makes it.
		return nil
	}
	// With an fsGroup the directory becomes the group's and setgid, so what
	// the pod creates is the group's; its other bits stay (a tmpfs root's
	// sticky bit among them), as the kubelet's.
	var fsGroup *int64
	var policy *v1.PodFSGroupChangePolicy
	if psc := pod.Spec.SecurityContext; psc != nil {
		fsGroup, policy = psc.FSGroup, psc.FSGroupChangePolicy
	}
	return SetVolumeOwnership(dir, fsGroup, policy, false)
}

// ensureEmptyDir makes dir with permissions 0777, so any user of the pod may
// write its emptyDir whatever the umask, as the kubelet's emptyDir setupDir:
// chmod-ed only when the permissions differ, keeping the setgid, setuid and
// sticky bits. For medium Memory it is the directory the tmpfs is then
// mounted over; the tmpfs's root is the tmpfs's own 1777.
func ensureEmptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if info.Mode().Perm() == 0o777 {
		return nil
	}
	return os.Chmod(dir, info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)|0o777)
}

// memorySize is the size of a memory-backed volume's tmpfs, as the kubelet's
// calculateEmptyDirMemorySize (SizeMemoryBackedVolumes, GA in v1.32): the
// node's allocatable memory, lowered to the pod's memory limit (its cgroup's,
// cm.PodResources) if it has one, and to the volume's sizeLimit if set and
// lower still. 0 (the kernel's default, half the node's memory) only when
// none is known. The tmpfs's pages count against the pod's memory limit
// either way; the size keeps a write beyond it an ENOSPC, not an OOM kill.
func (m *Manager) memorySize(pod *v1.Pod, sizeLimit *resource.Quantity) int64 {
	var size int64
	if m.cfg.NodeAllocatable != nil {
		if q, ok := m.cfg.NodeAllocatable()[v1.ResourceMemory]; ok && q.Sign() > 0 {
			size = q.Value()
		}
	}
	lower := func(v int64) {
		if v > 0 && (size == 0 || v <= size) {
			size = v
		}
	}
	// The cfs period only shapes the cpu quota, not read here.
	if r := cm.PodResources(pod, 100000, 0); r.Memory != nil {
		lower(*r.Memory)
	}
	if sizeLimit != nil {
		lower(sizeLimit.Value())
	}
	return size
}

// ensureTmpfs makes dir a tmpfs of at most size bytes (0: the kernel's
// default) unless it is one already (after an agent restart). It reports
// whether it mounted one.
func (m *Manager) ensureTmpfs(dir string, size int64) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	mounted, err := m.cfg.Mounter.IsMountPoint(dir)
	if err != nil {
		return false, err
	}
	if mounted {
		return false, nil
	}
	if err := m.cfg.Mounter.MountTmpfs(dir, size); err != nil {
		return false, fmt.Errorf("mounting tmpfs at %s: %w", dir, err)
	}
	return true, nil
}

// TearDown unmounts the pod's tmpfs volumes, removes its volume
// directories and forgets its tokens. The pod's containers must be gone.
func (m *Manager) TearDown(uid types.UID) error {
	if !plainName(string(uid)) {
		return fmt.Errorf("volume: pod UID %q is not a plain name", uid)
	}
	root := filepath.Join(m.PodDir(uid), "volumes")
	var errs []error
	for _, kind := range []string{kindEmptyDir, kindSecret, kindProjected} {
		kd := filepath.Join(root, kind)
		entries, err := os.ReadDir(kd)
		if err != nil {
			continue
		}
		for _, e := range entries {
			dir := filepath.Join(kd, e.Name())
			if mounted, err := m.cfg.Mounter.IsMountPoint(dir); err == nil && mounted {
				if err := m.cfg.Mounter.Unmount(dir); err != nil {
					errs = append(errs, fmt.Errorf("unmounting %s: %w", dir, err))
				}
			}
		}
	}
	if len(errs) == 0 {
		// Never remove through a mount that is still there.
		errs = append(errs, os.RemoveAll(root))
	}
	m.mu.Lock()
	prefix := root + string(filepath.Separator)
	for dir := range m.written {
		if strings.HasPrefix(dir, prefix) {
			delete(m.written, dir)
		}
	}
	m.mu.Unlock()
	if f, ok := m.cfg.Tokens.(TokenForgetter); ok {
		f.Forget(uid)
	}
	return errors.Join(errs...)
}

func plainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

func hashPayload(p map[string]File) uint64 {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := fnv.New64a()
	var mode [4]byte
	for _, k := range keys {
		f := p[k]
		h.Write([]byte(k))
		h.Write([]byte{0})
		mode[0], mode[1], mode[2], mode[3] = byte(f.Mode), byte(f.Mode>>8), byte(f.Mode>>16), byte(f.Mode>>24)
		h.Write(mode[:])
		if f.Owner != nil {
			o := *f.Owner
			h.Write([]byte{1, byte(o), byte(o >> 8), byte(o >> 16), byte(o >> 24)})
		}
		n := len(f.Data)
		h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)})
		h.Write(f.Data)
	}
	return h.Sum64() | 1 // never 0, the map's "nothing written"
}
