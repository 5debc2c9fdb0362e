package crilog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultPollInterval = 250 * time.Millisecond
)

// Options says how to follow a file; without Follow in the log options
// they are not used.
type Options struct {
	// Running reports whether the container still runs; following ends
	// once it does not and the file has nothing more. nil: follow until
	// ctx ends.
	Running func(ctx context.Context) bool
	// PollInterval is how often a followed file is checked for new lines.
	// Default 250ms.
	PollInterval time.Duration
	// Clock drives the polling and sinceSeconds. Default the real clock.
	Clock clock.Clock
}

// ErrBadLine is wrapped by the error of a line that is not in the CRI
// format; ReadLogs skips such lines.
var ErrBadLine = errors.New("crilog: line is not in the CRI log format")

// stdout and stderr, the stream field.
const (
	streamStdout = "stdout"
	streamStderr = "stderr"
)

// maxLine bounds one line read from the file: runtimes split longer output
// into partial lines of 16 KiB, so a longer one is not the CRI's.
const maxLine = 1 << 20

// Line is one parsed line of a CRI log file.
type Line struct {
	Time    time.Time
	Stream  string // "stdout" or "stderr"
	Partial bool   // tag P: the message continues on the next line
	Message []byte // without the newline
}

// ParseLine parses one line (without its newline).
func ParseLine(b []byte) (Line, error) {
	var l Line
	ts, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok {
		return l, fmt.Errorf("%w: no timestamp", ErrBadLine)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return l, fmt.Errorf("%w: timestamp: %v", ErrBadLine, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != streamStdout && string(stream) != streamStderr) {
		return l, fmt.Errorf("%w: stream %q", ErrBadLine, stream)
	}
	tag, msg, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		// an empty message may come without the separator
		tag, msg = rest, nil
	}
	// tags are ':'-separated; the first is P(artial) or F(ull)
	first, _, _ := bytes.Cut(tag, []byte{':'})
	switch string(first) {
	case "P":
		l.Partial = true
	case "F":
	default:
		return l, fmt.Errorf("%w: tag %q", ErrBadLine, tag)
	}
	l.Time, l.Stream, l.Message = t, string(stream), msg
	return l, nil
}

// ReadLogs writes the log file at path to stdout and stderr as opts asks,
// each message (with its timestamp if opts.Timestamps) to the writer of
// its stream. A missing file is an error; lines not in the CRI format are
// skipped. It returns nil at the end of the file, or with opts.Follow once
// the container stopped (o.Running) and the file is drained; ctx's error
// if ctx ends first.
//
// A followed file that is rotated (renamed, and the runtime writes a new
// one at path, as runtime/cri's log rotation does) is read to its end and
// following goes on in the new file from its start, as the kubelet's
// ReadLogs. As the kubelet's, tailLines counts lines of the file at path
// only, not of the rotated files.
func ReadLogs(ctx context.Context, path string, opts *v1.PodLogOptions, o Options, stdout, stderr io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("crilog: open log file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("crilog: %w", err)
	}
	rf := &rotatingFile{path: path, cur: f, curInfo: fi}
	defer rf.close()
	return read(ctx, rf, fi.Size(), opts, o, rf, stdout, stderr)
}

// rotatingFile reads the file open at path and notices when path names
// another file.
type rotatingFile struct {
	path         string
	cur, next    *os.File
	curInfo, nfi os.FileInfo
}

func (f *rotatingFile) ReadAt(p []byte, off int64) (int, error) { return f.cur.ReadAt(p, off) }

// rotated reports whether path now names a new file, and opens it.
// Between the rename and the runtime's reopen there is no file at path:
// not rotated yet.
func (f *rotatingFile) rotated() bool {
	if f.next != nil {
		return true
	}
	fi, err := os.Stat(f.path)
	if err != nil || os.SameFile(fi, f.curInfo) {
		return false
	}
	nf, err := os.Open(f.path)
	if err != nil {
		return false
	}
	if f.nfi, err = nf.Stat(); err != nil {
		nf.Close()
		return false
	}
	f.next = nf
	return true
}

// advance moves to the file rotated found.
func (f *rotatingFile) advance() {
	f.cur.Close()
	f.cur, f.curInfo, f.next, f.nfi = f.next, f.nfi, nil, nil
}

func (f *rotatingFile) close() {
	f.cur.Close()
	if f.next != nil {
		f.next.Close()
	}
}

// rotator is a followed source that a log rotation may replace.
type rotator interface {
	// rotated reports that the source was replaced: once the old one is
	// read to its end, advance moves to the new one.
	rotated() bool
	advance()
}

// Read is ReadLogs on any log in the CRI format: src holds size bytes now
// and, when followed, grows by appends (a runtime that keeps logs in
// memory serves them this way).
func Read(ctx context.Context, src io.ReaderAt, size int64, opts *v1.PodLogOptions, o Options, stdout, stderr io.Writer) error {
	return read(ctx, src, size, opts, o, nil, stdout, stderr)
}

func read(ctx context.Context, src io.ReaderAt, size int64, opts *v1.PodLogOptions, o Options, rot rotator, stdout, stderr io.Writer) error {
	if opts == nil {
		opts = &v1.PodLogOptions{}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	start := int64(0)
	if opts.TailLines != nil {
		var err error
		if start, err = tailOffset(src, size, *opts.TailLines); err != nil {
			return fmt.Errorf("crilog: %w", err)
		}
	}
	w := &writer{stdout: stdout, stderr: stderr, timestamps: opts.Timestamps, remaining: -1}
	if opts.LimitBytes != nil {
		w.remaining = *opts.LimitBytes
	}
	switch {
	case opts.SinceTime != nil:
		w.since = opts.SinceTime.Time
	case opts.SinceSeconds != nil:
		w.since = o.Clock.Now().Add(-time.Duration(*opts.SinceSeconds) * time.Second)
	}

	r := bufio.NewReaderSize(&offsetReader{src: src, off: start}, 32<<10)
	var pending []byte // a line read up to EOF without its newline yet
	switching := false // rot was rotated; advance at the next EOF
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk, err := r.ReadSlice('\n')
		switch {
		case err == nil:
			line := chunk[:len(chunk)-1]
			if len(pending) > 0 {
				pending = append(pending, line...)
				line = pending
			}
			done, werr := w.line(line)
			pending = pending[:0]
			if werr != nil || done {
				return werr
			}
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			if len(pending)+len(chunk) > maxLine {
				return fmt.Errorf("crilog: line longer than %d bytes", maxLine)
			}
			pending = append(pending, chunk...)
			continue
		case err != io.EOF:
			return fmt.Errorf("crilog: %w", err)
		}
		// EOF: keep an unterminated line for when its rest arrives
		pending = append(pending, chunk...)
		if !opts.Follow {
			return nil
		}
		if rot != nil {
			if switching {
				// the old file is read to its end: go on in the new one
				rot.advance()
				r.Reset(&offsetReader{src: src})
				pending, switching = pending[:0], false
				continue
			}
			if rot.rotated() {
				// once more to the end of the old file: the runtime may
				// have written to it until it reopened
				switching = true
				continue
			}
		}
		if o.Running != nil && !o.Running(ctx) {
			// Running says false too when ctx ended while it asked: the
			// follow was cancelled, not ended by the container's exit.
			if err := ctx.Err(); err != nil {
				return err
			}
			// one more pass: lines written just before the exit
			if err := drain(r, w, pending); err != nil {
				return err
			}
			return ctx.Err()
		}
		t := o.Clock.NewTimer(o.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// drain writes the complete lines left in r after pending.
func drain(r *bufio.Reader, w *writer, pending []byte) error {
	rest, err := io.ReadAll(io.LimitReader(r, maxLine))
	if err != nil {
		return fmt.Errorf("crilog: %w", err)
	}
	data := append(pending, rest...)
	for {
		line, more, ok := bytes.Cut(data, []byte{'\n'})
		if !ok {
			return nil
		}
		if done, err := w.line(line); err != nil || done {
			return err
		}
		data = more
	}
}

// writer applies the output options to parsed lines.
type writer struct {
	stdout, stderr io.Writer
	timestamps     bool
	since          time.Time
	remaining      int64 // bytes left under limitBytes; -1: no limit
	partial        bool  // the last message written was partial
}

// line writes one raw line; done reports that limitBytes is reached.
func (w *writer) line(raw []byte) (done bool, err error) {
	l, perr := ParseLine(raw)
	if perr != nil {
		return false, nil
	}
	if !w.since.IsZero() && l.Time.Before(w.since) {
		return false, nil
	}
	out := w.stdout
	if l.Stream == streamStderr {
		out = w.stderr
	}
	var buf []byte
	if w.timestamps && !w.partial {
		// as the kubelet: the timestamp once per whole line
		buf = append(buf, l.Time.Format(time.RFC3339Nano)...)
		buf = append(buf, ' ')
	}
	buf = append(buf, l.Message...)
	if !l.Partial {
		buf = append(buf, '\n')
	}
	w.partial = l.Partial
	if w.remaining >= 0 && int64(len(buf)) >= w.remaining {
		buf, done = buf[:w.remaining], true
	}
	if len(buf) > 0 {
		if _, err := out.Write(buf); err != nil {
			return true, err
		}
	}
	if w.remaining >= 0 {
		w.remaining -= int64(len(buf))
	}
	return done, nil
}

// tailOffset returns the offset of the start of the last n lines of the
// size bytes of src, reading it backwards in blocks: memory stays bounded
// however big it is. A partial (P) line counts as a line, as in the
// kubelet, which counts newlines only.
func tailOffset(src io.ReaderAt, size, n int64) (int64, error) {
	if n <= 0 {
		return size, nil
	}
	const block = 8 << 10
	buf := make([]byte, block)
	end := size
	// a final newline ends the last line rather than starting another
	var found int64
	if size > 0 {
		last := buf[:1]
		if _, err := src.ReadAt(last, size-1); err != nil && err != io.EOF {
			return 0, err
		}
		if last[0] == '\n' {
			found = -1
		}
	}
	for end > 0 {
		off := max(0, end-block)
		b := buf[:end-off]
		if _, err := src.ReadAt(b, off); err != nil && err != io.EOF {
			return 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			found++
			if found == n {
				return off + int64(i) + 1, nil
			}
		}
		end = off
	}
	return 0, nil
}

// offsetReader reads src sequentially from off; at the end of what src
// holds it returns io.EOF, and more once src has grown.
type offsetReader struct {
	src io.ReaderAt
	off int64
}

func (r *offsetReader) Read(p []byte) (int, error) {
	n, err := r.src.ReadAt(p, r.off)
	r.off += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}
