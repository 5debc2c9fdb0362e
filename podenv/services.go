package podenv

import (
	"net"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ServiceVars returns the environment variables the kubelet derives from
// services: <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT(_<PORT NAME>) and the
// Docker-link variables <NAME>_PORT(_<port>_<PROTO>(_PROTO|_PORT|_ADDR)).
// Services without a cluster IP (headless) give none.
func ServiceVars(services []*v1.Service) []Var {
	var out []Var
	for _, s := range services {
		ip := s.Spec.ClusterIP
		if ip == "" || ip == v1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		prefix := envName(s.Name)
		out = append(out, Var{prefix + "_SERVICE_HOST", ip})
		port := prefix + "_SERVICE_PORT"
		out = append(out, Var{port, strconv.Itoa(int(s.Spec.Ports[0].Port))})
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				out = append(out, Var{port + "_" + envName(p.Name), strconv.Itoa(int(p.Port))})
			}
		}
		for i, p := range s.Spec.Ports {
			proto := string(v1.ProtocolTCP)
			if p.Protocol != "" {
				proto = string(p.Protocol)
			}
			lower := strings.ToLower(proto)
			num := strconv.Itoa(int(p.Port))
			url := lower + "://" + net.JoinHostPort(ip, num)
			if i == 0 {
				out = append(out, Var{prefix + "_PORT", url})
			}
			pp := prefix + "_PORT_" + num + "_" + strings.ToUpper(proto)
			out = append(out, Var{pp, url}, Var{pp + "_PROTO", lower}, Var{pp + "_PORT", num}, Var{pp + "_ADDR", ip})
		}
	}
	return out
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// serviceEnv picks the services a pod in namespace sees, as the kubelet's
// getServiceEnvVarMap: the master service ("kubernetes" in masterNS)
// always, the namespace's own services when links are enabled; a name in
// the pod's namespace wins over the master service.
func serviceEnv(master, own []*v1.Service, masterNS, namespace string, links bool) []Var {
	byName := map[string]*v1.Service{}
	if links {
		for _, s := range own {
			if s.Namespace == namespace || s.Namespace == "" {
				byName[s.Name] = s
			}
		}
	}
	for _, s := range master {
		if s.Name == "kubernetes" && (s.Namespace == masterNS || s.Namespace == "") {
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	picked := make([]*v1.Service, len(names))
	for i, n := range names {
		picked[i] = byName[n]
	}
	return ServiceVars(picked)
}
