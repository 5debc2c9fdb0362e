//go:build race

package replicaset_test

import "testing"

// See synctest_test.go: the test runs without the race detector.
func TestReplicaSetInSynctestBubble(t *testing.T) {
	t.Skip("skipped under -race: go1.26's race runtime crashes intermittently in synctest bubbles; run it with: go test -run InSynctestBubble ./examples/replicaset")
}
