package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/examples/internal/nodeflags"
)

// currentFile holds the serving certificate and key the apiserver issued,
// as the kubelet's kubelet-server-current.pem.
const currentFile = "kubelet-server-current.pem"

// csrPoll is how often a pending CertificateSigningRequest is read again.
const csrPoll = time.Second

// csrClient reaches the cluster's CertificateSigningRequests.
type csrClient interface {
	Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
}

// servingCerts is the kubelet's server certificate bootstrap and rotation
// (--rotate-server-certificates): the serving certificate is asked of the
// apiserver with a CertificateSigningRequest for signer
// kubernetes.io/kubelet-serving, for system:node:<name> in system:nodes
// and the node's names and IPs, and asked again at 70 to 90 % of its
// lifetime. Until one is issued (an approver and a signer must act; a
// kubeadm cluster approves none by itself), TLS handshakes fail, as the
// kubelet's do.
type servingCerts struct {
	csrs     csrClient
	nodeName string
	names    nodeflags.CertNames
	dir      string
	clock    clock.Clock
	log      logr.Logger
	cur      atomic.Pointer[tls.Certificate]
}

var errNoServingCert = errors.New("no serving certificate available for the kubelet")

// GetCertificate is the tls.Config's.
func (s *servingCerts) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.cur.Load(); c != nil {
		return c, nil
	}
	return nil, errNoServingCert
}

// run keeps a certificate until ctx ends: the one in dir while it is
// valid for the names, else a new one asked for.
func (s *servingCerts) run(ctx context.Context) {
	if c, err := tls.LoadX509KeyPair(filepath.Join(s.dir, currentFile), filepath.Join(s.dir, currentFile)); err == nil && s.covers(c.Leaf) {
		s.cur.Store(&c)
		s.log.Info("Serving certificate loaded", "file", filepath.Join(s.dir, currentFile), "notAfter", c.Leaf.NotAfter)
	}
	backoff := time.Second
	for {
		if c := s.cur.Load(); c != nil {
			if !s.sleep(ctx, rotationDeadline(c.Leaf).Sub(s.clock.Now())) {
				return
			}
		}
		c, err := s.request(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Error(err, "Serving certificate request failed", "retryIn", backoff)
			if !s.sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Minute)
			continue
		}
		backoff = time.Second
		s.cur.Store(c)
		s.log.Info("Serving certificate issued", "subject", c.Leaf.Subject.String(), "notAfter", c.Leaf.NotAfter)
	}
}

func (s *servingCerts) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// covers says whether c is valid now and names every name and IP.
func (s *servingCerts) covers(c *x509.Certificate) bool {
	now := s.clock.Now()
	if c == nil || now.Before(c.NotBefore) || !now.Before(c.NotAfter) {
		return false
	}
	for _, d := range s.names.DNS {
		if c.VerifyHostname(d) != nil {
			return false
		}
	}
	for _, ip := range s.names.IPs {
		if c.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

// rotationDeadline is the kubelet's: a random point between 70 and 90 % of
// the certificate's lifetime.
func rotationDeadline(c *x509.Certificate) time.Time {
	total := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(total) * (0.7 + 0.2*rand.Float64())))
}

// request asks for a certificate and waits until it is issued, denied or
// failed.
func (s *servingCerts) request(ctx context.Context) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), cryptorand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(cryptorand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "system:node:" + s.nodeName, Organization: []string{"system:nodes"}},
		DNSNames:    s.names.DNS,
		IPAddresses: s.names.IPs,
	}, key)
	if err != nil {
		return nil, err
	}
	csr, err := s.csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the CertificateSigningRequest: %w", err)
	}
	s.log.Info("Serving certificate requested", "csr", csr.Name, "signer", certificatesv1.KubeletServingSignerName)
	for {
		for _, c := range csr.Status.Conditions {
			if (c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed) && c.Status == v1.ConditionTrue {
				return nil, fmt.Errorf("CertificateSigningRequest %s was %s: %s", csr.Name, strings.ToLower(string(c.Type)), strings.TrimSpace(c.Reason+" "+c.Message))
			}
		}
		if len(csr.Status.Certificate) > 0 {
			break
		}
		if !s.sleep(ctx, csrPoll) {
			return nil, ctx.Err()
		}
		if csr, err = s.csrs.Get(ctx, csr.Name, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("reading CertificateSigningRequest: %w", err)
		}
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	c, err := tls.X509KeyPair(csr.Status.Certificate, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CertificateSigningRequest %s: the issued certificate: %w", csr.Name, err)
	}
	if err := s.store(append(append([]byte{}, csr.Status.Certificate...), keyPEM...)); err != nil {
		s.log.Error(err, "Serving certificate not stored", "dir", s.dir)
	}
	return &c, nil
}

// store writes the certificate and key to dir, as kubelet-server-current.pem.
func (s *servingCerts) store(data []byte) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, "."+currentFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(s.dir, currentFile))
}
