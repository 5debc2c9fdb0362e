package streaming

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// Port forwarding's protocol, headers and stream types.
const (
	// PortForwardProtocolV1Name is the SPDY port-forward protocol.
	PortForwardProtocolV1Name = "portforward.k8s.io"
	// PortHeader names a SPDY stream's port; PortParam, repeated or
	// comma-separated, a WebSocket request's ports.
	PortHeader = "port"
	PortParam  = "port"
	// RequestIDHeader pairs a SPDY data stream with its error stream.
	RequestIDHeader = "requestID"

	StreamTypeData = "data"
)

// Forward copies stream to and from port of the pod until either side
// closes or ctx ends; an error reaches the client on the port's error
// stream. runtime.PortForwarder's PortForward, with its pod bound, fits.
type Forward func(ctx context.Context, port int32, stream io.ReadWriteCloser) error

// PortForwardPorts returns the ports a port-forward request names, as the
// kubelet reads them: a WebSocket request must name at least one in
// ?port= (each 1-65535; the kubelet answers an error with 400); a SPDY
// request names its ports per stream, so it gets none.
func PortForwardPorts(r *http.Request) ([]int32, error) {
	if !wsstream.IsWebSocketRequest(r) {
		return nil, nil
	}
	values := r.URL.Query()[PortParam]
	if len(values) == 0 {
		return nil, fmt.Errorf("query parameter %q is required", PortParam)
	}
	var ports []int32
	for _, v := range values {
		if v == "" {
			return nil, fmt.Errorf("query parameter %q cannot be empty", PortParam)
		}
		for p := range strings.SplitSeq(v, ",") {
			port, err := parsePort(p)
			if err != nil {
				return nil, err
			}
			ports = append(ports, port)
		}
	}
	return ports, nil
}

func parsePort(s string) (int32, error) {
	port, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("unable to parse %q as a port: %v", s, err)
	}
	if port < 1 {
		return 0, fmt.Errorf("port %q must be > 0", s)
	}
	return int32(port), nil
}

// ServePortForward upgrades r (SPDY, or WebSocket with ports from
// PortForwardPorts) and forwards every port the client asks for with fwd
// until the connection closes. pod and uid name the target in error
// messages, as the kubelet's "error forwarding port 80 to pod web, uid
// ...: ...".
func (s *Server) ServePortForward(w http.ResponseWriter, r *http.Request, pod, uid string, ports []int32, fwd Forward) {
	pf := &portForward{s: s, pod: pod, uid: uid, fwd: fwd}
	if wsstream.IsWebSocketRequest(r) {
		pf.serveWebSocket(w, r, ports)
		return
	}
	pf.serveSPDY(w, r)
}

type portForward struct {
	s        *Server
	pod, uid string
	fwd      Forward
}

// forward runs fwd on one port's data stream and writes its error, if
// any, on the error stream, as the kubelet's.
func (pf *portForward) forward(ctx context.Context, port int32, data io.ReadWriteCloser, errStream io.Writer) error {
	err := pf.fwd(ctx, port, data)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("error forwarding port %d to pod %s, uid %v: %v", port, pf.pod, pf.uid, err)
	pf.s.cfg.Log.V(2).Info("Port forward failed", "err", err)
	_, _ = io.WriteString(errStream, err.Error())
	return err
}

// streamPair is a SPDY request's data and error streams.
type streamPair struct {
	id                      string
	data, errst             httpstream.Stream
	dataReplied, errReplied <-chan struct{}
	complete                chan struct{}
}

// serveSPDY serves portforward.k8s.io: streams come in pairs (data and
// error) with one requestID and a port header; each complete pair is
// forwarded in a goroutine; a pair not complete after CreationTimeout gets
// "timed out waiting for streams" on what it has.
func (pf *portForward) serveSPDY(w http.ResponseWriter, r *http.Request) {
	if _, err := httpstream.Handshake(r, w, []string{PortForwardProtocolV1Name}); err != nil {
		pf.s.cfg.Log.V(2).Info("Refused a port-forward upgrade", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	streams := make(chan streamAndReply)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(originalWriter(w), r, func(st httpstream.Stream, replySent <-chan struct{}) error {
		if err := checkPortForwardStream(st.Headers()); err != nil {
			return err
		}
		select {
		case streams <- streamAndReply{Stream: st, replySent: replySent}:
			return nil
		case <-ctx.Done():
			return errNotWaiting
		}
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	conn.SetIdleTimeout(pf.s.cfg.IdleTimeout)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var mu sync.Mutex
	pairs := map[string]*streamPair{}
	remove := func(p *streamPair) {
		mu.Lock()
		defer mu.Unlock()
		var done []httpstream.Stream
		for _, st := range []httpstream.Stream{p.data, p.errst} {
			if st != nil {
				done = append(done, st)
			}
		}
		conn.RemoveStreams(done...)
		delete(pairs, p.id)
	}
	for {
		var st streamAndReply
		select {
		case <-conn.CloseChan():
			return
		case st = <-streams:
		}
		id := requestID(st)
		mu.Lock()
		p, ok := pairs[id]
		if !ok {
			p = &streamPair{id: id, complete: make(chan struct{})}
			pairs[id] = p
			timer := pf.s.cfg.Clock.NewTimer(pf.s.cfg.CreationTimeout)
			wg.Go(func() {
				defer timer.Stop()
				select {
				case <-timer.C():
					mu.Lock()
					errStream := p.errst
					mu.Unlock()
					if errStream != nil {
						_, _ = fmt.Fprintf(errStream, "(conn=%p, request=%s) timed out waiting for streams", conn, id)
					}
				case <-p.complete:
				case <-ctx.Done():
				}
				remove(p)
			})
		}
		var dup bool
		switch st.Headers().Get(StreamTypeHeader) {
		case StreamTypeError:
			dup = p.errst != nil
			if !dup {
				p.errst, p.errReplied = st.Stream, st.replySent
			}
		case StreamTypeData:
			dup = p.data != nil
			if !dup {
				p.data, p.dataReplied = st.Stream, st.replySent
			}
		}
		complete := !dup && p.data != nil && p.errst != nil
		if complete {
			close(p.complete)
		}
		errStream := p.errst
		mu.Unlock()
		if dup {
			msg := fmt.Sprintf("error processing stream for request %s: %s stream already assigned", id, st.Headers().Get(StreamTypeHeader))
			pf.s.cfg.Log.V(2).Info(msg)
			if errStream != nil {
				_, _ = io.WriteString(errStream, msg)
			}
			continue
		}
		if complete {
			wg.Go(func() {
				defer p.data.Close()
				defer p.errst.Close()
				// A reset before the stream's reply would fail the
				// client's creation of it rather than show the error.
				for _, replied := range []<-chan struct{}{p.dataReplied, p.errReplied} {
					select {
					case <-replied:
					case <-ctx.Done():
						return
					}
				}
				port, _ := parsePort(p.data.Headers().Get(PortHeader))
				if err := pf.forward(ctx, port, p.data, p.errst); err != nil {
					// As the kubelet's: a failed forward resets its streams
					// so that the client can start over with new ones.
					_ = p.data.Reset()
					_ = p.errst.Reset()
				}
			})
		}
	}
}

// checkPortForwardStream refuses a stream without a valid port header or
// stream type, as the kubelet's stream handler does.
func checkPortForwardStream(h http.Header) error {
	port := h.Get(PortHeader)
	if port == "" {
		return fmt.Errorf("%q header is required", PortHeader)
	}
	if _, err := parsePort(port); err != nil {
		return err
	}
	switch typ := h.Get(StreamTypeHeader); typ {
	case "":
		return fmt.Errorf("%q header is required", StreamTypeHeader)
	case StreamTypeError, StreamTypeData:
		return nil
	default:
		return fmt.Errorf("invalid stream type %q", typ)
	}
}

// requestID is the stream's requestID header; an old client without one
// gets the kubelet's best effort: the error stream's ID, and the data
// stream's ID less 2 (pairs are consecutive odd IDs).
func requestID(st httpstream.Stream) string {
	if id := st.Headers().Get(RequestIDHeader); id != "" {
		return id
	}
	if st.Headers().Get(StreamTypeHeader) == StreamTypeData {
		return strconv.Itoa(int(st.Identifier()) - 2)
	}
	return strconv.Itoa(int(st.Identifier()))
}

// serveWebSocket serves port forwarding over a WebSocket: channels 2n
// (data, read-write) and 2n+1 (error) for the n-th port, each starting with
// the port in two little-endian bytes; it returns when every port's
// forward has ended.
func (pf *portForward) serveWebSocket(w http.ResponseWriter, r *http.Request, ports []int32) {
	channels := make([]wsstream.ChannelType, 0, 2*len(ports))
	for range ports {
		channels = append(channels, wsstream.ReadWriteChannel, wsstream.WriteChannel)
	}
	binaryCfg := wsstream.ChannelProtocolConfig{Binary: true, Channels: channels}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		"":                        binaryCfg,
		V4BinaryWebSocketProtocol: binaryCfg,
		V4Base64WebSocketProtocol: {Binary: false, Channels: channels},
	})
	conn.SetIdleTimeout(pf.s.cfg.IdleTimeout)
	_, streams, err := conn.Open(originalWriter(w), r)
	if err != nil {
		pf.s.cfg.Log.V(2).Info("Refused a port-forward websocket upgrade", "err", err)
		return
	}
	defer conn.Close()
	var wg sync.WaitGroup
	for i, port := range ports {
		data, errStream := streams[2*i], streams[2*i+1]
		prefix := binary.LittleEndian.AppendUint16(nil, uint16(port))
		_, _ = data.Write(prefix)
		_, _ = errStream.Write(prefix)
		wg.Go(func() {
			defer data.Close()
			defer errStream.Close()
			_ = pf.forward(r.Context(), port, data, errStream)
		})
	}
	wg.Wait()
}
