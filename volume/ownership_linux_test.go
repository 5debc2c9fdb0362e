package volume_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/volume"
)

// owned describes a path as "<gid> <mode>", mode with setgid as "g+s".
func owned(t *testing.T, p string) string {
	t.Helper()
	info, err := os.Lstat(p)
	require.NoError(t, err)
	s := fmt.Sprintf("%d %#o", info.Sys().(*syscall.Stat_t).Gid, info.Mode().Perm())
	if info.Mode()&fs.ModeSetgid != 0 {
		s += " g+s"
	}
	if info.Mode()&fs.ModeSticky != 0 {
		s += " +t"
	}
	return s
}

func TestSetVolumeOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	// tree is a volume: a directory, a file and a symlink to a file outside.
	tree := func(t *testing.T, rootMode fs.FileMode, rootGid int) (dir, outside string) {
		base := t.TempDir()
		dir = filepath.Join(base, "vol")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o600))
		outside = filepath.Join(base, "outside")
		require.NoError(t, os.WriteFile(outside, []byte("y"), 0o600))
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link")))
		require.NoError(t, os.Chown(dir, -1, rootGid))
		require.NoError(t, os.Chmod(dir, rootMode))
		return dir, outside
	}
	always, onRoot := v1.FSGroupChangeAlways, v1.FSGroupChangeOnRootMismatch
	tests := []struct {
		name          string
		fsGroup       *int64
		policy        *v1.PodFSGroupChangePolicy
		readOnly      bool
		rootMode      fs.FileMode
		rootGid       int
		root, sub, f  string
		linkGid       string
		outsideIsMine bool
	}{
		{name: "no fsGroup changes nothing", rootMode: 0o755, root: "0 0755", sub: "0 0755", f: "0 0600", linkGid: "0"},
		{name: "every file the group's, group read-write, directories setgid", fsGroup: ptr.To[int64](4321), rootMode: 0o755,
			root: "4321 0775 g+s", sub: "4321 0775 g+s", f: "4321 0660", linkGid: "4321"},
		{name: "Always walks an owned root too", fsGroup: ptr.To[int64](4321), policy: &always, rootMode: 0o775 | fs.ModeSetgid, rootGid: 4321,
			root: "4321 0775 g+s", sub: "4321 0775 g+s", f: "4321 0660", linkGid: "4321"},
		{name: "read-only volumes get the group read only", fsGroup: ptr.To[int64](4321), readOnly: true, rootMode: 0o700,
			root: "4321 0750 g+s", sub: "4321 0755 g+s", f: "4321 0640", linkGid: "4321"},
		{name: "OnRootMismatch leaves a tree whose root matches", fsGroup: ptr.To[int64](4321), policy: &onRoot, rootMode: 0o770 | fs.ModeSetgid, rootGid: 4321,
			root: "4321 0770 g+s", sub: "0 0755", f: "0 0600", linkGid: "0"},
		{name: "OnRootMismatch walks a root of another group", fsGroup: ptr.To[int64](4321), policy: &onRoot, rootMode: 0o770 | fs.ModeSetgid, rootGid: 99,
			root: "4321 0770 g+s", sub: "4321 0775 g+s", f: "4321 0660", linkGid: "4321"},
		{name: "OnRootMismatch walks a root without setgid", fsGroup: ptr.To[int64](4321), policy: &onRoot, rootMode: 0o770, rootGid: 4321,
			root: "4321 0770 g+s", sub: "4321 0775 g+s", f: "4321 0660", linkGid: "4321"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, outside := tree(t, tt.rootMode, tt.rootGid)
			require.NoError(t, volume.SetVolumeOwnership(dir, tt.fsGroup, tt.policy, tt.readOnly))
			require.Equal(t, tt.root, owned(t, dir), "the volume's root")
			require.Equal(t, tt.sub, owned(t, filepath.Join(dir, "sub")))
			require.Equal(t, tt.f, owned(t, filepath.Join(dir, "sub", "f")))
			var link syscall.Stat_t
			require.NoError(t, syscall.Lstat(filepath.Join(dir, "link"), &link))
			require.Equal(t, tt.linkGid, fmt.Sprint(link.Gid), "the link itself")
			require.Equal(t, "0 0600", owned(t, outside), "a link's target outside the volume is left alone")
		})
	}
}

func TestEmptyDirBelongsToTheFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	tests := []struct {
		name    string
		medium  v1.StorageMedium
		fsGroup *int64
		want    string
	}{
		{name: "on disk, the fsGroup's, world-writable and setgid", fsGroup: ptr.To[int64](4321), want: "4321 0777 g+s"},
		{name: "on tmpfs, the fsGroup's and setgid, keeping the tmpfs root's sticky bit", medium: v1.StorageMediumMemory,
			fsGroup: ptr.To[int64](4321), want: "4321 0777 g+s +t"},
		{name: "on disk without an fsGroup, root's and not setgid", want: "0 0777"},
		{name: "on tmpfs without an fsGroup, the tmpfs root as mounted", medium: v1.StorageMediumMemory, want: "0 0777 +t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.mounter.rootMode = 0o777 | fs.ModeSticky // tmpfs's root
			pod := podWith(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: tt.medium}}})
			if tt.fsGroup != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tt.fsGroup}
			}
			require.NoError(t, e.m.SetUp(context.Background(), pod))
			dir := e.dir(t, pod, 0)
			require.Equal(t, tt.want, owned(t, dir))
			if tt.fsGroup != nil {
				// What the pod creates is the group's.
				require.NoError(t, os.WriteFile(filepath.Join(dir, "new"), []byte("x"), 0o644))
				require.Equal(t, "4321 0644", owned(t, filepath.Join(dir, "new")))
			}
			require.NoError(t, e.m.SetUp(context.Background(), pod), "a later sync")
			require.Equal(t, tt.want, owned(t, dir), "a later sync changes nothing")
			require.NoError(t, e.m.TearDown(pod.UID))
		})
	}
}
