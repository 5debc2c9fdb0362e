package nodeflags

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// parse parses args into a Server with cluster's defaults.
func parse(t *testing.T, cluster bool, args ...string) (*Server, error) {
	t.Helper()
	return parseWith(t, &Server{Cluster: cluster}, args...)
}

// parseWith parses args into o.
func parseWith(t *testing.T, o *Server, args ...string) (*Server, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o, o.Validate()
}

// writeCA writes a self-signed CA to a file and returns it with its path.
func writeCA(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, path
}

func clientCert(t *testing.T, ca tls.Certificate, cn string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestServerFlagValidation(t *testing.T) {
	_, caFile := writeCA(t)
	notPEM := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(notPEM, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		cluster   bool
		defaultCA []byte // the kubeconfig's
		args      []string
		want      string // "" valid
	}{
		{"standalone defaults: loopback, anonymous, AlwaysAllow", false, nil, nil, ""},
		{"cluster defaults: all interfaces, webhooks, no anonymous", true, nil, nil, ""},
		{"port out of range", false, nil, []string{"-port", "70000"}, "-port 70000 is not a port"},
		{"address that is no IP", false, nil, []string{"-address", "localhost"}, `-address "localhost" is not an IP address`},
		{"key without certificate", false, nil, []string{"-tls-private-key-file", "k.pem"}, "go together"},
		{"standalone on all interfaces, open to anyone", false, nil, []string{"-address", "0.0.0.0"}, "-address 0.0.0.0 is not loopback"},
		{"standalone on all interfaces with client certificates and no anonymous", false, nil,
			[]string{"-address", "0.0.0.0", "-client-ca-file", caFile, "-anonymous-auth=false"}, ""},
		{"standalone with a client CA on loopback", false, nil, []string{"-client-ca-file", caFile}, ""},
		{"a read-only port off loopback", true, nil, []string{"-read-only-port", "10255"}, "-address 0.0.0.0 is not loopback"},
		{"cluster on all interfaces, anonymous but webhook authorization", true, nil, []string{"-anonymous-auth"}, ""},
		{"cluster on all interfaces, anonymous and AlwaysAllow", true, nil, []string{"-anonymous-auth", "-authorization-mode", "AlwaysAllow"}, "-address 0.0.0.0 is not loopback"},
		{"cluster, AlwaysAllow without anonymous", true, nil, []string{"-authorization-mode", "AlwaysAllow"}, ""},
		{"an unknown authorization mode", true, nil, []string{"-authorization-mode", "RBAC"}, `-authorization-mode "RBAC"`},
		{"webhook authorization without an apiserver", false, nil, []string{"-authorization-mode", "Webhook"}, "need an apiserver"},
		{"token webhook without an apiserver", false, nil, []string{"-authentication-token-webhook"}, "need an apiserver"},
		{"no way to authenticate", true, nil, []string{"-authentication-token-webhook=false"}, "no way to authenticate"},
		{"a missing client CA file", true, nil, []string{"-client-ca-file", "/nonexistent/ca.crt"}, "-client-ca-file: open /nonexistent/ca.crt"},
		{"a client CA file without certificates", true, nil, []string{"-client-ca-file", notPEM}, "no PEM certificate"},
		{"a negative cache TTL", true, nil, []string{"-authorization-webhook-cache-unauthorized-ttl", "-1s"}, "is negative"},
		{"the kubeconfig's CA authenticates without the token webhook", true, caPEM, []string{"-authentication-token-webhook=false"}, ""},
		{"a kubeconfig CA that is no PEM", true, []byte("x"), nil, "the default client CA (the kubeconfig's)"},
		{"-client-ca-file wins over the kubeconfig's CA", true, []byte("x"), []string{"-client-ca-file", caFile}, ""},
		{"a requested serving certificate and a certificate file", true, nil,
			[]string{"-rotate-server-certificates", "-tls-cert-file", "c.pem", "-tls-private-key-file", "k.pem"}, "give one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseWith(t, &Server{Cluster: tc.cluster, DefaultClientCAs: tc.defaultCA}, tc.args...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error containing %q", err, tc.want)
			}
		})
	}
}

type noPods struct{}

func (noPods) Pods() []*v1.Pod { return nil }

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A port in use fails start-up with the flag and the address named, and
// the ports bound before are released (before, Serve said "Serving" and
// returned nil, and the agent ran on without its API).
func TestServeFailsOnAPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	hp := freePort(t)
	o, err := parse(t, false, "-healthz-port", strconv.Itoa(hp), "-port", strconv.Itoa(busy.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait, err := serve(ctx, o, server.Config{Pods: noPods{}}, logr.Discard())
	if err == nil {
		cancel()
		wait()
		t.Fatal("Serve started on a port in use")
	}
	if want := "-port " + busy.Addr().String(); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("err = %v, want it to name %q and say the address is in use", err, want)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(hp))
	if err != nil {
		t.Fatalf("the healthz port bound before the failure was not released: %v", err)
	}
	l.Close()
}

// The standalone agent with -client-ca-file and -anonymous-auth=false
// serves TLS with a self-signed certificate, and only to a client
// certificate the CA signed.
func TestServeAuthenticatesClientCertificates(t *testing.T) {
	ca, caFile := writeCA(t)
	port := freePort(t)
	o, err := parse(t, false, "-healthz-port", "0", "-port", strconv.Itoa(port), "-client-ca-file", caFile,
		"-anonymous-auth=false", "-cert-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o.NodeName = "n1"
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := serve(ctx, o, server.Config{Pods: noPods{}}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); wait() }()
	get := func(certs ...tls.Certificate) int {
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}} //nolint:gosec // self-signed serving certificate
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("https://127.0.0.1:" + strconv.Itoa(port) + "/pods")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != http.StatusUnauthorized {
		t.Errorf("no certificate: %d, want 401", code)
	}
	if code := get(clientCert(t, ca, "alice")); code != http.StatusOK {
		t.Errorf("a certificate of the client CA: %d, want 200", code)
	}
	other, _ := writeCA(t)
	if code := get(clientCert(t, other, "mallory")); code != http.StatusUnauthorized {
		t.Errorf("a certificate of another CA: %d, want 401", code)
	}
}

func TestSelfSignedCertNamesTheNodeAndIsReused(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	names := CertNames{DNS: []string{"n1", "host"}, IPs: []net.IP{net.ParseIP("10.0.0.5"), net.ParseIP("fd00::5")}}
	c, made, err := SelfSignedCert(dir, names, now)
	if err != nil || !made {
		t.Fatalf("made %v, err %v", made, err)
	}
	leaf := c.Leaf
	if got := leaf.DNSNames; len(got) != 2 || got[0] != "n1" || got[1] != "host" {
		t.Errorf("DNS names %v", got)
	}
	if got := leaf.IPAddresses; len(got) != 2 || !got[0].Equal(names.IPs[0]) || !got[1].Equal(names.IPs[1]) {
		t.Errorf("IPs %v", got)
	}
	if len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("ext key usage %v, want server auth", leaf.ExtKeyUsage)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "n1", Roots: pool, CurrentTime: now}); err != nil {
		t.Errorf("a client trusting the certificate cannot verify it for n1: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "kubelet.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", fi, err)
	}

	again, made, err := SelfSignedCert(dir, CertNames{DNS: []string{"n1"}, IPs: names.IPs[:1]}, now.Add(300*24*time.Hour))
	if err != nil || made || !again.Leaf.Equal(leaf) {
		t.Errorf("a valid certificate for the names is reused: made %v, err %v", made, err)
	}
	_, made, err = SelfSignedCert(dir, names, now.Add(365*24*time.Hour))
	if err != nil || !made {
		t.Errorf("an expiring certificate is made again: made %v, err %v", made, err)
	}
	moved := CertNames{DNS: names.DNS, IPs: []net.IP{net.ParseIP("10.0.0.6")}}
	c, made, err = SelfSignedCert(dir, moved, now)
	if err != nil || !made || !c.Leaf.IPAddresses[0].Equal(moved.IPs[0]) {
		t.Errorf("a new node IP makes a new certificate: made %v, err %v", made, err)
	}
}

func TestAProviderRuntimeServesOnlyWhatItsProviderHas(t *testing.T) {
	plain, err := provider.New(provider.Config{Provider: providertest.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	var cfg server.Config
	kubeletAPI(plain, &cfg)
	if cfg.Logs != nil || cfg.Streaming != nil || cfg.PortForward != nil {
		t.Errorf("a provider without logs, exec or port-forward: %+v", cfg)
	}
	streams, err := provider.New(provider.Config{Provider: providertest.NewStreams()})
	if err != nil {
		t.Fatal(err)
	}
	kubeletAPI(streams, &cfg)
	if cfg.Logs == nil || cfg.Streaming == nil || cfg.PortForward == nil {
		t.Errorf("a provider with them all: %+v", cfg)
	}
}
