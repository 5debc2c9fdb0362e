package volume

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestValidatePath(t *testing.T) {
	for p, ok := range map[string]bool{
		"a": true, "a/b/c": true, "..a": false, "a/../b": false, "..": false, "../x": false, "/abs": false, "": false,
		"a..b": true, "x/..y": true, string(make([]byte, 256)): false,
	} {
		require.Equal(t, ok, validatePath(p) == nil, "%q", p)
	}
}

// A reader that resolves ..data once and reads every file from there sees
// one payload or another, never a mix, while the writer swaps payloads.
func TestAtomicWriterReaderNeverSeesAMix(t *testing.T) {
	dir := t.TempDir()
	payload := func(i int) map[string]File {
		v := []byte(strconv.Itoa(i))
		return map[string]File{"a": {Data: v, Mode: 0o644}, "sub/b": {Data: v, Mode: 0o644}, "c": {Data: v, Mode: 0o600}}
	}
	_, err := writeAtomic(dir, payload(0), time.Now(), -1)
	require.NoError(t, err)

	var stop atomic.Bool
	var consistent, vanished atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				root, err := os.OpenRoot(filepath.Join(dir, dataDirName))
				if err != nil {
					vanished.Add(1)
					continue
				}
				var vals []string
				ok := true
				for _, f := range []string{"a", "sub/b", "c"} {
					b, err := root.ReadFile(f)
					if errors.Is(err, fs.ErrNotExist) {
						ok = false // the old payload was removed under us: retry, never a mix
						break
					}
					if err != nil {
						t.Errorf("read %s: %v", f, err)
						ok = false
						break
					}
					vals = append(vals, string(b))
				}
				root.Close()
				if !ok {
					vanished.Add(1)
					continue
				}
				if vals[0] != vals[1] || vals[1] != vals[2] {
					t.Errorf("mixed payload: %v", vals)
					return
				}
				consistent.Add(1)
			}
		}()
	}
	for i := 1; i <= 200; i++ {
		wrote, err := writeAtomic(dir, payload(i), time.Now(), -1)
		require.NoError(t, err)
		require.True(t, wrote)
	}
	stop.Store(true)
	wg.Wait()
	require.Positive(t, consistent.Load())
	b, err := os.ReadFile(filepath.Join(dir, "sub", "b"))
	require.NoError(t, err)
	require.Equal(t, "200", string(b), "the user-visible path serves the last payload")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 5, "one timestamped dir, ..data, a, sub, c")
}

func TestAtomicWriterRefusesBadPathsBeforeWriting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	_, err := writeAtomic(dir, map[string]File{"ok": {Data: []byte("x")}, "../../etc/evil": {Data: []byte("x")}}, time.Now(), -1)
	require.ErrorContains(t, err, "must not contain '..'")
	require.NoDirExists(t, dir, "nothing written")
}
