package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
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
// certificate the TLS handshake verified names the user (CN), its UID (the
// subject's 1.3.6.1.4.1.57683.2, as AllowParsingUserUIDFromCertAuth, on by
// default since v1.33), its groups (O) and, in Extra, the certificate's
// credential ID (X509SHA256=<hex>); otherwise a bearer token is reviewed by
// the apiserver (a TokenReview, for audiences if given), whose user keeps
// its UID, groups and Extra. Unlike the kubelet's, results are not cached:
// every request asks.
func WebhookAuthenticator(tokens TokenReviewer, audiences ...string) Authenticator {
	return webhookAuthn{tokens: tokens, audiences: audiences}
}

type webhookAuthn struct {
	tokens    TokenReviewer
	audiences []string
}

func (w webhookAuthn) AuthenticateRequest(r *http.Request) (*User, bool, error) {
	u, certErr := certUser(r)
	if u != nil {
		return u, true, nil
	}
	// as the kubelet's union of authenticators, a bad certificate leaves
	// the token to try
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" || w.tokens == nil {
		return nil, false, certErr
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
	tu := tr.Status.User
	out := &User{Name: tu.Username, UID: tu.UID, Groups: tu.Groups}
	if tu.Extra != nil {
		out.Extra = make(map[string][]string, len(tu.Extra))
		for k, v := range tu.Extra {
			out.Extra[k] = v
		}
	}
	return out, true, nil
}

// CredentialIDKey is the Extra key of the credential that authenticated a
// user (for a client certificate, X509SHA256=<hex of its DER's SHA-256>).
const CredentialIDKey = "authentication.kubernetes.io/credential-id"

// uidOID is the subject attribute a client certificate carries its user's
// UID in.
var uidOID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57683, 2}

// certUser returns the user of a client certificate the handshake
// verified, nil if there is none, or an error for a certificate whose UID
// attribute is not a single non-empty string.
func certUser(r *http.Request) (*User, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, nil
	}
	c := r.TLS.VerifiedChains[0][0]
	if c.Subject.CommonName == "" || !hasClientAuth(c) {
		return nil, nil
	}
	var uids []string
	for _, n := range c.Subject.Names {
		if !n.Type.Equal(uidOID) {
			continue
		}
		uid, ok := n.Value.(string)
		if !ok {
			return nil, errors.New("x509: the certificate's UID is not a string")
		}
		uids = append(uids, uid)
	}
	var uid string
	switch {
	case len(uids) > 1:
		return nil, fmt.Errorf("x509: expected 1 UID, found %d", len(uids))
	case len(uids) == 1 && uids[0] == "":
		return nil, errors.New("x509: the certificate's UID is empty")
	case len(uids) == 1:
		uid = uids[0]
	}
	sum := sha256.Sum256(c.Raw)
	return &User{
		Name: c.Subject.CommonName, UID: uid, Groups: c.Subject.Organization,
		Extra: map[string][]string{CredentialIDKey: {"X509SHA256=" + hex.EncodeToString(sum[:])}},
	}, nil
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
// attributes (get nodes/proxy, nodes/metrics, ... named after the node)
// for the user's name, UID, groups and Extra.
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
	if u := a.User; u != nil {
		sar.Spec.User, sar.Spec.UID, sar.Spec.Groups = u.Name, u.UID, u.Groups
		if u.Extra != nil {
			sar.Spec.Extra = make(map[string]authzv1.ExtraValue, len(u.Extra))
			for k, v := range u.Extra {
				sar.Spec.Extra[k] = v
			}
		}
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
