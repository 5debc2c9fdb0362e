package nodeflags

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// CertNames are what a serving certificate is for.
type CertNames struct {
	DNS []string
	IPs []net.IP
}

// The kubelet's self-signed serving certificate's files in its cert dir,
// and how long one is made for (a year, as the kubelet's).
const (
	certFile     = "kubelet.crt"
	keyFile      = "kubelet.key"
	certValidity = 365 * 24 * time.Hour
)

// SelfSignedCert returns the self-signed serving certificate in dir
// (kubelet.crt, kubelet.key), as the kubelet does without
// --tls-cert-file: the one there if it is valid at now and names every
// DNS name and IP of names, else a new one for names, written there
// (made says which). The first DNS name is its subject.
func SelfSignedCert(dir string, names CertNames, now time.Time) (cert tls.Certificate, made bool, err error) {
	cp, kp := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	// one missing, unreadable, expired or for other names is made again
	if c, err := tls.LoadX509KeyPair(cp, kp); err == nil && certCovers(c.Leaf, names, now) {
		return c, false, nil
	}
	certPEM, keyPEM, err := newSelfSigned(names, now)
	if err != nil {
		return tls.Certificate{}, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, false, err
	}
	if err := writeAtomic(kp, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, false, err
	}
	if err := writeAtomic(cp, certPEM, 0o644); err != nil {
		return tls.Certificate{}, false, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	return c, true, err
}

// certCovers says whether c is valid at now (with an hour to spare) and
// names everything in names.
func certCovers(c *x509.Certificate, names CertNames, now time.Time) bool {
	if c == nil || now.Before(c.NotBefore) || !now.Add(time.Hour).Before(c.NotAfter) {
		return false
	}
	for _, d := range names.DNS {
		if !slices.Contains(c.DNSNames, d) {
			return false
		}
	}
	for _, ip := range names.IPs {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func newSelfSigned(names CertNames, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	cn := "nodekit"
	if len(names.DNS) > 0 {
		cn = names.DNS[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", cn, now.Unix())},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // self-signed: its own CA, so clients can trust it alone
		DNSNames:              slices.Clone(names.DNS),
		IPAddresses:           slices.Clone(names.IPs),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writeAtomic writes data to path through a temporary file, so that a
// crash leaves the old file or the new one.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
