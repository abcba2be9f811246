package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"

	"github.com/verifyd/verifyd/bench/world"
)

// freeLoopbackPort returns a TCP port free on 127.0.0.1 a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestACME: verifyd gets its certificate from a real ACME server —
// Let's Encrypt's Pebble, run in the test on loopback, whose validation
// authority resolves box.test through the simulated world's DNS and
// connects to verifyd's HTTPS listener for the tls-alpn-01 challenge —
// serves it, keeps it in the data directory, and renews it before it ends
// (Pebble issues for 30 s here; autocert renews a third of the lifetime
// before the end).
func TestACME(t *testing.T) {
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	run := startWorld(t, &world.World{Domains: []*world.Domain{{Name: "box.test", A: []string{"127.0.0.1"}}}})
	port := freeLoopbackPort(t)

	logger := log.New(io.Discard, "", 0)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {ValidityPeriod: 30}})
	validator := va.New(logger, 0, port, false, run.DNS.Addr(), store)
	front := wfe.New(logger, store, validator, authority, nil, false, false, 0, 0)
	acmeSrv := httptest.NewUnstartedServer(front.Handler())
	acmeSrv.StartTLS()
	t.Cleanup(acmeSrv.Close)

	dir := t.TempDir()
	acmeCA := filepath.Join(dir, "acme-ca.pem")
	if err := os.WriteFile(acmeCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: acmeSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
log_format = "json"
[http]
listen = "127.0.0.1:%d"
acme_hosts = ["box.test"]
acme_email = "ops@box.test"
acme_directory = %s
acme_ca_file = %s
[metrics]
listen = "127.0.0.1:0"
`, port, quote(acmeSrv.URL+"/dir"), quote(acmeCA))
	in := startIn(t, dir, cfg)
	in.waitLog(t, "serving HTTPS with certificates from the ACME CA")

	roots := x509.NewCertPool()
	roots.AddCert(authority.GetRootCert(0).Cert)
	// serial makes a new connection to box.test (at 127.0.0.1) trusting
	// Pebble's root only, and returns the certificate's serial.
	serial := func() string {
		t.Helper()
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "box.test", MinVersion: tls.VersionTLS12},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
			}}}
		defer c.CloseIdleConnections()
		resp, err := c.Get("https://box.test/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("healthz over the ACME certificate: %d", resp.StatusCode)
		}
		leaf := resp.TLS.PeerCertificates[0]
		if leaf.Subject.CommonName != "box.test" && !strings.Contains(strings.Join(leaf.DNSNames, " "), "box.test") {
			t.Fatalf("certificate for %v", leaf.DNSNames)
		}
		return leaf.SerialNumber.String()
	}
	first := serial()
	if _, err := os.Stat(filepath.Join(dir, "data", "acme", "box.test")); err != nil {
		t.Errorf("the certificate is not kept in the data directory: %v", err)
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		if s := serial(); s != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the certificate (serial %s, valid 30 s) was not renewed", first)
		}
	}
}
