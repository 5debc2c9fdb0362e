package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material of one cluster, PEM-encoded.
type pki struct {
	caCert                    []byte
	ca                        *x509.Certificate
	caKey                     *ecdsa.PrivateKey
	kubeletClientCert         []byte // the apiserver's, to the kubelets
	kubeletClientKey          []byte
	servingCert, servingKey   []byte
	adminCert, adminKey       []byte
	saPublicKey, saSigningKey []byte
}

// newPKI makes a CA, a serving certificate for the apiserver on loopback, an
// admin client certificate (group system:masters), the apiserver's client
// certificate to the kubelets (as kubeadm's apiserver-kubelet-client, group
// system:masters) and a service-account signing key pair.
func newPKI() (*pki, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nodekit-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p := &pki{caCert: pemBlock("CERTIFICATE", caDER), ca: ca, caKey: caKey}
	leaf := func(serial int64, tmpl *x509.Certificate) ([]byte, []byte, error) {
		return p.sign(serial, tmpl, now)
	}
	p.servingCert, p.servingKey, err = leaf(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)},
	})
	if err != nil {
		return nil, err
	}
	p.adminCert, p.adminKey, err = leaf(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "nodekit-e2e-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	p.kubeletClientCert, p.kubeletClientKey, err = leaf(4, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saPriv, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	p.saSigningKey, p.saPublicKey = pemBlock("PRIVATE KEY", saPriv), pemBlock("PUBLIC KEY", saPub)
	return p, nil
}

// sign makes a certificate from tmpl (its serial, validity and key usage
// set here) with a new key, signed by the CA.
func (p *pki) sign(serial int64, tmpl *x509.Certificate, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

// write stores the files the apiserver reads into dir.
func (p *pki) write(dir string) error {
	for name, data := range map[string][]byte{
		"ca.crt":                       p.caCert,
		"apiserver.crt":                p.servingCert,
		"apiserver.key":                p.servingKey,
		"sa.pub":                       p.saPublicKey,
		"sa.key":                       p.saSigningKey,
		"admin.crt":                    p.adminCert,
		"admin.key":                    p.adminKey,
		"apiserver-kubelet-client.crt": p.kubeletClientCert,
		"apiserver-kubelet-client.key": p.kubeletClientKey,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("cluster: writing %s: %w", name, err)
		}
	}
	return nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
