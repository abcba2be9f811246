package tlsserve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// DefaultACMEDirectory is http.acme_directory's default: Let's Encrypt's
// production directory (RFC 8555 §7.1.1).
const DefaultACMEDirectory = "https://acme-v02.api.letsencrypt.org/directory"

// ACMEOptions configure certificates from an ACME CA.
type ACMEOptions struct {
	// Hosts are the names a certificate is asked for, one each; a
	// handshake for any other name fails (no order is ever placed for a
	// name a client made up). A handshake without a server name (a client
	// that dials an IP address) gets Hosts[0]'s.
	Hosts []string
	// Email is the ACME account's contact, for the CA's expiry notices;
	// may be empty.
	Email string
	// Directory is the CA's directory URL; default DefaultACMEDirectory.
	Directory string
	// CAFile, when set, is a PEM file of the CAs that sign the ACME
	// server's own HTTPS certificate (a private CA such as step-ca, or a
	// test server), instead of the system's roots.
	CAFile string
	// CacheDir keeps the account key and the certificates (mode 0700):
	// a restart serves them again without a new order.
	CacheDir string
}

// ACME serves certificates obtained and renewed from an ACME CA
// (golang.org/x/crypto/acme/autocert): the first handshake for a host
// orders its certificate, with the tls-alpn-01 challenge answered by the
// HTTPS listener itself, or the http-01 one answered by the plain-HTTP
// listener (Challenge) when there is one; the Manager renews each a third
// of its lifetime before it ends (at most 30 days before: Let's Encrypt's
// 90-day certificates are renewed after 60).
type ACME struct {
	m     *autocert.Manager
	hosts []string
	http  fasthttp.RequestHandler

	mu      sync.Mutex
	expires map[string]time.Time // by host, of the certificate last served
}

// NewACME prepares the manager; nothing is ordered until a handshake
// needs it.
func NewACME(o ACMEOptions) (*ACME, error) {
	if len(o.Hosts) == 0 {
		return nil, fmt.Errorf("tls: acme: no host names")
	}
	if o.Directory == "" {
		o.Directory = DefaultACMEDirectory
	}
	client := &acme.Client{DirectoryURL: o.Directory, UserAgent: "verifyd"}
	if o.CAFile != "" {
		b, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: acme: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("tls: acme: %s holds no PEM certificate", o.CAFile)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		client.HTTPClient = &http.Client{Transport: tr, Timeout: time.Minute}
	}
	if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("tls: acme: %w", err)
	}
	a := &ACME{
		m: &autocert.Manager{
			Prompt:     autocert.AcceptTOS,
			HostPolicy: autocert.HostWhitelist(o.Hosts...),
			Cache:      autocert.DirCache(o.CacheDir),
			Email:      o.Email,
			Client:     client,
		},
		hosts:   o.Hosts,
		expires: map[string]time.Time{},
	}
	return a, nil
}

// Config is the TLS configuration of the HTTPS listener, which also
// answers the tls-alpn-01 challenge (RFC 8737).
func (a *ACME) Config() *tls.Config {
	c := Config(a.GetCertificate)
	c.NextProtos = append(c.NextProtos, acme.ALPNProto)
	return c
}

// GetCertificate is tls.Config.GetCertificate: the host's certificate,
// ordered on first use, renewed by the manager.
func (a *ACME) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if hello.ServerName == "" {
		h := *hello
		h.ServerName = a.hosts[0]
		hello = &h
	}
	c, err := a.m.GetCertificate(hello)
	if err != nil || c.Leaf == nil || len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == acme.ALPNProto {
		return c, err
	}
	a.mu.Lock()
	a.expires[strings.ToLower(hello.ServerName)] = c.Leaf.NotAfter
	soonest := c.Leaf.NotAfter
	for _, t := range a.expires {
		if t.Before(soonest) {
			soonest = t
		}
	}
	a.mu.Unlock()
	certExpiry.Store(soonest.Unix())
	return c, nil
}

// Challenge answers the http-01 challenges on the plain-HTTP listener
// (RFC 8555 §8.3), the claim of Redirect: it reports whether the request
// was one. Once Challenge is used, the manager offers http-01 too.
func (a *ACME) Challenge() func(*fasthttp.RequestCtx) bool {
	if a.http == nil {
		a.http = fasthttpadaptor.NewFastHTTPHandler(a.m.HTTPHandler(nil))
	}
	h := a.http
	return func(ctx *fasthttp.RequestCtx) bool {
		if !strings.HasPrefix(string(ctx.Path()), "/.well-known/acme-challenge/") {
			return false
		}
		h(ctx)
		return true
	}
}

// Prefetch orders (or loads from the cache) every host's certificate now,
// rather than at the first handshake, within ctx; it returns the first
// failure.
func (a *ACME) Prefetch(ctx context.Context) error {
	for _, h := range a.hosts {
		done := make(chan error, 1)
		go func() {
			_, err := a.GetCertificate(&tls.ClientHelloInfo{ServerName: h, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("tls: acme: %s: %w", h, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
