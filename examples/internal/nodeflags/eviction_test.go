package nodeflags

import (
	"errors"
	"flag"
	"io"
	"testing"
)

func TestEvictionFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		wantErr bool
	}{
		{"the kubelet's defaults", nil,
			[]string{"imagefs.available<15%", "memory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%"}, false},
		{"a hard value replaces the defaults", []string{"-eviction-hard", "memory.available<1Gi"}, []string{"memory.available<1Gi"}, false},
		{"no thresholds", []string{"-eviction-hard", ""}, nil, false},
		{"soft with grace period and minimum reclaim", []string{"-eviction-hard", "", "-eviction-soft", "nodefs.available<20%",
			"-eviction-soft-grace-period", "nodefs.available=2m", "-eviction-minimum-reclaim", "nodefs.available=1Gi"},
			[]string{"nodefs.available<20% for 2m0s reclaim 1Gi"}, false},
		{"soft without grace period", []string{"-eviction-soft", "nodefs.available<20%"}, nil, true},
		{"bad syntax", []string{"-eviction-hard", "memory.available=1Gi"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e Eviction
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			e.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := e.Validate()
			if tc.wantErr {
				if !errors.Is(err, ErrUsage) {
					t.Fatalf("error %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, th := range e.Thresholds() {
				got = append(got, th.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("thresholds %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("thresholds %q, want %q", got, tc.want)
				}
			}
		})
	}
}
