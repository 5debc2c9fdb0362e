package httpget

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

func TestNewRequest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		g          v1.HTTPGetAction
		wantURL    string
		wantHeader http.Header
		wantHost   string
	}{
		{"http by default with the agent and any type", v1.HTTPGetAction{Path: "/healthz?x=1"},
			"http://10.0.0.1:8080/healthz?x=1", http.Header{"User-Agent": {"ua"}, "Accept": {"*/*"}}, ""},
		{"scheme in any case", v1.HTTPGetAction{Path: "/", Scheme: "HTTPS"},
			"https://10.0.0.1:8080/", http.Header{"User-Agent": {"ua"}, "Accept": {"*/*"}}, ""},
		{"the action's headers win, an empty Accept removes it, Host is the request's",
			v1.HTTPGetAction{Path: "/", HTTPHeaders: []v1.HTTPHeader{{Name: "User-Agent", Value: "mine"}, {Name: "Accept", Value: ""}, {Name: "Host", Value: "example.com"}, {Name: "X", Value: "1"}, {Name: "X", Value: "2"}}},
			"http://10.0.0.1:8080/", http.Header{"User-Agent": {"mine"}, "Host": {"example.com"}, "X": {"1", "2"}}, "example.com"},
		{"a path that is no URL is taken as a path", v1.HTTPGetAction{Path: "%zz"},
			"http://10.0.0.1:8080/%25zz", http.Header{"User-Agent": {"ua"}, "Accept": {"*/*"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := NewRequest(context.Background(), &tc.g, "10.0.0.1", 8080, "ua")
			require.NoError(t, err)
			assert.Equal(t, http.MethodGet, req.Method)
			assert.Equal(t, tc.wantURL, req.URL.String())
			assert.Equal(t, tc.wantHeader, req.Header)
			assert.Equal(t, tc.wantHost, req.Host)
		})
	}
}

func TestSameHostRedirects(t *testing.T) {
	first := &http.Request{URL: &url.URL{Scheme: "http", Host: "10.0.0.1:80"}}
	to := func(host string) *http.Request { return &http.Request{URL: &url.URL{Scheme: "http", Host: host}} }
	assert.NoError(t, SameHostRedirects(to("10.0.0.1:81"), []*http.Request{first}), "same host, another port")
	assert.ErrorIs(t, SameHostRedirects(to("10.0.0.2:80"), []*http.Request{first}), http.ErrUseLastResponse)
	via := make([]*http.Request, 10)
	for i := range via {
		via[i] = first
	}
	assert.EqualError(t, SameHostRedirects(to("10.0.0.1:80"), via), "stopped after 10 redirects")
}
