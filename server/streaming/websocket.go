package streaming

import (
	"context"
	"io"
	"net/http"

	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/nodekit/nodekit/runtime"
)

// The remotecommand WebSocket channels, the first byte of every message.
const (
	stdinChannel = iota
	stdoutChannel
	stderrChannel
	errorChannel
	resizeChannel
)

// The WebSocket subprotocols (Sec-WebSocket-Protocol) served; no protocol
// at all is channel.k8s.io.
const (
	V4BinaryWebSocketProtocol = "v4." + wsstream.ChannelWebSocketProtocol
	V4Base64WebSocketProtocol = "v4." + wsstream.Base64ChannelWebSocketProtocol
	V5WebSocketProtocol       = remotecommand.StreamProtocolV5Name
)

func readChannel(on bool) wsstream.ChannelType {
	if on {
		return wsstream.ReadChannel
	}
	return wsstream.IgnoreChannel
}

func writeChannel(on bool) wsstream.ChannelType {
	if on {
		return wsstream.WriteChannel
	}
	return wsstream.IgnoreChannel
}

// webSocketSession upgrades r to a WebSocket with the five remotecommand
// channels (the error and resize ones always open); nil if the upgrade
// failed, which the websocket server answered. As the kubelet's, an empty
// message on the first writable channel tells the client the session is
// up. The resize channel ends only with the connection (or the client's
// CLOSE of it), which ends the session's context.
func (s *Server) webSocketSession(w http.ResponseWriter, r *http.Request, opts Options) *session {
	channels := []wsstream.ChannelType{
		stdinChannel:  readChannel(opts.Stdin),
		stdoutChannel: writeChannel(opts.Stdout),
		stderrChannel: writeChannel(opts.Stderr),
		errorChannel:  wsstream.WriteChannel,
		resizeChannel: wsstream.ReadChannel,
	}
	binary := wsstream.ChannelProtocolConfig{Binary: true, Channels: channels}
	base64 := wsstream.ChannelProtocolConfig{Binary: false, Channels: channels}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		"":                                      binary,
		wsstream.ChannelWebSocketProtocol:       binary,
		wsstream.Base64ChannelWebSocketProtocol: base64,
		V4BinaryWebSocketProtocol:               binary,
		V4Base64WebSocketProtocol:               base64,
		V5WebSocketProtocol:                     binary,
	})
	conn.SetIdleTimeout(s.cfg.IdleTimeout)
	protocol, streams, err := conn.Open(originalWriter(w), r)
	if err != nil {
		s.cfg.Log.V(2).Info("Refused a remotecommand websocket upgrade", "err", err)
		return nil
	}
	switch {
	case opts.Stdout:
		_, _ = streams[stdoutChannel].Write(nil)
	case opts.Stderr:
		_, _ = streams[stderrChannel].Write(nil)
	default:
		_, _ = streams[errorChannel].Write(nil)
	}
	ctx, cancel := context.WithCancel(r.Context())
	sess := &session{ctx: ctx, cancel: cancel, conn: conn, tty: opts.TTY}
	if opts.Stdin {
		sess.stdin = streams[stdinChannel]
	}
	if opts.Stdout {
		sess.stdout = streams[stdoutChannel]
	}
	if opts.Stderr {
		sess.stderr = streams[stderrChannel]
	}
	switch protocol {
	case V4BinaryWebSocketProtocol, V4Base64WebSocketProtocol, V5WebSocketProtocol:
		sess.writeStatus = jsonStatus(streams[errorChannel])
	default:
		sess.writeStatus = textStatus(streams[errorChannel])
	}
	if opts.TTY {
		sess.resize = make(chan runtime.TermSize)
	}
	sess.readResize(streams[resizeChannel], cancel)
	return sess
}

var _ io.Closer = (*wsstream.Conn)(nil)
