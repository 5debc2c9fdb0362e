package runtime

import (
	"encoding/json"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
)

// HashContainer hashes the parts of a container spec whose change requires a
// restart. Resources and ResizePolicy are left out, since they can change in
// place. The hash is stable across processes for the same spec.
func HashContainer(c *v1.Container) uint64 {
	cp := *c
	cp.Resources = v1.ResourceRequirements{}
	cp.ResizePolicy = nil
	b, err := json.Marshal(&cp)
	if err != nil {
		// A v1.Container always marshals; fall back to the name and image.
		b = []byte(c.Name + "\x00" + c.Image)
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}
