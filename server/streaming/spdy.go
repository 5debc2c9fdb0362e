package streaming

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/nodekit/nodekit/runtime"
)

// The remotecommand stream types, a SPDY stream's streamType header.
const (
	StreamTypeHeader = "streamType"
	StreamTypeStdin  = "stdin"
	StreamTypeStdout = "stdout"
	StreamTypeStderr = "stderr"
	StreamTypeError  = "error"
	StreamTypeResize = "resize"
)

// SPDYProtocols are the remotecommand protocols served over SPDY, the
// newest first. v5 over SPDY is v4: a SPDY stream half-closes by itself,
// so stdin's close needs no signal of its own.
var SPDYProtocols = []string{
	remotecommand.StreamProtocolV5Name,
	remotecommand.StreamProtocolV4Name,
	remotecommand.StreamProtocolV3Name,
	remotecommand.StreamProtocolV2Name,
	remotecommand.StreamProtocolV1Name,
}

// errNotWaiting rejects a stream the session no longer waits for.
var errNotWaiting = errors.New("the server is not waiting for streams")

type streamAndReply struct {
	httpstream.Stream
	replySent <-chan struct{}
}

// spdySession negotiates the protocol, upgrades the connection and waits
// for the client's streams (one per stream asked for, the error stream,
// and the resize stream with tty from v3 on) for CreationTimeout; nil if
// any step failed (the client was answered or the connection closed).
func (s *Server) spdySession(w http.ResponseWriter, r *http.Request, opts Options) *session {
	protocol, err := httpstream.Handshake(r, w, SPDYProtocols)
	if err != nil {
		s.cfg.Log.V(2).Info("Refused a remotecommand upgrade", "err", err)
		return nil // Handshake answered the client
	}
	streams := make(chan streamAndReply)
	stop := make(chan struct{})
	conn := spdy.NewResponseUpgrader().UpgradeResponse(originalWriter(w), r, func(st httpstream.Stream, replySent <-chan struct{}) error {
		select {
		case streams <- streamAndReply{Stream: st, replySent: replySent}:
			return nil
		case <-stop:
			return errNotWaiting
		}
	})
	if conn == nil {
		close(stop)
		return nil // the upgrader answered the client
	}
	conn.SetIdleTimeout(s.cfg.IdleTimeout)

	resizes := protocol != remotecommand.StreamProtocolV1Name && protocol != remotecommand.StreamProtocolV2Name
	expected := 1 // the error stream
	for _, on := range []bool{opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY && resizes} {
		if on {
			expected++
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	sess := &session{ctx: ctx, cancel: cancel, conn: conn, tty: opts.TTY}
	got, err := s.waitForStreams(sess, streams, expected, resizes)
	close(stop)
	if err != nil {
		s.cfg.Log.Error(err, "Remotecommand streams were not created", "protocol", protocol)
		sess.close()
		return nil
	}
	if protocol == remotecommand.StreamProtocolV1Name {
		// As the kubelet's v1: the error stream is reset (so no status
		// reaches the client) and stdin half-closed once all streams are in.
		if got.err != nil {
			_ = got.err.Reset()
		}
		if sess.stdin != nil {
			_ = sess.stdin.Close()
		}
	}
	switch protocol {
	case remotecommand.StreamProtocolV4Name, remotecommand.StreamProtocolV5Name:
		sess.writeStatus = jsonStatus(got.err)
	default:
		sess.writeStatus = textStatus(got.err)
	}
	// A hijacked connection's request context does not end when the
	// client goes away; the connection's close does.
	sess.wg.Go(func() {
		select {
		case <-conn.CloseChan():
			cancel()
		case <-ctx.Done():
		}
	})
	if got.resize != nil {
		if opts.TTY {
			sess.resize = make(chan runtime.TermSize)
		}
		sess.readResize(got.resize, func() {})
	}
	return sess
}

type spdyStreams struct {
	err    httpstream.Stream
	resize httpstream.Stream
}

// waitForStreams takes the client's streams until expected of them had
// their reply sent, or CreationTimeout passed. A stream of an unknown type
// is logged and not counted, as the kubelet does.
func (s *Server) waitForStreams(sess *session, streams <-chan streamAndReply, expected int, resizes bool) (spdyStreams, error) {
	var got spdyStreams
	timer := s.cfg.Clock.NewTimer(s.cfg.CreationTimeout)
	defer timer.Stop()
	replied := make(chan struct{})
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(done)
		wg.Wait()
	}()
	for received := 0; received < expected; {
		select {
		case st := <-streams:
			switch typ := st.Headers().Get(StreamTypeHeader); typ {
			case StreamTypeError:
				got.err = st
			case StreamTypeStdin:
				sess.stdin = st
			case StreamTypeStdout:
				sess.stdout = st
			case StreamTypeStderr:
				sess.stderr = st
			case StreamTypeResize:
				if !resizes {
					s.cfg.Log.V(2).Info("Unexpected stream type", "streamType", typ)
					continue
				}
				got.resize = st
			default:
				s.cfg.Log.V(2).Info("Unexpected stream type", "streamType", typ)
				continue
			}
			wg.Go(func() {
				select {
				case <-st.replySent:
					select {
					case replied <- struct{}{}:
					case <-done:
					}
				case <-done:
				}
			})
		case <-replied:
			received++
		case <-timer.C():
			return spdyStreams{}, errors.New("timed out waiting for client to create streams")
		}
	}
	if got.err == nil {
		return spdyStreams{}, fmt.Errorf("the client created no %s stream", StreamTypeError)
	}
	return got, nil
}
