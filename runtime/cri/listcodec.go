package cri

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// listCodec is the gRPC codec of the full listings (ListContainers and
// ListPodSandbox without a filter). It decodes a listing against the last
// one: an entry with an ID listed before, in the same state and encoded in
// as many bytes, is the message decoded then, which the runtime could only
// have sent again (a container's or sandbox's other fields do not change
// once it exists). A relist every second of a node's thousands of entries,
// their labels and annotations maps decoded by reflection, is the CRI
// manager's largest steady cost otherwise. Every other message, and a
// listing with anything this codec does not expect, is protobuf's.
//
// The messages it returns are shared between listings: readers only.
type listCodec struct {
	proto encoding.CodecV2
	opts  []grpc.CallOption

	mu         sync.Mutex
	gen        uint64
	containers map[string]*listedEntry[runtimeapi.Container]
	sandboxes  map[string]*listedEntry[runtimeapi.PodSandbox]
}

// listedEntry is a decoded entry of a listing; listing is the generation of
// the last listing that had it.
type listedEntry[T any] struct {
	msg     *T
	size    int
	state   int32
	listing uint64
}

// Field numbers in the runtime/v1 API (k8s.io/cri-api api.proto).
const (
	listField           = 1 // ListContainersResponse.containers, ListPodSandboxResponse.items
	containerIDField    = 1
	containerStateField = 6
	sandboxIDField      = 1
	sandboxStateField   = 3
)

func newListCodec() *listCodec {
	c := &listCodec{
		proto:      encoding.GetCodecV2(grpcproto.Name),
		containers: map[string]*listedEntry[runtimeapi.Container]{},
		sandboxes:  map[string]*listedEntry[runtimeapi.PodSandbox]{},
	}
	c.opts = []grpc.CallOption{grpc.ForceCodecV2(c)}
	return c
}

// callOptions make a call use the codec; built once, as a relist makes
// such calls every second.
func (c *listCodec) callOptions() []grpc.CallOption { return c.opts }

// Name is protobuf's, so that the call's content type stays application/grpc.
func (c *listCodec) Name() string { return grpcproto.Name }

func (c *listCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c *listCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch out := v.(type) {
	case *runtimeapi.ListContainersResponse:
		return c.unmarshalListing(data, out, func(b []byte) bool {
			list, ok := decodeListing(b, c.containers, &c.gen, containerIDField, containerStateField)
			if ok {
				out.Reset()
				out.Containers = list
			}
			return ok
		})
	case *runtimeapi.ListPodSandboxResponse:
		return c.unmarshalListing(data, out, func(b []byte) bool {
			list, ok := decodeListing(b, c.sandboxes, &c.gen, sandboxIDField, sandboxStateField)
			if ok {
				out.Reset()
				out.Items = list
			}
			return ok
		})
	}
	return c.proto.Unmarshal(data, v)
}

// unmarshalListing decodes a listing into out with decode, under c.mu, or
// as protobuf does when decode reports it cannot.
func (c *listCodec) unmarshalListing(data mem.BufferSlice, out proto.Message, decode func([]byte) bool) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	c.mu.Lock()
	ok := decode(buf.ReadOnlyData())
	c.mu.Unlock()
	if !ok {
		return proto.Unmarshal(buf.ReadOnlyData(), out)
	}
	return nil
}

// decodeListing decodes a listing's entries (field 1, repeated), reusing the
// memo's for entries that did not change, and drops the memo's entries the
// listing no longer has. It reports false if b is not a listing it
// understands (another field, a malformed entry): the caller then decodes
// it as protobuf does. c.mu must be held.
func decodeListing[T any, PT interface {
	*T
	proto.Message
}](b []byte, memo map[string]*listedEntry[T], gen *uint64, idField, stateField protowire.Number) ([]PT, bool) {
	*gen++
	g := *gen
	var list []PT
	kept := 0 // memo entries this listing has
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != listField || typ != protowire.BytesType {
			return nil, false
		}
		b = b[n:]
		entry, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		id, state, ok := entryKey(entry, idField, stateField)
		if !ok {
			return nil, false
		}
		if e := memo[string(id)]; e != nil && e.size == len(entry) && e.state == state && e.listing != g {
			e.listing = g
			kept++
			list = append(list, PT(e.msg))
			continue
		}
		msg := PT(new(T))
		if err := proto.Unmarshal(entry, msg); err != nil {
			return nil, false
		}
		// An ID listed twice keeps the first entry in the memo; both are
		// in the list, as protobuf decodes them.
		if e := memo[string(id)]; e == nil || e.listing != g {
			memo[string(id)] = &listedEntry[T]{msg: (*T)(msg), size: len(entry), state: state, listing: g}
			kept++
		}
		list = append(list, msg)
	}
	if len(memo) > kept {
		for id, e := range memo {
			if e.listing != g {
				delete(memo, id)
			}
		}
	}
	return list, true
}

// entryKey scans an entry's top-level fields for its ID (a string) and
// state (an enum); ok is false if the entry is malformed.
func entryKey(b []byte, idField, stateField protowire.Number) (id []byte, state int32, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, false
		}
		b = b[n:]
		switch {
		case num == idField && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, 0, false
			}
			id, n = v, m
		case num == stateField && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return nil, 0, false
			}
			state, n = int32(v), m
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, 0, false
			}
		}
		b = b[n:]
	}
	return id, state, true
}
