// Package certs writes throw-away TLS material for tests: a CA, and server
// and client certificates it signs for 127.0.0.1 and localhost.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// Files are the PEM files of one set, in one directory.
type Files struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// Write creates a CA and a server and a client certificate signed by it in
// dir, valid for an hour.
func Write(t testing.TB, dir string) Files {
	t.Helper()
	caKey, caCert, caDER := newCert(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature})
	f := Files{CA: filepath.Join(dir, "ca.crt"), ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey: filepath.Join(dir, "server.key"), ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey: filepath.Join(dir, "client.key")}
	writePEM(t, f.CA, "CERTIFICATE", caDER)
	for _, c := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
	}{{f.ServerCert, f.ServerKey, x509.ExtKeyUsageServerAuth}, {f.ClientCert, f.ClientKey, x509.ExtKeyUsageClientAuth}} {
		key, _, der := newCert(t, caCert, caKey, &x509.Certificate{
			Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{c.usage},
			KeyUsage: x509.KeyUsageDigitalSignature})
		writePEM(t, c.cert, "CERTIFICATE", der)
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, c.key, "EC PRIVATE KEY", keyDER)
	}
	return f
}

func newCert(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
