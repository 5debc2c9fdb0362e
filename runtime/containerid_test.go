package runtime

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseContainerID(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ContainerID
		wantErr bool
	}{
		{name: "type and id", in: "containerd://abc123", want: ContainerID{Type: "containerd", ID: "abc123"}},
		{name: "id with slashes", in: "fake://pod/ctr/1", want: ContainerID{Type: "fake", ID: "pod/ctr/1"}},
		{name: "empty string is rejected", in: "", wantErr: true},
		{name: "no separator is rejected", in: "abc123", wantErr: true},
		{name: "single slash separator is rejected", in: "docker:/abc", wantErr: true},
		{name: "empty type is rejected", in: "://abc", wantErr: true},
		{name: "empty id is rejected", in: "docker://", wantErr: true},
		{name: "separator alone is rejected", in: "://", wantErr: true},
		{name: "second separator is rejected", in: "docker://abc://def", wantErr: true},
		{name: "whitespace in type is rejected", in: " docker://abc", wantErr: true},
		{name: "whitespace in id is rejected", in: "docker://abc def", wantErr: true},
		{name: "trailing newline is rejected", in: "docker://abc\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseContainerID(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidContainerID)
				assert.Contains(t, err.Error(), "invalid container ID")
				assert.True(t, got.IsEmpty(), "a failed parse returns the zero ID")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.in, got.String(), "String round-trips")
		})
	}
}

func TestContainerIDText(t *testing.T) {
	type doc struct {
		ID ContainerID `json:"id"`
	}
	b, err := json.Marshal(doc{ID: ContainerID{Type: "fake", ID: "1"}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"fake://1"}`, string(b))

	var d doc
	require.NoError(t, json.Unmarshal(b, &d))
	assert.Equal(t, ContainerID{Type: "fake", ID: "1"}, d.ID)

	require.NoError(t, json.Unmarshal([]byte(`{"id":""}`), &d))
	assert.True(t, d.ID.IsEmpty(), "empty text gives the zero ID")
	assert.Equal(t, "", ContainerID{}.String())

	err = json.Unmarshal([]byte(`{"id":"bogus"}`), &d)
	assert.ErrorIs(t, err, ErrInvalidContainerID)
}
