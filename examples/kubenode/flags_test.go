package main

import (
	"errors"
	"io"
	"slices"
	"testing"
)

// TestNodeFlags: the kubelet's --node-ip takes one IP or a dual-stack
// pair, primary first; --pods-per-core is not negative.
func TestNodeFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantIPs []string
		usage   bool
	}{
		{"one IP", []string{"-node-ip", "10.0.0.5"}, []string{"10.0.0.5"}, false},
		{"a dual-stack pair, IPv6 primary", []string{"-node-ip", "fd00::5,10.0.0.5"}, []string{"fd00::5", "10.0.0.5"}, false},
		{"two IPv4 are not a dual-stack pair", []string{"-node-ip", "10.0.0.5,10.0.0.6"}, nil, true},
		{"three IPs", []string{"-node-ip", "10.0.0.5,fd00::5,10.0.0.6"}, nil, true},
		{"not an IP", []string{"-node-ip", "node-1"}, nil, true},
		{"negative pods per core", []string{"-node-ip", "10.0.0.5", "-pods-per-core", "-1"}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-kubeconfig", "/nonexistent", "-node-name", "n1"}, tc.args...)
			o, err := parseFlags(args, io.Discard)
			if tc.usage {
				if !errors.Is(err, errUsage) {
					t.Fatalf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.nodeIPs, tc.wantIPs) {
				t.Errorf("node IPs %q, want %q", o.nodeIPs, tc.wantIPs)
			}
		})
	}
}
