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
	Extra  map[string][]string
}

// The users and groups the apiserver's authentication gives a meaning.
const (
	// GroupAuthenticated is the group of every authenticated user.
	GroupAuthenticated = "system:authenticated"
	// GroupUnauthenticated is the anonymous user's group.
	GroupUnauthenticated = "system:unauthenticated"
	// UserAnonymous is the user of a request without credentials.
	UserAnonymous = "system:anonymous"
)

// Authenticator tells who made a request: ok false (or an error) refuses
// it with 401. The kubelet's webhook authenticator (a TokenReview against
// the apiserver) or an x509 client-certificate check fit this shape. Auth
// adds GroupAuthenticated to the users it returns (see Auth).
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

// AlwaysAllow is the kubelet's --authorization-mode=AlwaysAllow: every
// authenticated request is allowed.
type AlwaysAllow struct{}

// Authorize allows a.
func (AlwaysAllow) Authorize(context.Context, Attributes) (bool, string, error) { return true, "", nil }

// Auth guards the server. As the kubelet's authenticator (wrapped in the
// apiserver's authenticated group adder), every user the Authenticator
// returns is put in GroupAuthenticated before it is authorized, unless it
// is UserAnonymous or already in GroupAuthenticated or
// GroupUnauthenticated.
type Auth struct {
	Authenticator Authenticator
	Authorizer    Authorizer
	// NodeName names the nodes resource in the attributes.
	NodeName string
}

// Attributes returns the attributes the kubelet authorizes r with, in the
// order it tries them: the request is allowed if any one is. As the
// kubelet's fine-grained authorization (KubeletFineGrainedAuthz, locked on
// since v1.37), /pods, /runningpods/, /healthz, /configz and /statusz are
// allowed by their own subresource (pods for both pod paths) or by proxy;
// /stats, /metrics (/metrics/resource, /metrics/probes ...), /logs and
// /checkpoint only by theirs (stats, metrics, log, checkpoint); anything
// else (/containerLogs, /exec, /attach, /portForward, /run ...) by proxy.
func (a *Auth) Attributes(u *User, r *http.Request) []Attributes {
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
	path := r.URL.Path
	under := func(prefix string) bool { // the kubelet's isSubpath
		prefix = strings.TrimSuffix(prefix, "/")
		return path == prefix || strings.HasPrefix(path, prefix+"/")
	}
	var subs []string
	switch {
	case under("/pods"), under("/runningpods/"):
		subs = []string{"pods", "proxy"}
	case under("/healthz"):
		subs = []string{"healthz", "proxy"}
	case under("/configz"):
		subs = []string{"configz", "proxy"}
	case under("/statusz"):
		subs = []string{"statusz", "proxy"}
	case under("/stats"):
		subs = []string{"stats"}
	case under("/metrics"):
		subs = []string{"metrics"}
	case under("/logs"):
		subs = []string{"log"}
	case under("/checkpoint"):
		subs = []string{"checkpoint"}
	default:
		subs = []string{"proxy"}
	}
	out := make([]Attributes, len(subs))
	for i, sub := range subs {
		out[i] = Attributes{User: u, Verb: verb, Resource: "nodes", Subresource: sub, Name: a.NodeName, Path: path}
	}
	return out
}

// filter answers as the kubelet's auth filter: 401 "Unauthorized", 403
// "Forbidden (user=..., verb=..., resource=..., subresource(s)=[...])" when
// no attribute is allowed, 500 on an authorizer error.
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
		u = withAuthenticatedGroup(u)
		attrs := a.Attributes(u, r)
		subs := make([]string, 0, len(attrs))
		for _, attr := range attrs {
			subs = append(subs, attr.Subresource)
			allowed, _, err := a.Authorizer.Authorize(r.Context(), attr)
			if err != nil {
				log.Error(err, "Authorization error", "user", u.Name, "verb", attr.Verb, "subresource", attr.Subresource)
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
					u.Name, attr.Verb, attr.Resource, attr.Subresource), http.StatusInternalServerError)
				return
			}
			if allowed {
				next.ServeHTTP(w, r)
				return
			}
		}
		log.V(2).Info("Forbidden", "user", u.Name, "verb", attrs[0].Verb, "subresources", subs)
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)", u.Name, attrs[0].Verb, attrs[0].Resource, subs), http.StatusForbidden)
	})
}

// withAuthenticatedGroup is the apiserver's AuthenticatedGroupAdder
// (k8s.io/apiserver/pkg/authentication/group): u with GroupAuthenticated
// added, as a copy, unless u is anonymous or already says whether it is
// authenticated.
func withAuthenticatedGroup(u *User) *User {
	if u.Name == UserAnonymous {
		return u
	}
	for _, g := range u.Groups {
		if g == GroupAuthenticated || g == GroupUnauthenticated {
			return u
		}
	}
	out := *u
	out.Groups = append(append(make([]string, 0, len(u.Groups)+1), u.Groups...), GroupAuthenticated)
	return &out
}
