// Package harness is a short example of a controller test on package sim,
// which replaced the harness that lived here: a pretend controller keeps
// one pod per node, on three simulated nodes, on virtual time. See
// example_test.go; the sim package doc has the whole story.
package harness
