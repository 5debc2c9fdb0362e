package nodeflags

import (
	"errors"
	"flag"
	"io"
	"testing"
	"time"
)

func TestContainerLogFlagsAreTheKubelets(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		size    int64
		wantErr bool
	}{
		{"defaults are 10Mi, 5 files, 1 worker, 10s", nil, 10 << 20, false},
		{"a quantity", []string{"-container-log-max-size", "1Ki", "-container-log-max-files", "3"}, 1024, false},
		{"a negative size disables rotation", []string{"-container-log-max-size", "-1"}, -1, false},
		{"zero is no size", []string{"-container-log-max-size", "0"}, 0, true},
		{"not a quantity", []string{"-container-log-max-size", "lots"}, 0, true},
		{"one file cannot rotate", []string{"-container-log-max-files", "1"}, 0, true},
		{"no workers", []string{"-container-log-max-workers", "0"}, 0, true},
		{"no interval", []string{"-container-log-monitor-interval", "0s"}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c CRI
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := c.Validate()
			if tt.wantErr {
				if !errors.Is(err, ErrUsage) {
					t.Fatalf("Validate() = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			size, err := c.logMaxSize()
			if err != nil || size != tt.size {
				t.Fatalf("size = %d, %v; want %d", size, err, tt.size)
			}
			if tt.args == nil && (c.ContainerLogMaxFiles != 5 || c.ContainerLogMaxWorkers != 1 || c.ContainerLogMonitorInterval != 10*time.Second) {
				t.Fatalf("defaults %+v", c)
			}
		})
	}
}
