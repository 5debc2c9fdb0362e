package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TokenReviewer creates TokenReviews; client-go's
// AuthenticationV1().TokenReviews() satisfies it.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// SubjectAccessReviewer creates SubjectAccessReviews; client-go's
// AuthorizationV1().SubjectAccessReviews() satisfies it.
type SubjectAccessReviewer interface {
	Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
}

// WebhookAuthenticator authenticates as the kubelet does with
// --client-ca-file and --authentication-token-webhook: a client
// certificate the TLS handshake verified names the user (CN) and its groups
// (O); otherwise a bearer token is reviewed by the apiserver (a
// TokenReview, for audiences if given). Unlike the kubelet's, results are
// not cached: every request asks.
func WebhookAuthenticator(tokens TokenReviewer, audiences ...string) Authenticator {
	return webhookAuthn{tokens: tokens, audiences: audiences}
}

type webhookAuthn struct {
	tokens    TokenReviewer
	audiences []string
}

func (w webhookAuthn) AuthenticateRequest(r *http.Request) (*User, bool, error) {
	if u := certUser(r); u != nil {
		return u, true, nil
	}
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" || w.tokens == nil {
		return nil, false, nil
	}
	tr, err := w.tokens.Create(r.Context(), &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{
		Token: strings.TrimSpace(token), Audiences: w.audiences,
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	if tr.Status.Error != "" {
		return nil, false, errors.New("token review: " + tr.Status.Error)
	}
	if !tr.Status.Authenticated {
		return nil, false, nil
	}
	u := tr.Status.User
	return &User{Name: u.Username, UID: u.UID, Groups: u.Groups}, true, nil
}

// certUser returns the user of a client certificate the handshake
// verified, or nil.
func certUser(r *http.Request) *User {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil
	}
	c := r.TLS.VerifiedChains[0][0]
	if c.Subject.CommonName == "" || !hasClientAuth(c) {
		return nil
	}
	return &User{Name: c.Subject.CommonName, Groups: c.Subject.Organization}
}

func hasClientAuth(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) == 0 {
		return true
	}
	for _, u := range c.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// WebhookAuthorizer authorizes as the kubelet does with
// --authorization-mode=Webhook: a SubjectAccessReview of the request's
// attributes (get nodes/proxy, nodes/metrics, ... named after the node).
// Unlike the kubelet's, results are not cached.
func WebhookAuthorizer(reviews SubjectAccessReviewer) Authorizer {
	return webhookAuthz{reviews: reviews}
}

type webhookAuthz struct{ reviews SubjectAccessReviewer }

func (w webhookAuthz) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{
			Verb: a.Verb, Version: "v1", Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
		},
	}}
	if a.User != nil {
		sar.Spec.User, sar.Spec.UID, sar.Spec.Groups = a.User.Name, a.User.UID, a.User.Groups
	}
	got, err := w.reviews.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	reason := got.Status.Reason
	if e := got.Status.EvaluationError; e != "" {
		reason = strings.TrimSpace(reason + " " + e)
	}
	// no opinion is a refusal, as the kubelet's
	return got.Status.Allowed && !got.Status.Denied, reason, nil
}
