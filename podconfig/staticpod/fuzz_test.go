package staticpod

import (
	"testing"

	"github.com/nodekit/nodekit/podutil"
)

// FuzzDecodeManifest feeds arbitrary bytes through DecodeStrict and Prepare:
// no input may panic, DecodeStrict accepts what Decode accepts, and whatever
// Prepare accepts must validate again and carry the static-pod bookkeeping.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(yamlPod), false)
	f.Add([]byte(`{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}`), true)
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  volumes:\n  - name: v\n    projected:\n      sources:\n      - {}\n"), false)
	f.Add([]byte("\x00\xff"), false)
	f.Fuzz(func(t *testing.T, data []byte, allowList bool) {
		ms, err := DecodeStrict(data, allowList)
		if _, plain := Decode(data, allowList); (err == nil) != (plain == nil) {
			t.Fatalf("DecodeStrict error %v, Decode error %v", err, plain)
		}
		if err != nil {
			return
		}
		for _, m := range ms {
			p := m.Pod
			if p == nil {
				t.Fatal("nil pod decoded")
			}
			if err := m.Prepare(Origin{Source: podutil.FileSource, Location: "/m.yaml", NodeName: "node"}); err != nil {
				continue
			}
			if err := Validate(p); err != nil {
				t.Fatalf("prepared pod fails validation: %v", err)
			}
			if p.UID == "" || p.Annotations[podutil.ConfigHashAnnotationKey] != string(p.UID) {
				t.Fatalf("prepared pod lacks UID bookkeeping: %q", p.UID)
			}
		}
	})
}
