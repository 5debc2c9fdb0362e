package agent

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

// fakeCRIChildEnv makes the test binary a fakecri server (see
// startFakeCRIChild) instead of running tests.
const fakeCRIChildEnv = "NODEKIT_AGENT_FAKECRI_CHILD"

// serveFakeCRI is the child's side: it serves fakecri with benchImage
// present, writes the endpoint as its first line, answers each "calls" line
// on stdin with the server's total call count and exits when stdin closes.
func serveFakeCRI() int {
	srv, err := fakecri.NewServer(fakecri.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Close()
	srv.Images.SetFakeImages([]string{benchImage})
	fmt.Println(srv.Endpoint())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "calls" {
			fmt.Println(srv.TotalCalls())
		}
	}
	return 0
}

// fakeCRIChild is fakecri in a child process, so that a benchmark's
// allocations are the agent's alone, as with a real runtime.
type fakeCRIChild struct {
	endpoint string
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Scanner
}

func startFakeCRIChild(tb testing.TB) *fakeCRIChild {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeCRIChildEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &fakeCRIChild{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !c.out.Scan() {
		c.close()
		tb.Fatalf("fakecri child gave no endpoint: %v", c.out.Err())
	}
	c.endpoint = strings.TrimSpace(c.out.Text())
	return c
}

// calls is the child server's total call count, or -1 if it did not answer.
func (c *fakeCRIChild) calls() int {
	if _, err := io.WriteString(c.in, "calls\n"); err != nil || !c.out.Scan() {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(c.out.Text()))
	if err != nil {
		return -1
	}
	return n
}

func (c *fakeCRIChild) close() {
	c.in.Close()
	_ = c.cmd.Wait()
}
