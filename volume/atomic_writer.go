package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one file of a volume's payload.
type File struct {
	Data []byte
	Mode int32
	// Owner, if set, is the uid the file belongs to (a token for the one
	// user all the pod's containers run as).
	Owner *int64
}

const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	maxPathLength  = 4096
	maxFileNameLen = 255
)

// validatePath is the kubelet atomic writer's check of a payload path:
// relative, no ".." element, no name starting with "..", bounded lengths.
func validatePath(p string) error {
	if p == "" {
		return fmt.Errorf("invalid path: must not be empty: %q", p)
	}
	if filepath.IsAbs(p) {
		return fmt.Errorf("invalid path: must be relative path: %s", p)
	}
	if len(p) > maxPathLength {
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLength)
	}
	items := strings.Split(p, "/")
	for _, it := range items {
		if it == ".." {
			return fmt.Errorf("invalid path: must not contain '..': %s", p)
		}
		if len(it) > maxFileNameLen {
			return fmt.Errorf("invalid path: filenames must be less than or equal to %d characters", maxFileNameLen)
		}
	}
	if strings.HasPrefix(items[0], "..") && len(items[0]) > 2 {
		return fmt.Errorf("invalid path: must not start with '..': %s", p)
	}
	return nil
}

// writeAtomic writes payload into dir in the kubelet's atomic-writer
// layout, so a reader sees the old or the new payload, never a mix:
//
//	dir/..2026_01_02_03_04_05.123456789/<files>   the payload
//	dir/..data -> ..2026_01_02_03_04_05.123456789  swapped by rename(2)
//	dir/<top-level name> -> ..data/<top-level name>
//
// A payload equal to what dir holds is not written again. With gid >= 0
// (the pod's fsGroup) the payload's files and directories belong to that
// group and directories are setgid, as the kubelet's SetVolumeOwnership
// leaves them. It reports whether it wrote.
func writeAtomic(dir string, payload map[string]File, now time.Time, gid int) (bool, error) {
	clean := make(map[string]File, len(payload))
	for p, f := range payload {
		if err := validatePath(p); err != nil {
			return false, err
		}
		clean[filepath.Clean(p)] = f
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	oldTs, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if oldTs != "" && samePayload(filepath.Join(dir, oldTs), clean) {
		return false, nil
	}

	tsDir, err := os.MkdirTemp(dir, now.UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	if err := writePayload(tsDir, clean, gid); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	tmpLink := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	// User-visible names: one symlink per top-level element into ..data.
	top := map[string]bool{}
	for p := range clean {
		top[strings.SplitN(p, "/", 2)[0]] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDirName, name), link); err != nil {
			return true, err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return true, err
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "..") || top[n] {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 { // only our own links; never a user's file
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
	if oldTs != "" && oldTs != filepath.Base(tsDir) && strings.HasPrefix(oldTs, "..") && !strings.Contains(oldTs, "/") {
		if err := os.RemoveAll(filepath.Join(dir, oldTs)); err != nil {
			return true, err
		}
	}
	return true, nil
}

func writePayload(tsDir string, payload map[string]File, gid int) error {
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return err
	}
	paths := make([]string, 0, len(payload))
	for p := range payload {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := payload[p]
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.Data, 0o600); err != nil {
			return err
		}
		if err := os.Chmod(full, fs.FileMode(f.Mode)&fs.ModePerm); err != nil {
			return err
		}
		if f.Owner != nil {
			if err := os.Lchown(full, int(*f.Owner), -1); err != nil {
				return err
			}
		}
	}
	if gid < 0 {
		return nil
	}
	return filepath.WalkDir(tsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, gid); err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755|fs.ModeSetgid)
		}
		return nil
	})
}

// samePayload reports whether tsDir holds exactly payload, modes included.
func samePayload(tsDir string, payload map[string]File) bool {
	n := 0
	err := filepath.WalkDir(tsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(tsDir, path)
		f, ok := payload[rel]
		if !ok {
			return fs.ErrNotExist
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm() != fs.FileMode(f.Mode)&fs.ModePerm {
			return fs.ErrInvalid
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(b, f.Data) {
			return fs.ErrInvalid
		}
		n++
		return nil
	})
	return err == nil && n == len(payload)
}
