package nodekit_test

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// The deliberate differences from the kubelet are listed in one place, the
// package doc, and name the ones users run into.
func TestPackageDocListsTheDeliberateDifferencesFromTheKubelet(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(f.Doc.Text()), " ")
	_, section, ok := strings.Cut(doc, "# Deliberate differences from the kubelet")
	if !ok {
		t.Fatal("doc.go has no section \"Deliberate differences from the kubelet\"")
	}
	for _, topic := range []string{
		"CrashLoopBackOff",       // sidecar of a restartPolicy Never pod
		"sandbox recreation",     // phase with a sidecar without startup probe
		"Mirror pods",            // deleted by the status manager
		"Static pod UIDs",        // hashed differently
		"FieldValidationWarning", // strict manifest decoding
		"without a UID",
	} {
		if !strings.Contains(section, topic) {
			t.Errorf("the differences do not mention %q", topic)
		}
	}
}
