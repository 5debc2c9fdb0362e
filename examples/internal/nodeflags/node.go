package nodeflags

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// NodeName returns name, or the lower-cased host name if name is empty,
// checked to be a DNS subdomain as a Node's name must be.
func NodeName(name string) (string, error) {
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("node name: %w; give -node-name", err)
		}
		name = strings.ToLower(host)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("%w: -node-name %q: %s", ErrUsage, name, strings.Join(errs, "; "))
	}
	return name, nil
}

// Exit ends a command whose run returned err: 0 on success or -h, 2 on a
// command-line error, 1 on any other, printed to stderr after the command's
// name.
func Exit(name string, err error) {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
