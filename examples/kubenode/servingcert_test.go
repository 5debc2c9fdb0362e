package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/examples/internal/nodeflags"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// signer signs CSRs with a CA of its own, as a cluster's would.
type signer struct {
	ca  *x509.Certificate
	key *ecdsa.PrivateKey
}

func newSigner(t *testing.T) *signer {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Unix(0, 0), NotAfter: time.Unix(4e9, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &signer{ca: ca, key: key}
}

func (s *signer) sign(t *testing.T, csrPEM []byte, notBefore time.Time, valid time.Duration) []byte {
	t.Helper()
	b, _ := pem.Decode(csrPEM)
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: req.Subject,
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses, NotBefore: notBefore, NotAfter: notBefore.Add(valid),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, s.ca, req.PublicKey, s.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// newClientset is a fake clientset that names CSRs from their
// GenerateName, as the apiserver does.
func newClientset() *fake.Clientset {
	cs := fake.NewClientset()
	n := 0
	cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		if csr.Name == "" {
			n++
			csr.Name = csr.GenerateName + strconv.Itoa(n)
		}
		return false, nil, nil
	})
	return cs
}

func newServingCerts(cs *fake.Clientset, clk *clocktesting.FakeClock, dir string) *servingCerts {
	return &servingCerts{csrs: cs.CertificatesV1().CertificateSigningRequests(), nodeName: "n1",
		names: nodeflags.CertNames{DNS: []string{"n1"}, IPs: []net.IP{net.ParseIP("10.0.0.5")}},
		dir:   dir, clock: clk, log: logr.Discard()}
}

// waitCSR waits for the n-th CSR to be created.
func waitCSR(t *testing.T, cs *fake.Clientset, n int) certificatesv1.CertificateSigningRequest {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) >= n {
			return list.Items[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CSR number %d", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// stepUntil steps clk by d until cond holds.
func stepUntil(t *testing.T, clk *clocktesting.FakeClock, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		if clk.HasWaiters() {
			clk.Step(d)
		}
		time.Sleep(time.Millisecond)
	}
}

// The certificate is asked for, served once issued, kept in the
// directory, asked for again at 70-90 % of its lifetime, and a node
// started again on the directory serves the kept one without asking.
func TestServingCertificateIsRequestedServedKeptAndRotated(t *testing.T) {
	cs, clk, dir, sg := newClientset(), clocktesting.NewFakeClock(t0), t.TempDir(), newSigner(t)
	s := newServingCerts(cs, clk, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	defer func() { cancel(); <-done }()

	if _, err := s.GetCertificate(nil); err != errNoServingCert {
		t.Errorf("before issuance: %v, want %v", err, errNoServingCert)
	}
	csr := waitCSR(t, cs, 1)
	b, _ := pem.Decode(csr.Spec.Request)
	req, _ := x509.ParseCertificateRequest(b.Bytes)
	if req.Subject.CommonName != "system:node:n1" || strings.Join(req.Subject.Organization, ",") != "system:nodes" ||
		len(req.DNSNames) != 1 || req.DNSNames[0] != "n1" || len(req.IPAddresses) != 1 || !req.IPAddresses[0].Equal(net.ParseIP("10.0.0.5")) {
		t.Errorf("request for %v %v %v", req.Subject, req.DNSNames, req.IPAddresses)
	}
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		t.Errorf("signer %q", csr.Spec.SignerName)
	}
	csr.Status.Certificate = sg.sign(t, csr.Spec.Request, t0, 100*time.Hour)
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, &csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stepUntil(t, clk, csrPoll, func() bool { c, _ := s.GetCertificate(nil); return c != nil })
	first, _ := s.GetCertificate(nil)

	// no new request before 70 % of the lifetime, one by 90 %
	stepUntil(t, clk, time.Hour, func() bool { return !clk.Now().Before(t0.Add(69 * time.Hour)) })
	if list, _ := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); len(list.Items) != 1 {
		t.Fatalf("%d requests before 70 %% of the lifetime, want 1", len(list.Items))
	}
	stepUntil(t, clk, time.Hour, func() bool { return !clk.Now().Before(t0.Add(91 * time.Hour)) })
	second := waitCSR(t, cs, 2)
	second.Status.Certificate = sg.sign(t, second.Spec.Request, clk.Now(), 100*time.Hour)
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, &second, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stepUntil(t, clk, csrPoll, func() bool { c, _ := s.GetCertificate(nil); return c != nil && c != first })
	cancel()
	<-done

	// started again: the kept certificate, no request
	cs2 := newClientset()
	s2 := newServingCerts(cs2, clk, dir)
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() { defer close(done2); s2.run(ctx2) }()
	stepUntil(t, clk, 0, func() bool { c, _ := s2.GetCertificate(nil); return c != nil })
	cancel2()
	<-done2
	if list, _ := cs2.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("%d requests with a valid kept certificate, want 0", len(list.Items))
	}
}

func TestADeniedRequestIsAnError(t *testing.T) {
	cs, clk := newClientset(), clocktesting.NewFakeClock(t0)
	s := newServingCerts(cs, clk, t.TempDir())
	errc := make(chan error, 1)
	go func() { _, err := s.request(context.Background()); errc <- err }()
	csr := waitCSR(t, cs, 1)
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: v1.ConditionTrue, Reason: "NotMyNode"}}
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(context.Background(), &csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var err error
	stepUntil(t, clk, csrPoll, func() bool {
		select {
		case err = <-errc:
			return true
		default:
			return false
		}
	})
	if err == nil || !strings.Contains(err.Error(), "was denied: NotMyNode") {
		t.Errorf("err = %v, want the denial", err)
	}
}

func TestRotationDeadlineIsAt70To90PercentOfTheLifetime(t *testing.T) {
	c := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(100 * time.Hour)}
	for range 100 {
		d := rotationDeadline(c)
		if d.Before(t0.Add(70*time.Hour)) || d.After(t0.Add(90*time.Hour)) {
			t.Fatalf("deadline %v after the start", d.Sub(t0))
		}
	}
}
