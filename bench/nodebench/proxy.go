package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// frame is one gRPC message passed through undecoded.
type frame struct{ b []byte }

// rawCodec passes messages through as bytes; it is named "proto" so the
// content type both ends see is unchanged.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return f.b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// counter counts calls by full method name.
type counter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *counter) add(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

func (c *counter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// runProxy serves a counting CRI proxy on listen, forwarding every call to
// upstream unchanged, and the counts as JSON over HTTP on countsSocket. A
// proxy counts what any agent calls, the kubelet's or nodekit's, the same
// way, for one extra local hop per call that both pay alike.
//
// With trace set, each call's method, start and duration (Unix ns) are
// written there, a line each, to see where an agent's time goes.
func runProxy(ctx context.Context, listen, upstream, countsSocket, trace string) error {
	var tw *traceWriter
	if trace != "" {
		f, err := os.Create(trace)
		if err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
		defer f.Close()
		tw = &traceWriter{w: bufio.NewWriter(f)}
		defer tw.flush()
	}
	conn, err := grpc.NewClient("unix://"+upstream,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return fmt.Errorf("proxy: upstream %s: %w", upstream, err)
	}
	defer conn.Close()
	c := &counter{n: map[string]int64{}}
	handler := func(_ any, ss grpc.ServerStream) error {
		method, ok := grpc.MethodFromServerStream(ss)
		if !ok {
			return errors.New("proxy: no method")
		}
		c.add(method)
		if tw != nil {
			start := time.Now()
			defer func() { tw.write(method, start, time.Since(start)) }()
		}
		sctx := ss.Context()
		md, _ := metadata.FromIncomingContext(sctx)
		cctx, cancel := context.WithCancel(metadata.NewOutgoingContext(sctx, md))
		defer cancel()
		cs, err := conn.NewStream(cctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
		if err != nil {
			return err
		}
		// client to upstream
		sendErr := make(chan error, 1)
		go func() {
			for {
				f := &frame{}
				if err := ss.RecvMsg(f); err != nil {
					if errors.Is(err, io.EOF) {
						sendErr <- cs.CloseSend()
					} else {
						sendErr <- err
					}
					return
				}
				if err := cs.SendMsg(f); err != nil {
					sendErr <- err
					return
				}
			}
		}()
		// upstream to client
		hdrSent := false
		for {
			f := &frame{}
			if err := cs.RecvMsg(f); err != nil {
				if !hdrSent {
					if h, herr := cs.Header(); herr == nil {
						_ = ss.SendHeader(h)
					}
				}
				ss.SetTrailer(cs.Trailer())
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if !hdrSent {
				if h, herr := cs.Header(); herr == nil {
					_ = ss.SendHeader(h)
				}
				hdrSent = true
			}
			if err := ss.SendMsg(f); err != nil {
				return err
			}
		}
	}
	_ = os.Remove(listen)
	l, err := net.Listen("unix", listen)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(handler), grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20))
	_ = os.Remove(countsSocket)
	hl, err := net.Listen("unix", countsSocket)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c.snapshot())
	})}
	errs := make(chan error, 2)
	go func() { errs <- srv.Serve(l) }()
	go func() { errs <- hs.Serve(hl) }()
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	srv.Stop()
	_ = hs.Close()
	return err
}

type traceWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (t *traceWriter) write(method string, start time.Time, d time.Duration) {
	t.mu.Lock()
	fmt.Fprintf(t.w, "%s %d %d\n", method, start.UnixNano(), d.Nanoseconds())
	t.mu.Unlock()
}

func (t *traceWriter) flush() {
	t.mu.Lock()
	_ = t.w.Flush()
	t.mu.Unlock()
}

// criCounts reads a proxy's counts from its HTTP socket.
func criCounts(ctx context.Context, countsSocket string) (map[string]int64, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", countsSocket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://proxy/counts", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("CRI counts: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]int64{}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
