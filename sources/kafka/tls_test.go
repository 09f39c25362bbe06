package kafka_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// selfSigned returns a certificate for 127.0.0.1, signed by itself, and a
// pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

// Guarantee: the TLS settings of Config reach every connection of the
// sarama source (the connection check's, the client's and the group's):
// a cluster that speaks only TLS is consumed, through the tls.Config
// given, which verifies the cluster's certificate.
func TestTheConfigsTLSSettingsReachTheConnections(t *testing.T) {
	cert, pool := selfSigned(t)
	c := newCluster(t, 1, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	ends := produce(t, c, 1, 0, 10, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	var handshakes atomic.Int64
	o := sourceOptions(c, "g-tls")
	o.Config.Net.TLS.Enable = true
	o.Config.Net.TLS.Config = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12,
		VerifyConnection: func(tls.ConnectionState) error { handshakes.Add(1); return nil }}
	l := newLedger()
	done := runOnceInto(t, "tls", newSource(t, o), l)
	wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) }, func() string {
		select {
		case err := <-done:
			return fmt.Sprintf("Run returned %v", err)
		default:
			return "Run still running"
		}
	})
	expectRunning(t, done, "while consuming through TLS")
	if handshakes.Load() == 0 {
		t.Error("the records came through no handshake of the tls.Config given")
	}
}
