package testenv

import (
	"testing"
)

// recorder is a testing.TB that records Skip and Fatal instead of ending the
// goroutine, so the three outcomes can be checked.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = true
	r.msg = format
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = format
}

func TestCRIEndpoint(t *testing.T) {
	tests := []struct {
		name               string
		endpoint, ci       string
		want               string
		wantSkip, wantFail bool
	}{
		{name: "set endpoint is returned", endpoint: "unix:///tmp/c.sock", want: "unix:///tmp/c.sock"},
		{name: "set endpoint is returned in CI", endpoint: "unix:///tmp/c.sock", ci: "true", want: "unix:///tmp/c.sock"},
		{name: "missing endpoint skips outside CI", wantSkip: true},
		{name: "missing endpoint fails in CI", ci: "true", wantFail: true},
		{name: "CI other than true still skips", ci: "1", wantSkip: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EndpointEnv, tt.endpoint)
			t.Setenv("CI", tt.ci)
			r := &recorder{TB: t}
			got := CRIEndpoint(r)
			if got != tt.want || r.skipped != tt.wantSkip || r.failed != tt.wantFail {
				t.Fatalf("got %q skipped=%v failed=%v, want %q skipped=%v failed=%v",
					got, r.skipped, r.failed, tt.want, tt.wantSkip, tt.wantFail)
			}
		})
	}
}
