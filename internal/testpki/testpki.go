// Package testpki makes throwaway certificate authorities and node
// certificates for tests of the TLS options (client HTTPS and mutual TLS on
// the Raft transport). Keys are ECDSA P-256: quick to make, and real.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that lives for one test.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	// Pool holds only this CA: what a client or server trusting it uses.
	Pool *x509.CertPool
	key  *ecdsa.PrivateKey
}

// Files are the PEM files of one issued certificate, with its CA's.
type Files struct {
	Cert, Key, CA string
}

// NewCA makes a self-signed CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testpki: CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"edgebase tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testpki: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testpki: parse CA certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Pool: pool, key: key}
}

// Issue makes a certificate for name, valid for both server and client
// authentication (mutual TLS uses one certificate per node in both roles),
// with SANs 127.0.0.1, ::1 and localhost plus any extra hosts.
func (ca *CA) Issue(t testing.TB, name string, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testpki: key for %s: %v", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testpki: certificate for %s: %v", name, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("testpki: encode key for %s: %v", name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// TLSCertificate is Issue as a tls.Certificate (for test clients and servers).
func (ca *CA) TLSCertificate(t testing.TB, name string) tls.Certificate {
	t.Helper()
	c, k := ca.Issue(t, name)
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatalf("testpki: key pair for %s: %v", name, err)
	}
	return cert
}

// WriteFiles issues a certificate for name and writes name.crt, name.key
// and (once) ca.crt into dir.
func (ca *CA) WriteFiles(t testing.TB, dir, name string) Files {
	t.Helper()
	c, k := ca.Issue(t, name)
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: ca.WriteCA(t, dir)}
	if err := os.WriteFile(f.Cert, c, 0o600); err != nil {
		t.Fatalf("testpki: %v", err)
	}
	if err := os.WriteFile(f.Key, k, 0o600); err != nil {
		t.Fatalf("testpki: %v", err)
	}
	return f
}

// WriteCA writes the CA certificate to dir/ca.crt and returns its path.
func (ca *CA) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(p, ca.CertPEM, 0o600); err != nil {
		t.Fatalf("testpki: %v", err)
	}
	return p
}

// ClientConfig trusts only this CA.
func (ca *CA) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		t.Fatalf("testpki: serial: %v", err)
	}
	return n
}
