package world

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// worldTLS is the process's certificate and the server configurations
// built on it, made on first use.
var worldTLS struct {
	once                sync.Once
	cert                tls.Certificate
	tls10, tls12, tls13 *tls.Config
	err                 error
}

// Certificate returns the self-signed ECDSA P-256 certificate that every
// host of every world presents after STARTTLS (RFC 3207). It is made once
// per process, for the name "mailworld" with the DNS names "mailworld",
// "*.test" and "localhost"; a host name deeper than one label under .test
// does not match it, so a client checks it by pinning (Leaf is set), not by
// name. Hosts have no certificate of their own: one certificate keeps the
// handshake small for worlds of thousands of hosts.
func Certificate() (tls.Certificate, error) {
	worldTLS.once.Do(initTLS)
	return worldTLS.cert, worldTLS.err
}

// serverTLSConfig returns the server configuration for a host whose
// Host.TLS is version ("1.2" or "1.3"): TLS 1.2 at least, version at most.
func serverTLSConfig(version string) (*tls.Config, error) {
	worldTLS.once.Do(initTLS)
	if worldTLS.err != nil {
		return nil, worldTLS.err
	}
	switch version {
	case "1.0":
		return worldTLS.tls10, nil
	case "1.2":
		return worldTLS.tls12, nil
	case "1.3":
		return worldTLS.tls13, nil
	}
	return nil, fmt.Errorf("world: tls must be \"1.2\" or \"1.3\", not %q", version)
}

func initTLS() {
	cert, err := makeCertificate()
	if err != nil {
		worldTLS.err = err
		return
	}
	worldTLS.cert = cert
	// An old server: TLS 1.0 only, with the CBC suites it had.
	worldTLS.tls10 = &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS10,
		MaxVersion:   tls.VersionTLS10,
	}
	worldTLS.tls12 = &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		MaxVersion:   tls.VersionTLS12,
	}
	worldTLS.tls13 = &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		MaxVersion:   tls.VersionTLS13,
	}
}

func makeCertificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("world: cannot make TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("world: cannot make certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "mailworld", Organization: []string{"verifyd simulated mail world"}},
		DNSNames:              []string{"mailworld", "*.test", "localhost"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // self-signed: lets a client pin it as its own root
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("world: cannot make certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("world: cannot parse certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
