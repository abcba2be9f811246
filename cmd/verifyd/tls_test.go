package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCA is a certificate authority the test makes, to sign the
// certificates verifyd serves and to be the client's only root.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "verifyd test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue writes a certificate for 127.0.0.1 with serial, and its key, to
// certFile and keyFile.
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "box.test"},
		DNSNames: []string{"box.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(12 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	// Written to new files then renamed, as a certificate manager does:
	// a reload never reads half a file.
	for _, f := range []struct {
		path string
		pem  []byte
	}{
		{certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
		{keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})},
	} {
		if err := os.WriteFile(f.path+".new", f.pem, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f.path+".new", f.path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHTTPS: verifyd serves its API over TLS from a certificate and key
// file, with HSTS; SIGHUP swaps in a renewed certificate while a
// keep-alive connection made before it goes on serving (no connection
// dropped) and new connections get the new one; a broken pair is refused
// with the running one kept; the plain-HTTP listener sends requests to
// HTTPS; -check-config reads the pair.
func TestHTTPS(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issue(t, 1001, certFile, keyFile)
	// The keys go in testConfig's [http] table.
	cfg := strings.Replace(testConfig, "[http]\n", "[http]\n"+fmt.Sprintf("tls_cert = %s\ntls_key = %s\nredirect_listen = \"127.0.0.1:0\"\n",
		quote(certFile), quote(keyFile)), 1)
	in := startIn(t, dir, cfg)
	if !strings.HasPrefix(in.base, "https://") {
		t.Fatalf("API at %s, want https", in.base)
	}
	client := func() *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 1}}
	}
	// get fetches path and reports the serial verifyd presented and whether
	// the request went on a connection opened before.
	get := func(c *http.Client, path string) (serial int64, reused bool, hsts string) {
		t.Helper()
		req, _ := http.NewRequest("GET", in.base+path, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.TLS == nil {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), reused, resp.Header.Get("Strict-Transport-Security")
	}
	old := client()
	if serial, _, hsts := get(old, "/healthz"); serial != 1001 || hsts != "max-age=31536000" {
		t.Fatalf("serial %d, HSTS %q; want 1001 and a year", serial, hsts)
	}

	ca.issue(t, 1002, certFile, keyFile)
	in.cmd.Process.Signal(syscall.SIGHUP)
	in.waitLog(t, "reloaded", "serial 1002")
	if serial, reused, _ := get(old, "/healthz"); !reused || serial != 1001 {
		t.Errorf("the connection opened before the reload: reused %v, serial %d; want it kept, with its certificate", reused, serial)
	}
	if serial, reused, _ := get(client(), "/healthz"); reused || serial != 1002 {
		t.Errorf("a new connection: reused %v, serial %d; want the renewed certificate", reused, serial)
	}

	// A key that is not the certificate's: refused, 1002 stays.
	if err := os.WriteFile(keyFile+".other", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	ca.issue(t, 1003, filepath.Join(other, "c.pem"), keyFile+".other")
	b, _ := os.ReadFile(keyFile + ".other")
	if err := os.WriteFile(keyFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	in.cmd.Process.Signal(syscall.SIGHUP)
	in.waitLog(t, "certificate not reloaded")
	if serial, _, _ := get(client(), "/healthz"); serial != 1002 {
		t.Errorf("after a refused reload: serial %d, want 1002", serial)
	}

	// The plain-HTTP listener.
	line := in.waitLog(t, "redirecting plain HTTP to HTTPS")
	m := regexp.MustCompile(`"listen":"([0-9.:]+)"`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no redirect address in %s", line)
	}
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Post("http://"+m[1]+"/v1/validate?x=1", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(in.base, "https://"))
	if want := "https://127.0.0.1:" + apiPort + "/v1/validate?x=1"; resp.StatusCode != 308 || resp.Header.Get("Location") != want {
		t.Errorf("plain HTTP: %d Location %q, want 308 %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	// Plain HTTP on the TLS port is not served.
	if resp, err := noFollow.Get("http://127.0.0.1:" + apiPort + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP answered on the HTTPS port")
		}
	}

	// -check-config reads the pair: the mismatched one fails.
	out, err := exec.Command(binary, "-check-config", "-config", filepath.Join(dir, "verifyd.toml")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "http.tls_cert") {
		t.Errorf("-check-config with a key of another certificate: %v %s", err, out)
	}

	// hsts_max_age = "0s" (while trying TLS out): no HSTS on any answer,
	// the dashboard's pages included.
	ca.issue(t, 1004, certFile, keyFile)
	off := startIn(t, t.TempDir(), strings.Replace(cfg, "[http]\n", "[http]\nhsts_max_age = \"0s\"\n", 1))
	for _, path := range []string{"/healthz", "/login"} {
		c := client()
		resp, err := c.Get(off.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") != "" {
			t.Errorf("hsts_max_age 0s, %s: %d, Strict-Transport-Security %q; want none", path, resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
		}
	}
}
