package volume_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
	"github.com/nodekit/nodekit/volume"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeMounter records tmpfs mounts instead of mounting.
type fakeMounter struct {
	mu      sync.Mutex
	mounted map[string]int64
	err     error
	// rootMode, if set, is what a mount makes dir's mode (a tmpfs's root
	// is 1777).
	rootMode fs.FileMode
}

func (f *fakeMounter) MountTmpfs(dir string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.rootMode != 0 {
		if err := os.Chmod(dir, f.rootMode); err != nil {
			return err
		}
	}
	f.mounted[dir] = size
	return nil
}

func (f *fakeMounter) Unmount(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mounted, dir)
	return nil
}

func (f *fakeMounter) IsMountPoint(dir string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.mounted[dir]
	return ok, nil
}

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(_ runtime.Object, typ, reason, msg string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, typ+" "+reason+" "+fmt.Sprintf(msg, args...))
}

type env struct {
	api     *objectstest.API
	tokens  *objects.Tokens
	m       *volume.Manager
	mounter *fakeMounter
	rec     *recorder
	root    string // PodsRoot's parent: nothing may appear here but PodsRoot
	pods    string
}

func newEnv(t *testing.T) *env {
	api := objectstest.New()
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"},
		Data: map[string]string{"app.conf": "a=1", "other": "x"}, BinaryData: map[string][]byte{"bin": {0, 1, 2}}})
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "CA"}})
	api.Set(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sec"}, Data: map[string][]byte{"password": []byte("hunter2")}})
	api.Set(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default"}})
	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets, TTL: 1}) // no caching: see every change
	tokens := objects.NewTokens(objects.TokensConfig{ServiceAccounts: api.ServiceAccounts})
	root := t.TempDir()
	pods := filepath.Join(root, "pods")
	fm := &fakeMounter{mounted: map[string]int64{}}
	rec := &recorder{}
	m, err := volume.New(volume.Config{PodsRoot: pods, Objects: cache, Tokens: tokens, Mounter: fm, Recorder: rec,
		NodeAllocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourceCPU: resource.MustParse("2")}
		}})
	require.NoError(t, err)
	return &env{api: api, tokens: tokens, m: m, mounter: fm, rec: rec, root: root, pods: pods}
}

func podWith(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-web", Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec: v1.PodSpec{Volumes: vols, Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
}

// files reads what a container would see at the volume's directory:
// every regular file reached through the user-visible names.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		top, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			rel, _ := filepath.Rel(top, p)
			info, err := os.Stat(p)
			require.NoError(t, err)
			out[filepath.Join(e.Name(), rel)] = fmt.Sprintf("%s %#o", b, info.Mode().Perm())
			return nil
		})
	}
	return out
}

func (e *env) dir(t *testing.T, pod *v1.Pod, i int) string {
	d, err := e.m.HostPath(pod, &pod.Spec.Volumes[i])
	require.NoError(t, err)
	return d
}

func TestVolumeTypes(t *testing.T) {
	cmVol := func(items []v1.KeyToPath, mode *int32, optional bool, name string) v1.Volume {
		return v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: name}, Items: items, DefaultMode: mode, Optional: ptr.To(optional)}}}
	}
	for _, tc := range []struct {
		name    string
		vol     v1.Volume
		want    map[string]string
		wantErr string
	}{
		{name: "configMap: every key, default mode 0644", vol: cmVol(nil, nil, false, "cfg"),
			want: map[string]string{"app.conf": "a=1 0644", "other": "x 0644", "bin": "\x00\x01\x02 0644"}},
		{name: "configMap: items with paths and modes, defaultMode", vol: cmVol([]v1.KeyToPath{{Key: "app.conf", Path: "etc/app.conf", Mode: ptr.To[int32](0o600)}, {Key: "other", Path: "o"}}, ptr.To[int32](0o440), false, "cfg"),
			want: map[string]string{"etc/app.conf": "a=1 0600", "o": "x 0440"}},
		{name: "configMap: missing optional is an empty volume", vol: cmVol(nil, nil, true, "nope"), want: map[string]string{}},
		{name: "configMap: missing item key of an optional configMap is skipped", vol: cmVol([]v1.KeyToPath{{Key: "nokey", Path: "n"}}, nil, true, "cfg"), want: map[string]string{}},
		{name: "configMap: missing is the kubelet's error", vol: cmVol(nil, nil, false, "nope"), wantErr: `MountVolume.SetUp failed for volume "v" : configmaps "nope" not found`},
		{name: "configMap: missing item key is an error", vol: cmVol([]v1.KeyToPath{{Key: "nokey", Path: "n"}}, nil, false, "cfg"), wantErr: "configmap references non-existent configmap key: nokey"},
		{name: "secret: keys with defaultMode", vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr.To[int32](0o400)}}},
			want: map[string]string{"password": "hunter2 0400"}},
		{name: "secret: missing is the kubelet's error", vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope"}}}, wantErr: `secrets "nope" not found`},
		{name: "downwardAPI: labels, name, a memory limit and a cpu limit from the node's allocatable", vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}, Mode: ptr.To[int32](0o400)},
			{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
			{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.cpu"}},
		}}}}, want: map[string]string{"labels": "app=\"web\"\ntier=\"front\" 0644", "name": "web 0400", "mem": "64 0644", "cpu": "2 0644"}},
		{name: "projected: the kube-api-access volume", vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o644),
			Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Items: []v1.KeyToPath{{Key: "password", Path: "creds/pw", Mode: ptr.To[int32](0o400)}}}},
			}}}}, want: map[string]string{"token": "token-1 0644", "ca.crt": "CA 0644", "namespace": "ns 0644", "creds/pw": "hunter2 0400"}},
		{name: "bad input: a key that is not a file name", vol: cmVol(nil, nil, false, "badkey"), wantErr: `configmap key "a/b" is not a valid file name`},
		{name: "bad input: a path escaping the volume", vol: cmVol([]v1.KeyToPath{{Key: "other", Path: "../../../escape"}}, nil, false, "cfg"), wantErr: "invalid path: must not contain '..'"},
		{name: "bad input: an absolute path", vol: cmVol([]v1.KeyToPath{{Key: "other", Path: "/etc/passwd"}}, nil, false, "cfg"), wantErr: "invalid path: must be relative path"},
		{name: "bad input: a path starting with ..", vol: cmVol([]v1.KeyToPath{{Key: "other", Path: "..data"}}, nil, false, "cfg"), wantErr: "invalid path: must not start with '..'"},
		{name: "bad input: mode out of range", vol: cmVol([]v1.KeyToPath{{Key: "other", Path: "o", Mode: ptr.To[int32](0o1777)}}, nil, false, "cfg"), wantErr: "must be a number between 0 and 0777"},
		{name: "bad input: defaultMode negative", vol: cmVol(nil, ptr.To[int32](-1), false, "cfg"), wantErr: "must be a number between 0 and 0777"},
		{name: "bad input: a secret over 1 MiB", vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "huge"}}}, wantErr: "more than the apiserver's limit of 1 MiB"},
		{name: "bad input: a refused token audience", vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "evil"}}}}}}, wantErr: `audience "evil" is not allowed`},
		{name: "unsupported projection is a clear error", vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "b"}}}}}}, wantErr: "unsupported volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "badkey"}, Data: map[string]string{"a/b": "x"}})
			e.api.Set(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "huge"}, Data: map[string][]byte{"big": make([]byte, 1<<20+1)}})
			e.api.CreateTokenFunc = func(ns, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
				if len(tr.Spec.Audiences) > 0 && tr.Spec.Audiences[0] == "evil" {
					return nil, apierrors.NewBadRequest(`audience "evil" is not allowed`)
				}
				require.Equal(t, "uid-web", string(tr.Spec.BoundObjectRef.UID), "bound to the pod")
				out := tr.DeepCopy()
				out.Status.Token = "token-1"
				out.Status.ExpirationTimestamp = metav1.Now()
				return out, nil
			}
			pod := podWith(tc.vol)
			err := e.m.SetUp(context.Background(), pod)
			if tc.wantErr != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.wantErr)
				require.Len(t, e.rec.events, 1)
				require.True(t, strings.HasPrefix(e.rec.events[0], "Warning FailedMount MountVolume.SetUp failed for volume \"v\""), e.rec.events[0])
				requireOnlyPodsRoot(t, e)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, files(t, e.dir(t, pod, 0)))
			require.True(t, volume.ReadOnly(&pod.Spec.Volumes[0]))
		})
	}
}

// requireOnlyPodsRoot checks that nothing was written next to PodsRoot.
func requireOnlyPodsRoot(t *testing.T, e *env) {
	t.Helper()
	entries, err := os.ReadDir(e.root)
	require.NoError(t, err)
	var names []string
	for _, d := range entries {
		names = append(names, d.Name())
	}
	if len(names) > 0 {
		require.Equal(t, []string{"pods"}, names)
	}
	_ = filepath.WalkDir(e.pods, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // nothing at all was written
		}
		require.NoError(t, err)
		if !d.IsDir() && d.Type()&fs.ModeSymlink == 0 {
			t.Errorf("file written for a failed volume: %s", p)
		}
		return nil
	})
}

func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	typ := func(t v1.HostPathType) *v1.HostPathType { return &t }
	for _, tc := range []struct {
		name    string
		path    string
		typ     *v1.HostPathType
		wantErr string
		check   func(t *testing.T)
	}{
		{name: "no type: no check", path: filepath.Join(dir, "missing")},
		{name: "DirectoryOrCreate creates", path: filepath.Join(dir, "new/sub"), typ: typ(v1.HostPathDirectoryOrCreate), check: func(t *testing.T) {
			info, err := os.Stat(filepath.Join(dir, "new/sub"))
			require.NoError(t, err)
			require.True(t, info.IsDir())
		}},
		{name: "DirectoryOrCreate on a file fails", path: file, typ: typ(v1.HostPathDirectoryOrCreate), wantErr: "hostPath type check failed: " + file + " is not a directory, it's a File"},
		{name: "Directory exists", path: dir, typ: typ(v1.HostPathDirectory)},
		{name: "Directory missing fails", path: filepath.Join(dir, "nope"), typ: typ(v1.HostPathDirectory), wantErr: "is not a directory, unable to determine its type"},
		{name: "FileOrCreate creates", path: filepath.Join(dir, "made"), typ: typ(v1.HostPathFileOrCreate), check: func(t *testing.T) {
			info, err := os.Stat(filepath.Join(dir, "made"))
			require.NoError(t, err)
			require.True(t, info.Mode().IsRegular())
		}},
		{name: "FileOrCreate does not create a missing parent directory", path: filepath.Join(dir, "nodir/file"), typ: typ(v1.HostPathFileOrCreate),
			wantErr: "open " + filepath.Join(dir, "nodir/file") + ": no such file or directory"},
		{name: "File on a directory fails", path: dir, typ: typ(v1.HostPathFile), wantErr: "is not a file, it's a Directory"},
		{name: "Socket on a file fails", path: file, typ: typ(v1.HostPathSocket), wantErr: "is not a socket file, it's a File"},
		{name: "CharDevice /dev/null", path: "/dev/null", typ: typ(v1.HostPathCharDev)},
		{name: "BlockDevice on /dev/null fails", path: "/dev/null", typ: typ(v1.HostPathBlockDev), wantErr: "is not a block device, it's a CharDevice"},
		{name: "an unknown type fails", path: dir, typ: typ("Weird"), wantErr: "Weird is an invalid volume type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := podWith(v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: tc.path, Type: tc.typ}}})
			err := e.m.SetUp(context.Background(), pod)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			hp, err := e.m.HostPath(pod, &pod.Spec.Volumes[0])
			require.NoError(t, err)
			require.Equal(t, tc.path, hp)
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
}

func TestEmptyDir(t *testing.T) {
	t.Run("disk: a world-writable directory that keeps its content across SetUps", func(t *testing.T) {
		e := newEnv(t)
		pod := podWith(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
		require.NoError(t, e.m.SetUp(context.Background(), pod))
		d := e.dir(t, pod, 0)
		require.Equal(t, filepath.Join(e.pods, "uid-web/volumes/kubernetes.io~empty-dir/scratch"), d)
		info, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o777), info.Mode().Perm())
		require.NoError(t, os.WriteFile(filepath.Join(d, "keep"), []byte("1"), 0o644))
		require.NoError(t, e.m.SetUp(context.Background(), pod))
		require.FileExists(t, filepath.Join(d, "keep"))
		require.False(t, volume.ReadOnly(&pod.Spec.Volumes[0]))
	})
	t.Run("Memory: a tmpfs of sizeLimit, mounted once, unmounted at TearDown", func(t *testing.T) {
		e := newEnv(t)
		pod := podWith(v1.Volume{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("64Mi"))}}})
		require.NoError(t, e.m.SetUp(context.Background(), pod))
		require.NoError(t, e.m.SetUp(context.Background(), pod))
		d := e.dir(t, pod, 0)
		require.Equal(t, map[string]int64{d: 64 << 20}, e.mounter.mounted)
		require.NoError(t, e.m.TearDown(pod.UID))
		require.Empty(t, e.mounter.mounted)
		require.NoDirExists(t, d)
	})
	t.Run("Memory where tmpfs cannot be mounted is a clear error", func(t *testing.T) {
		e := newEnv(t)
		e.mounter.err = errors.New("operation not permitted")
		pod := podWith(v1.Volume{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
		require.ErrorContains(t, e.m.SetUp(context.Background(), pod), "emptyDir medium Memory: mounting tmpfs at")
	})
	t.Run("hugepages medium is unsupported", func(t *testing.T) {
		e := newEnv(t)
		pod := podWith(v1.Volume{Name: "hp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}})
		require.ErrorIs(t, e.m.SetUp(context.Background(), pod), volume.ErrUnsupported)
	})
}

// TestMemoryBackedVolumeSize: a memory-backed volume's tmpfs is as large as
// the kubelet makes it: the node's allocatable memory, the pod's memory
// limit if lower, the emptyDir's sizeLimit if lower still.
func TestMemoryBackedVolumeSize(t *testing.T) {
	mi := func(n int64) *resource.Quantity { return resource.NewQuantity(n<<20, resource.BinarySI) }
	memEmptyDir := func(limit *resource.Quantity) v1.Volume {
		return v1.Volume{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: limit}}}
	}
	secret := v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}}
	noLimit := func(p *v1.Pod) { p.Spec.Containers[0].Resources = v1.ResourceRequirements{} }
	podLimit := func(n int64) func(p *v1.Pod) {
		return func(p *v1.Pod) {
			noLimit(p)
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: *mi(n)}}
		}
	}
	cases := []struct {
		name        string
		vol         v1.Volume
		pod         func(*v1.Pod)
		allocatable *resource.Quantity // nil: unknown
		want        int64
	}{
		{"an emptyDir without sizeLimit is the pod's memory limit", memEmptyDir(nil), nil, mi(1024), 64 << 20},
		{"a sizeLimit below the pod's limit is the size", memEmptyDir(mi(32)), nil, mi(1024), 32 << 20},
		{"a sizeLimit above the pod's limit is the pod's limit", memEmptyDir(mi(128)), nil, mi(1024), 64 << 20},
		{"a pod without a memory limit gets the node's allocatable memory", memEmptyDir(nil), noLimit, mi(1024), 1024 << 20},
		{"a pod-level memory limit is the pod's limit", memEmptyDir(nil), podLimit(48), mi(1024), 48 << 20},
		{"a pod's limit above allocatable is allocatable", memEmptyDir(nil), nil, mi(16), 16 << 20},
		{"a sizeLimit above allocatable is allocatable", memEmptyDir(mi(128)), noLimit, mi(16), 16 << 20},
		{"without limits or allocatable the kernel's default", memEmptyDir(nil), noLimit, nil, 0},
		{"without allocatable, the sizeLimit", memEmptyDir(mi(8)), noLimit, nil, 8 << 20},
		{"a secret's tmpfs is the pod's memory limit", secret, nil, mi(1024), 64 << 20},
		{"a secret's tmpfs without a pod limit is allocatable", secret, noLimit, mi(1024), 1024 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := objectstest.New()
			api.Set(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sec"}, Data: map[string][]byte{"k": []byte("v")}})
			fm := &fakeMounter{mounted: map[string]int64{}}
			cfg := volume.Config{PodsRoot: t.TempDir(), Mounter: fm,
				Objects: objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets, TTL: 1})}
			if tc.allocatable != nil {
				cfg.NodeAllocatable = func() v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: *tc.allocatable} }
			}
			m, err := volume.New(cfg)
			require.NoError(t, err)
			pod := podWith(tc.vol)
			if tc.pod != nil {
				tc.pod(pod)
			}
			require.NoError(t, m.SetUp(context.Background(), pod))
			dir, err := m.HostPath(pod, &pod.Spec.Volumes[0])
			require.NoError(t, err)
			require.Equal(t, map[string]int64{dir: tc.want}, fm.mounted)
			require.NoError(t, m.TearDown(pod.UID))
		})
	}
}

func TestRealTmpfs(t *testing.T) {
	dir := t.TempDir()
	m := volume.SystemMounter{}
	if err := m.MountTmpfs(dir, 1<<20); err != nil {
		t.Skipf("cannot mount tmpfs here (%v): the fake mounter covers the logic", err)
	}
	mounted, err := m.IsMountPoint(dir)
	require.NoError(t, err)
	require.True(t, mounted)
	require.NoError(t, m.Unmount(dir))
	mounted, err = m.IsMountPoint(dir)
	require.NoError(t, err)
	require.False(t, mounted)
}

func TestUnsupportedVolumeIsAClearError(t *testing.T) {
	e := newEnv(t)
	pod := podWith(v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}})
	err := e.m.SetUp(context.Background(), pod)
	require.ErrorIs(t, err, volume.ErrUnsupported)
	require.ErrorContains(t, err, `MountVolume.SetUp failed for volume "nfs"`)
}

func TestNoSourcesIsAClearError(t *testing.T) {
	m, err := volume.New(volume.Config{PodsRoot: t.TempDir()})
	require.NoError(t, err)
	pod := podWith(
		v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}}},
		v1.Volume{Name: "t", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
	)
	err = m.SetUp(context.Background(), pod)
	require.ErrorIs(t, err, volume.ErrNoSource)
	require.ErrorContains(t, err, `volume "c"`)
	require.ErrorContains(t, err, `volume "t"`)
	_, err = volume.New(volume.Config{})
	require.Error(t, err)
}

func TestOneFailingVolumeDoesNotStopTheOthers(t *testing.T) {
	e := newEnv(t)
	pod := podWith(
		v1.Volume{Name: "bad", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope"}}},
		v1.Volume{Name: "good", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
	)
	require.Error(t, e.m.SetUp(context.Background(), pod))
	require.Equal(t, map[string]string{"password": "hunter2 0644"}, files(t, e.dir(t, pod, 1)))
}

func TestContentFollowsTheSourceAndWaitsForIt(t *testing.T) {
	e := newEnv(t)
	pod := podWith(v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "late"}}}})
	require.ErrorContains(t, e.m.SetUp(context.Background(), pod), `configmaps "late" not found`)

	e.api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "late"}, Data: map[string]string{"a": "1", "b": "1"}})
	require.NoError(t, e.m.SetUp(context.Background(), pod), "set up once the object exists")
	d := e.dir(t, pod, 0)
	require.Equal(t, map[string]string{"a": "1 0644", "b": "1 0644"}, files(t, d))
	first, err := os.Readlink(filepath.Join(d, "..data"))
	require.NoError(t, err)

	require.NoError(t, e.m.SetUp(context.Background(), pod))
	same, _ := os.Readlink(filepath.Join(d, "..data"))
	require.Equal(t, first, same, "an unchanged payload is not rewritten")

	e.api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "late"}, Data: map[string]string{"a": "2", "c": "2"}})
	require.NoError(t, e.m.SetUp(context.Background(), pod))
	require.Equal(t, map[string]string{"a": "2 0644", "c": "2 0644"}, files(t, d), "b is gone, c is new")
	entries, err := os.ReadDir(d)
	require.NoError(t, err)
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	sort.Strings(names)
	require.Len(t, names, 4, "the new timestamped dir, ..data and two links: %v", names)
	require.NoDirExists(t, filepath.Join(d, first), "the old payload is removed")
}

func TestAgentRestartReusesVolumes(t *testing.T) {
	e := newEnv(t)
	pod := podWith(
		v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
	)
	require.NoError(t, e.m.SetUp(context.Background(), pod))
	d := e.dir(t, pod, 0)
	before, err := os.Readlink(filepath.Join(d, "..data"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(e.dir(t, pod, 1), "state"), []byte("kept"), 0o644))

	// A new manager over the same PodsRoot, as after an agent restart; the
	// tmpfs is still mounted.
	m2, err := volume.New(volume.Config{PodsRoot: e.pods, Objects: objects.New(objects.Config{ConfigMaps: e.api.ConfigMaps}), Mounter: e.mounter})
	require.NoError(t, err)
	require.NoError(t, m2.SetUp(context.Background(), pod))
	after, _ := os.Readlink(filepath.Join(d, "..data"))
	require.Equal(t, before, after, "the written payload is reused")
	b, err := os.ReadFile(filepath.Join(e.dir(t, pod, 1), "state"))
	require.NoError(t, err)
	require.Equal(t, "kept", string(b))
	require.Len(t, e.mounter.mounted, 1, "the tmpfs is not mounted twice")
}

func TestTearDownRemovesVolumesAndForgetsTokens(t *testing.T) {
	e := newEnv(t)
	pod := podWith(v1.Volume{Name: "t", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}})
	require.NoError(t, e.m.SetUp(context.Background(), pod))
	require.Equal(t, 1, e.tokens.Len())
	require.NoError(t, e.m.TearDown(pod.UID))
	require.NoDirExists(t, filepath.Join(e.pods, "uid-web/volumes"))
	require.Zero(t, e.tokens.Len())
	require.Error(t, e.m.TearDown("../x"), "a UID that is not a plain name touches nothing")
}

func TestTokenIsRewrittenWhenRefreshed(t *testing.T) {
	e := newEnv(t)
	pod := podWith(v1.Volume{Name: "t", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](600)}}}}}})
	n := 0
	e.api.CreateTokenFunc = func(ns, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		n++
		out := tr.DeepCopy()
		out.Status.Token = fmt.Sprintf("t%d", n)
		out.Status.ExpirationTimestamp = metav1.NewTime(metav1.Now().Add(-1)) // due at once
		return out, nil
	}
	require.NoError(t, e.m.SetUp(context.Background(), pod))
	require.Equal(t, map[string]string{"token": "t1 0644"}, files(t, e.dir(t, pod, 0)))
	require.NoError(t, e.m.SetUp(context.Background(), pod))
	require.Equal(t, map[string]string{"token": "t2 0644"}, files(t, e.dir(t, pod, 0)))
	assert.Equal(t, 2, n)
}

func TestSecretsLiveOnTmpfs(t *testing.T) {
	pod := podWith(
		v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		v1.Volume{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
	)
	t.Run("secret and projected volumes are tmpfs, configMaps are not, and TearDown unmounts them", func(t *testing.T) {
		e := newEnv(t)
		require.NoError(t, e.m.SetUp(context.Background(), pod))
		require.NoError(t, e.m.SetUp(context.Background(), pod))
		// of the pod's memory limit (see TestMemoryBackedVolumeSize)
		require.Equal(t, map[string]int64{e.dir(t, pod, 0): 64 << 20, e.dir(t, pod, 1): 64 << 20}, e.mounter.mounted, "mounted once each")
		require.Equal(t, map[string]string{"password": "hunter2 0644"}, files(t, e.dir(t, pod, 0)))
		require.NoError(t, e.m.TearDown(pod.UID))
		require.Empty(t, e.mounter.mounted)
	})
	t.Run("a node that cannot mount gets a clear error", func(t *testing.T) {
		e := newEnv(t)
		e.mounter.err = errors.New("operation not permitted")
		err := e.m.SetUp(context.Background(), pod)
		require.ErrorContains(t, err, `volume "sec"`)
		require.ErrorContains(t, err, "SecretsOnDisk")
		require.NotContains(t, err.Error(), `volume "cfg"`)
	})
	t.Run("SecretsOnDisk writes them to disk", func(t *testing.T) {
		e := newEnv(t)
		fm := &fakeMounter{mounted: map[string]int64{}, err: errors.New("must not mount")}
		m, err := volume.New(volume.Config{PodsRoot: e.pods, Objects: objects.New(objects.Config{ConfigMaps: e.api.ConfigMaps, Secrets: e.api.Secrets}),
			Tokens: e.tokens, Mounter: fm, SecretsOnDisk: true})
		require.NoError(t, err)
		require.NoError(t, m.SetUp(context.Background(), pod))
		require.Equal(t, map[string]string{"password": "hunter2 0644"}, files(t, e.dir(t, pod, 0)))
	})
}

func TestRealTmpfsSecretVolume(t *testing.T) {
	probe := t.TempDir()
	if err := (volume.SystemMounter{}).MountTmpfs(probe, 1<<20); err != nil {
		t.Skipf("cannot mount tmpfs here (%v): the fake mounter covers the logic", err)
	}
	require.NoError(t, volume.SystemMounter{}.Unmount(probe))
	e := newEnv(t)
	m, err := volume.New(volume.Config{PodsRoot: e.pods, Objects: objects.New(objects.Config{Secrets: e.api.Secrets})})
	require.NoError(t, err)
	pod := podWith(v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}})
	require.NoError(t, m.SetUp(context.Background(), pod))
	dir := e.dir(t, pod, 0)
	mounted, err := volume.SystemMounter{}.IsMountPoint(dir)
	require.NoError(t, err)
	require.True(t, mounted)
	require.Equal(t, map[string]string{"password": "hunter2 0644"}, files(t, dir))
	require.NoError(t, m.TearDown(pod.UID), "unmounted, then removed")
	require.NoDirExists(t, dir)
}

func TestFSGroupOwnsTheFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	e := newEnv(t)
	pod := podWith(v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr.To[int32](0o400)}}})
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](4321)}
	require.NoError(t, e.m.SetUp(context.Background(), pod))
	d := e.dir(t, pod, 0)
	require.Equal(t, map[string]string{"password": "hunter2 0440"}, files(t, d), "the group may read, as with the kubelet")
	info, err := os.Stat(filepath.Join(d, "password"))
	require.NoError(t, err)
	require.EqualValues(t, 4321, info.Sys().(*syscall.Stat_t).Gid)
	data, err := os.Stat(filepath.Join(d, "..data"))
	require.NoError(t, err)
	require.NotZero(t, data.Mode()&fs.ModeSetgid, "directories are setgid")
	require.NoError(t, e.m.SetUp(context.Background(), pod))
}

func TestTokenFileBelongsToThePodsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	tokenVol := v1.Volume{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644),
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}}
	for _, tc := range []struct {
		name      string
		podUser   *int64
		container *int64
		fsGroup   *int64
		mode      string
		uid, gid  uint32
	}{
		{name: "no user, no fsGroup: defaultMode, root's", mode: "0644"},
		{name: "the pod's user: 0600, theirs", podUser: ptr.To[int64](1000), mode: "0600", uid: 1000},
		{name: "containers with different users: defaultMode", podUser: ptr.To[int64](1000), container: ptr.To[int64](1001), mode: "0644"},
		{name: "user and fsGroup: 0640", podUser: ptr.To[int64](1000), fsGroup: ptr.To[int64](2000), mode: "0640", uid: 1000, gid: 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := podWith(tokenVol)
			pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: tc.podUser, FSGroup: tc.fsGroup}
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "side"})
			if tc.container != nil {
				pod.Spec.Containers[1].SecurityContext = &v1.SecurityContext{RunAsUser: tc.container}
			}
			require.NoError(t, e.m.SetUp(context.Background(), pod))
			p := filepath.Join(e.dir(t, pod, 0), "token")
			info, err := os.Stat(p)
			require.NoError(t, err)
			require.Equal(t, tc.mode, fmt.Sprintf("%#o", info.Mode().Perm()))
			st := info.Sys().(*syscall.Stat_t)
			require.Equal(t, tc.uid, st.Uid)
			require.Equal(t, tc.gid, st.Gid)
			require.NoError(t, e.m.TearDown(pod.UID))
		})
	}
}
