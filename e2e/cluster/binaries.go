package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoBinaries is wrapped by FindBinaries when the servers are neither
// cached nor buildable.
var ErrNoBinaries = errors.New("cluster: etcd and kube-apiserver binaries unavailable")

// Binaries are the server executables a cluster runs.
type Binaries struct {
	Etcd      string
	APIServer string
}

// FindBinaries returns the cached servers, building them first with script
// (hack/servers.sh) when they are missing. The build's progress goes to log.
// $NODEKIT_E2E_ETCD and $NODEKIT_E2E_APISERVER, when both are set, name
// binaries to use instead.
func FindBinaries(ctx context.Context, script string, log io.Writer) (Binaries, error) {
	if e, a := os.Getenv("NODEKIT_E2E_ETCD"), os.Getenv("NODEKIT_E2E_APISERVER"); e != "" && a != "" {
		b := Binaries{Etcd: e, APIServer: a}
		return b, b.check()
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "build")
	cmd.Stdout = &out
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		return Binaries{}, fmt.Errorf("%w: %s build: %v", ErrNoBinaries, script, err)
	}
	dir := strings.TrimSpace(out.String())
	b := Binaries{Etcd: filepath.Join(dir, "etcd"), APIServer: filepath.Join(dir, "kube-apiserver")}
	return b, b.check()
}

func (b Binaries) check() error {
	for _, p := range []string{b.Etcd, b.APIServer} {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNoBinaries, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%w: %s is not an executable", ErrNoBinaries, p)
		}
	}
	return nil
}
