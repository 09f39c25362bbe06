package connector_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testPKI is a certificate authority, a server certificate it signed for
// serverName (and no IP address, so that a client must be told the name),
// and a client certificate it signed, all written as PEM files.
type testPKI struct {
	caFile, certFile, keyFile string // the client's files
	server                    tls.Certificate
	pool                      *x509.CertPool
}

const serverName = "broker.internal"

func newPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage, dns ...string) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: dns,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	sDER, sKey := leaf(2, x509.ExtKeyUsageServerAuth, serverName)
	cDER, cKey := leaf(3, x509.ExtKeyUsageClientAuth)
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pki := testPKI{
		caFile:   write("ca.pem", "CERTIFICATE", caDER),
		certFile: write("client.pem", "CERTIFICATE", cDER),
		keyFile:  write("client-key.pem", "EC PRIVATE KEY", keyDER(cKey)),
		server:   tls.Certificate{Certificate: [][]byte{sDER}, PrivateKey: sKey},
		pool:     x509.NewCertPool(),
	}
	pki.pool.AddCert(ca)
	return pki
}

// tlsProxy listens on 127.0.0.1 with the PKI's server certificate,
// requires a client certificate signed by its CA, records the outcome of
// every TLS handshake and forwards the connections that pass to backend.
// Everything is closed and awaited at t's cleanup.
type tlsProxy struct {
	addr string

	mu         sync.Mutex
	passed     int     // handshakes completed with a verified client certificate
	handshakes []error // the failed ones
}

func newTLSProxy(t *testing.T, pki testPKI, backend string) *tlsProxy {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pki.server},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pki.pool,
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &tlsProxy{addr: ln.Addr().String()}
	var (
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		p.mu.Lock()
		conns = append(conns, c)
		p.mu.Unlock()
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Go(func() {
				err := c.(*tls.Conn).Handshake()
				p.mu.Lock()
				if err != nil {
					p.handshakes = append(p.handshakes, err)
				} else {
					p.passed++
				}
				p.mu.Unlock()
				if err != nil {
					_ = c.Close()
					return
				}
				b, err := net.Dial("tcp", backend)
				if err != nil {
					_ = c.Close()
					return
				}
				track(b)
				var pipes sync.WaitGroup
				pipes.Go(func() { _, _ = io.Copy(b, c); _ = b.Close() })
				pipes.Go(func() { _, _ = io.Copy(c, b); _ = c.Close() })
				pipes.Wait()
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	return p
}

// outcome returns how many handshakes passed and the failures seen.
func (p *tlsProxy) outcome() (int, []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.passed, append([]error(nil), p.handshakes...)
}
