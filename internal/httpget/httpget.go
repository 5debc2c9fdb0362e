// Package httpget builds the HTTP request of an httpGet action (a probe's
// or a lifecycle hook's) as the kubelet's NewRequestForHTTPGetAction, and
// follows redirects as both do: the one place prober and runtime/lifecycle
// share, since the kubelet shares it too (pkg/probe/http).
package httpget

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// NewRequest builds the GET of g to host and port: scheme http unless g
// says otherwise, g's path and headers, userAgent and "Accept: */*"
// unless g sets them (an empty Accept header removes it), Host from the
// headers.
func NewRequest(ctx context.Context, g *v1.HTTPGetAction, host string, port int, userAgent string) (*http.Request, error) {
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path} // as the kubelet: too late to reject it
	}
	u.Scheme, u.Host = scheme, net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	h := make(http.Header, len(g.HTTPHeaders)+2)
	for _, hv := range g.HTTPHeaders {
		h.Add(hv.Name, hv.Value)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", userAgent)
	}
	if _, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if h.Get("Accept") == "" {
		h.Del("Accept")
	}
	req.Header = h
	req.Host = h.Get("Host")
	return req, nil
}

// SameHostRedirects is an http.Client's CheckRedirect as the kubelet's
// probes and hooks (followNonLocalRedirects false): redirects are followed
// to the first request's host only, at most 10; a redirect elsewhere ends
// with the redirect's response.
func SameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}
