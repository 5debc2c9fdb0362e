package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
)

// User is who made a request, as an Authenticator found.
type User struct {
	Name   string
	UID    string
	Groups []string
}

// Authenticator tells who made a request: ok false (or an error) refuses
// it with 401. The kubelet's webhook authenticator (a TokenReview against
// the apiserver) or an x509 client-certificate check fit this shape.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (user *User, ok bool, err error)
}

// Attributes describe a request to authorize, as the kubelet's: verb from
// the HTTP method, resource "nodes" named after the node, and a
// subresource after the path.
type Attributes struct {
	User        *User
	Verb        string // get, create, update, patch, delete
	Resource    string // "nodes"
	Subresource string // metrics, log, pods, healthz, proxy
	Name        string // the node's name
	Path        string
}

// Authorizer decides whether a request may proceed: false refuses it with
// 403, an error with 500. The kubelet's webhook authorizer (a
// SubjectAccessReview) fits this shape.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// Auth guards the server.
type Auth struct {
	Authenticator Authenticator
	Authorizer    Authorizer
	// NodeName names the nodes resource in the attributes.
	NodeName string
}

// Attributes returns the attributes the kubelet authorizes r with.
func (a *Auth) Attributes(u *User, r *http.Request) Attributes {
	verb := "get"
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	sub := "proxy"
	for _, p := range []struct{ prefix, sub string }{
		{"/stats", "stats"}, {"/metrics", "metrics"}, {"/logs", "log"}, {"/pods", "pods"}, {"/healthz", "healthz"}, {"/configz", "configz"},
	} {
		if r.URL.Path == p.prefix || strings.HasPrefix(r.URL.Path, p.prefix+"/") {
			sub = p.sub
			break
		}
	}
	return Attributes{User: u, Verb: verb, Resource: "nodes", Subresource: sub, Name: a.NodeName, Path: r.URL.Path}
}

// filter answers as the kubelet's auth filter: 401 "Unauthorized", 403
// "Forbidden (user=..., verb=..., resource=..., subresource=...)", 500 on
// an authorizer error.
func (a *Auth) filter(next http.Handler, log logr.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := a.Authenticator.AuthenticateRequest(r)
		if err != nil {
			log.Error(err, "Unable to authenticate the request due to an error")
		}
		if err != nil || !ok || u == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := a.Attributes(u, r)
		allowed, _, err := a.Authorizer.Authorize(r.Context(), attrs)
		desc := fmt.Sprintf("(user=%s, verb=%s, resource=%s, subresource=%s)", u.Name, attrs.Verb, attrs.Resource, attrs.Subresource)
		if err != nil {
			log.Error(err, "Authorization error", "user", u.Name, "verb", attrs.Verb, "subresource", attrs.Subresource)
			http.Error(w, "Authorization error "+desc, http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(2).Info("Forbidden", "user", u.Name, "verb", attrs.Verb, "subresource", attrs.Subresource)
			http.Error(w, "Forbidden "+desc, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
