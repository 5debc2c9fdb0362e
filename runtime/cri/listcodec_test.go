package cri

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func listedCtr(id string, state runtimeapi.ContainerState, annotations ...string) *runtimeapi.Container {
	c := &runtimeapi.Container{
		Id: id, PodSandboxId: "sb-" + id, State: state, CreatedAt: 42,
		Metadata: &runtimeapi.ContainerMetadata{Name: "c-" + id, Attempt: 1},
		Image:    &runtimeapi.ImageSpec{Image: "registry.local/app:1"}, ImageRef: "sha256:0123",
		Labels:      map[string]string{LabelPodUID: "uid-" + id, LabelContainerName: "c-" + id, LabelPodName: "p", LabelPodNamespace: "ns"},
		Annotations: map[string]string{"io.kubernetes.container.hash": "123", "io.kubernetes.container.restartCount": "1"},
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		c.Annotations[annotations[i]] = annotations[i+1]
	}
	return c
}

func listedSandbox(id string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Id: id, State: state, CreatedAt: 7,
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "uid-" + id},
		Labels:      map[string]string{LabelPodUID: "uid-" + id, LabelPodName: "p", LabelPodNamespace: "ns"},
		Annotations: map[string]string{"a": "b", "c": "d"},
	}
}

// wire encodes m as a runtime sends it (maps in Go's random order).
func wire(t *testing.T, m proto.Message) mem.BufferSlice {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return mem.BufferSlice{mem.SliceBuffer(b)}
}

// TestListCodecDecodesListingsAsProtobuf runs a sequence of container
// listings through one codec: every result must equal protobuf's decoding,
// and entries that did not change must be the messages decoded before.
func TestListCodecDecodesListingsAsProtobuf(t *testing.T) {
	running, created, exited := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_CREATED, runtimeapi.ContainerState_CONTAINER_EXITED
	steps := []struct {
		name   string
		list   []*runtimeapi.Container
		reused []string // IDs whose message is the previous listing's
	}{
		{"a first listing decodes every entry", []*runtimeapi.Container{listedCtr("a", running), listedCtr("b", created)}, nil},
		{"an unchanged listing reuses every entry", []*runtimeapi.Container{listedCtr("a", running), listedCtr("b", created)}, []string{"a", "b"}},
		{"a changed state and a new container are decoded", []*runtimeapi.Container{listedCtr("a", running), listedCtr("b", running), listedCtr("c", created)}, []string{"a"}},
		{"a removed container leaves the others reused", []*runtimeapi.Container{listedCtr("b", running), listedCtr("c", created)}, []string{"b", "c"}},
		{"the same ID and state with other content is decoded", []*runtimeapi.Container{listedCtr("b", running), listedCtr("c", created, "new", "annotation")}, []string{"b"}},
		{"a listing in another order reuses every entry", []*runtimeapi.Container{listedCtr("c", created, "new", "annotation"), listedCtr("b", running)}, []string{"b", "c"}},
		{"an ID listed twice is decoded twice", []*runtimeapi.Container{listedCtr("b", running), listedCtr("b", running), listedCtr("c", exited)}, []string{"b"}},
		{"an empty listing", nil, nil},
		{"a container listed again after a gap is decoded", []*runtimeapi.Container{listedCtr("b", running)}, nil},
	}
	c := newListCodec()
	prev := map[string]*runtimeapi.Container{}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			msg := &runtimeapi.ListContainersResponse{Containers: step.list}
			got := &runtimeapi.ListContainersResponse{}
			require.NoError(t, c.Unmarshal(wire(t, msg), got))
			want := &runtimeapi.ListContainersResponse{}
			require.NoError(t, proto.Unmarshal(wire(t, msg).Materialize(), want))
			assert.True(t, proto.Equal(want, got), "got %v, want %v", got, want)

			reused := map[string]bool{}
			for _, id := range step.reused {
				reused[id] = true
			}
			seen := map[string]bool{}
			for _, g := range got.Containers {
				if seen[g.Id] {
					continue // a duplicate is decoded afresh
				}
				seen[g.Id] = true
				assert.Equal(t, reused[g.Id], prev[g.Id] == g, "container %s reused", g.Id)
			}
			prev = map[string]*runtimeapi.Container{}
			for _, g := range got.Containers {
				if prev[g.Id] == nil {
					prev[g.Id] = g
				}
			}
			assert.Len(t, c.containers, len(seen), "the memo holds the listed containers only")
		})
	}
}

func TestListCodecDecodesSandboxListings(t *testing.T) {
	ready, notReady := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	c := newListCodec()
	decode := func(list ...*runtimeapi.PodSandbox) *runtimeapi.ListPodSandboxResponse {
		msg := &runtimeapi.ListPodSandboxResponse{Items: list}
		got := &runtimeapi.ListPodSandboxResponse{}
		require.NoError(t, c.Unmarshal(wire(t, msg), got))
		assert.True(t, proto.Equal(msg, got), "got %v, want %v", got, msg)
		return got
	}
	first := decode(listedSandbox("s1", ready), listedSandbox("s2", ready))
	second := decode(listedSandbox("s1", ready), listedSandbox("s2", notReady))
	assert.Same(t, first.Items[0], second.Items[0], "an unchanged sandbox is reused")
	assert.NotSame(t, first.Items[1], second.Items[1], "a stopped sandbox is decoded")
	decode(listedSandbox("s2", notReady))
	assert.Len(t, c.sandboxes, 1)
}

// TestListCodecFallsBackToProtobuf: what the codec does not expect is
// protobuf's to decode, with protobuf's result or error.
func TestListCodecFallsBackToProtobuf(t *testing.T) {
	listing, err := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{listedCtr("a", runtimeapi.ContainerState_CONTAINER_RUNNING)}})
	require.NoError(t, err)
	withField := protowire.AppendString(protowire.AppendTag(append([]byte(nil), listing...), 2, protowire.BytesType), "a field of a later API")
	entryWithField := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
		protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 5))
	cases := []struct {
		name string
		b    []byte
	}{
		{"an unknown field of the response", withField},
		{"an unknown field of an entry", entryWithField},
		{"a truncated listing", listing[:len(listing)-3]},
		{"a listing that is not protobuf", []byte{0xff, 0xff, 0xff}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newListCodec()
			got := &runtimeapi.ListContainersResponse{}
			gotErr := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.b)}, got)
			want := &runtimeapi.ListContainersResponse{}
			wantErr := proto.Unmarshal(tc.b, want)
			if wantErr != nil {
				assert.Error(t, gotErr)
				return
			}
			require.NoError(t, gotErr)
			assert.True(t, proto.Equal(want, got), "got %v, want %v", got, want)
		})
	}
	t.Run("other messages", func(t *testing.T) {
		msg := &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake"}
		got := &runtimeapi.VersionResponse{}
		require.NoError(t, newListCodec().Unmarshal(wire(t, msg), got))
		assert.True(t, proto.Equal(msg, got))
	})
}

// TestListCodecIsSafeForConcurrentListings runs under -race.
func TestListCodecIsSafeForConcurrentListings(t *testing.T) {
	c := newListCodec()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for i := 0; i < 50; i++ {
				var list []*runtimeapi.Container
				for j := 0; j < 5; j++ {
					list = append(list, listedCtr(fmt.Sprint(j), runtimeapi.ContainerState((i+j+g)%3)))
				}
				msg := &runtimeapi.ListContainersResponse{Containers: list}
				got := &runtimeapi.ListContainersResponse{}
				if assert.NoError(t, c.Unmarshal(wire(t, msg), got)) {
					assert.True(t, proto.Equal(msg, got))
				}
			}
		})
	}
	wg.Wait()
}
