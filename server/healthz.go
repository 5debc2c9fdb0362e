package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
)

// installHealthz serves /healthz as k8s.io/apiserver's healthz does for the
// kubelet: "ok" when every check passes; otherwise 500 and one line per
// check ("[+]name ok", "[-]name failed: reason withheld") ending in
// "healthz check failed". ?verbose lists the checks on success too;
// ?exclude=name skips one. /healthz/<name> runs one check.
func installHealthz(mux *http.ServeMux, extra []HealthCheck) {
	checks := append([]HealthCheck{{Name: "ping", Check: func() error { return nil }}}, extra...)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		excluded := map[string]bool{}
		for _, e := range q["exclude"] {
			excluded[strings.TrimSpace(e)] = true
		}
		var out bytes.Buffer
		failed := false
		for _, c := range checks {
			if excluded[c.Name] {
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
				continue
			}
			if err := c.Check(); err != nil {
				failed = true
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			out.WriteString("healthz check failed\n")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write(out.Bytes())
			return
		}
		if _, verbose := q["verbose"]; !verbose {
			_, _ = w.Write([]byte("ok"))
			return
		}
		out.WriteString("healthz check passed\n")
		_, _ = w.Write(out.Bytes())
	})
	for _, c := range checks {
		mux.HandleFunc("GET /healthz/"+c.Name, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			if err := c.Check(); err != nil {
				http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
	}
}
