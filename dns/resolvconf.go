package dns

import (
	"bytes"
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxResolvConfSize bounds the host file read, as the kubelet's 10 MiB.
const maxResolvConfSize = 10 << 20

// ParseResolvConf parses a resolv.conf as the kubelet does: nameserver
// lines accumulate, the last search line wins (without its "." entries,
// which systemd-resolved's stub writes for no domain), options accumulate
// across lines with a later one overriding an earlier one of the same name,
// comments (# or ;) and other keywords are ignored. A nameserver line without an address is
// an error, with its line number.
func ParseResolvConf(b []byte) (*runtimeapi.DNSConfig, error) {
	if len(b) > maxResolvConfSize {
		return nil, fmt.Errorf("larger than %d bytes", maxResolvConfSize)
	}
	cfg := &runtimeapi.DNSConfig{}
	var errs []string
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "nameserver":
			if len(f) < 2 {
				errs = append(errs, fmt.Sprintf("line %d: nameserver without an address", n+1))
				continue
			}
			cfg.Servers = append(cfg.Servers, f[1])
		case "search":
			// The same domain with and without its trailing dot counts once.
			cfg.Searches = cfg.Searches[:0]
			for _, s := range f[1:] {
				if s != "." {
					cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			for _, o := range f[1:] {
				cfg.Options = overrideOption(cfg.Options, o)
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return cfg, nil
}

// ResolvConf renders cfg as a resolv.conf file, for a runtime that writes
// the file itself; CRI runtimes do this from the sandbox's DNSConfig.
func ResolvConf(cfg *runtimeapi.DNSConfig) []byte {
	var b bytes.Buffer
	if len(cfg.GetSearches()) > 0 {
		b.WriteString("search " + strings.Join(cfg.Searches, " ") + "\n")
	}
	for _, s := range cfg.GetServers() {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(cfg.GetOptions()) > 0 {
		b.WriteString("options " + strings.Join(cfg.Options, " ") + "\n")
	}
	return b.Bytes()
}
