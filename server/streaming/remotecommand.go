package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// The query parameters of an exec or attach request, as the apiserver sends
// them to the kubelet: "1" turns a stream on; command repeats for each
// argument.
const (
	StdinParam   = "input"
	StdoutParam  = "output"
	StderrParam  = "error"
	TTYParam     = "tty"
	CommandParam = "command"
)

// DefaultIdleTimeout is the kubelet's default streamingConnectionIdleTimeout.
const DefaultIdleTimeout = 4 * time.Hour

// ErrNoStreams is NewOptions' error for a request that asks for none of
// stdin, stdout and stderr.
var ErrNoStreams = errors.New("you must specify at least 1 of stdin, stdout, stderr")

// Config configures a Server.
type Config struct {
	// IdleTimeout closes a connection that carried nothing for this long.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// CreationTimeout is how long a SPDY client has to create the streams
	// of a session after the upgrade (and a port-forward request its data
	// and error streams). Default remotecommand.DefaultStreamCreationTimeout
	// (30s).
	CreationTimeout time.Duration
	// Clock times CreationTimeout. Default the real clock.
	Clock clock.Clock
	// Log receives protocol errors and failed sessions. Default
	// logr.Discard().
	Log logr.Logger
}

// Server serves exec, attach and port-forward sessions; it holds no state
// between requests and is safe for concurrent use.
type Server struct {
	cfg Config
}

// New returns a Server; zero or negative durations take their defaults.
func New(c Config) *Server {
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.CreationTimeout <= 0 {
		c.CreationTimeout = remotecommand.DefaultStreamCreationTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return &Server{cfg: c}
}

// Options are the streams an exec or attach client asked for.
type Options struct {
	Stdin, Stdout, Stderr, TTY bool
}

// NewOptions reads the streams from r's query as the kubelet does: with
// tty, stderr is dropped (merged into stdout); none of the three is
// ErrNoStreams, which the kubelet answers with 400.
func NewOptions(r *http.Request) (Options, error) {
	q := r.URL.Query()
	o := Options{
		Stdin:  q.Get(StdinParam) == "1",
		Stdout: q.Get(StdoutParam) == "1",
		Stderr: q.Get(StderrParam) == "1",
		TTY:    q.Get(TTYParam) == "1",
	}
	if o.TTY {
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return Options{}, ErrNoStreams
	}
	return o, nil
}

// Session runs an exec or attach on the client's streams until it ends or
// ctx does (the client went away, the connection idled out). For exec, a
// non-zero exit is an error with an ExitStatus() int method, as
// k8s.io/utils/exec's ExitError, and reaches the client as its exit code.
type Session func(ctx context.Context, streams runtime.AttachIO) error

// ServeExec upgrades r (SPDY or WebSocket, whichever it asks for), runs
// exec on its streams and reports how it ended on the error stream: success,
// the exit code (NonZeroExitCode) or an internal error. A failed upgrade
// has already been answered to the client.
func (s *Server) ServeExec(w http.ResponseWriter, r *http.Request, opts Options, exec Session) {
	s.serve(w, r, opts, exec, true)
}

// ServeAttach is ServeExec for an attach: any error is an internal error.
func (s *Server) ServeAttach(w http.ResponseWriter, r *http.Request, opts Options, attach Session) {
	s.serve(w, r, opts, attach, false)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, opts Options, run Session, exec bool) {
	var sess *session
	if wsstream.IsWebSocketRequest(r) {
		sess = s.webSocketSession(w, r, opts)
	} else {
		sess = s.spdySession(w, r, opts)
	}
	if sess == nil {
		return
	}
	defer sess.close()
	err := run(sess.ctx, sess.attachIO())
	st := s.status(err, exec)
	if werr := sess.writeStatus(st); werr != nil && sess.ctx.Err() == nil {
		s.cfg.Log.V(4).Info("Writing the session's status failed", "err", werr)
	}
}

// status is the metav1.Status a session's end is reported with, as the
// kubelet's: only exec turns an exit code into NonZeroExitCode.
func (s *Server) status(err error, exec bool) *metav1.Status {
	if err == nil {
		return &metav1.Status{Status: metav1.StatusSuccess}
	}
	var exit interface{ ExitStatus() int }
	if exec && errors.As(err, &exit) {
		if e, ok := exit.(interface{ Exited() bool }); !ok || e.Exited() {
			return &metav1.Status{
				Status:  metav1.StatusFailure,
				Reason:  remotecommand.NonZeroExitCodeReason,
				Message: fmt.Sprintf("command terminated with non-zero exit code: %v", err),
				Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
					Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(exit.ExitStatus()),
				}}},
			}
		}
	}
	what := "error attaching to container"
	if exec {
		what = "error executing command in container"
	}
	err = fmt.Errorf("%s: %v", what, err)
	s.cfg.Log.Error(err, "Streaming session failed")
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Reason:  metav1.StatusReasonInternalError,
		Code:    http.StatusInternalServerError,
		Message: fmt.Sprintf("Internal error occurred: %v", err),
	}
}

// session is an upgraded exec or attach connection with its streams.
type session struct {
	ctx    context.Context
	cancel context.CancelFunc
	conn   io.Closer
	stdin  io.ReadCloser
	stdout io.WriteCloser
	stderr io.WriteCloser
	tty    bool
	resize chan runtime.TermSize // nil without tty
	// writeStatus reports the end on the error stream in the protocol's
	// format.
	writeStatus func(*metav1.Status) error
	wg          sync.WaitGroup
}

func (s *session) attachIO() runtime.AttachIO {
	io := runtime.AttachIO{TTY: s.tty}
	if s.stdin != nil {
		io.Stdin = s.stdin
	}
	if s.stdout != nil {
		io.Stdout = s.stdout
	}
	if s.stderr != nil {
		io.Stderr = s.stderr
	}
	if s.resize != nil {
		io.Resize = s.resize
	}
	return io
}

// close ends the session: its context, the connection (with every stream),
// then waits for the goroutines reading it.
func (s *session) close() {
	s.cancel()
	_ = s.conn.Close()
	s.wg.Wait()
}

// readResize decodes the client's terminal sizes (JSON, one after
// another) into s.resize, if a TTY session has one, until the stream ends;
// a stream it cannot decode is drained, so the connection is never stalled
// by unread data. done runs when the stream has ended.
func (s *session) readResize(stream io.Reader, done func()) {
	s.wg.Go(func() {
		defer done()
		if s.resize != nil {
			defer close(s.resize)
		}
		dec := json.NewDecoder(stream)
		for {
			var size runtime.TermSize
			if err := dec.Decode(&size); err != nil {
				if !errors.Is(err, io.EOF) {
					_, _ = io.Copy(io.Discard, stream)
				}
				return
			}
			if s.resize == nil {
				continue
			}
			select {
			case s.resize <- size:
			case <-s.ctx.Done():
				_, _ = io.Copy(io.Discard, stream)
				return
			}
		}
	})
}

// textStatus writes a failure's message as text, as protocols before v4
// do; success writes nothing.
func textStatus(w io.Writer) func(*metav1.Status) error {
	return func(st *metav1.Status) error {
		if st.Status == metav1.StatusSuccess {
			return nil
		}
		_, err := w.Write([]byte(st.Message))
		return err
	}
}

// jsonStatus writes the status as JSON, as v4 and v5 do.
func jsonStatus(w io.Writer) func(*metav1.Status) error {
	return func(st *metav1.Status) error {
		data, err := json.Marshal(st)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
}

// originalWriter unwraps response writer decorators (Unwrap), as the
// websocket server needs the connection's own writer to hijack it.
func originalWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		inner := u.Unwrap()
		if inner == nil || inner == w {
			return w
		}
		w = inner
	}
}
