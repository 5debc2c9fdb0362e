package staticpod

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodekit/nodekit/podutil"
)

func TestDecodeStrictWarnsOfUnknownAndDuplicateFields(t *testing.T) {
	for _, tc := range []struct {
		name     string
		manifest string
		list     bool
		warnings [][]string // per pod
	}{
		{"clean manifest has no warnings", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: a, image: b}]\n",
			false, [][]string{nil}},
		{"misspelled fields are named with their path",
			"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    image: b\n    comand: [x]\n    imagePullPolcy: Always\n",
			false, [][]string{{`unknown field "spec.containers[0].comand"`, `unknown field "spec.containers[0].imagePullPolcy"`}}},
		{"duplicate YAML key", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    image: b\n    image: c\n",
			false, [][]string{{`duplicate field: line 8: key "image" already set in map`}}},
		{"duplicate JSON key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"b","image":"c"}]}}`,
			false, [][]string{{`duplicate field: line 1: key "image" already set in map`}}},
		{"list items get their own warnings",
			`{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"a"},"spec":{"containers":[{"name":"a","image":"b"}]}},{"metadata":{"name":"b"},"spec":{"containers":[{"name":"a","image":"b","comand":["x"]}]}}]}`,
			true, [][]string{nil, {`unknown field "spec.containers[0].comand"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := DecodeStrict([]byte(tc.manifest), tc.list)
			require.NoError(t, err)
			require.Len(t, ms, len(tc.warnings))
			for i, m := range ms {
				assert.Equal(t, tc.warnings[i], m.Warnings, "pod %d", i)
				assert.NoError(t, m.Prepare(Origin{Source: podutil.FileSource, Location: "l", NodeName: "n"}), "the pod still runs")
			}
		})
	}
}

func TestInvalidPodErrorNamesTheUnknownFieldThatExplainsIt(t *testing.T) {
	ms, err := DecodeStrict([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containres:\n  - name: a\n    image: b\n"), false)
	require.NoError(t, err)
	err = ms[0].Prepare(Origin{Source: podutil.FileSource, Location: "l", NodeName: "n"})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "spec.containers: Required value")
	assert.Contains(t, err.Error(), `unknown field "spec.containres"`)
}
