package tlsserve

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
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// testCert writes a certificate for name, valid from notBefore to
// notAfter with serial, and its key, into dir; it returns their paths.
func testCert(t *testing.T, dir, name string, serial int64, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestReload: a reload serves the new pair to new handshakes; a pair that
// does not load (garbage, a key of another certificate, an expired one)
// is refused and the running one kept.
func TestReload(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) // the test's clock, never the wall's
	clock := func() time.Time { return now }
	dir := t.TempDir()
	cf, kf := testCert(t, dir, "box.test", 1, now.Add(-time.Hour), now.Add(90*24*time.Hour))
	f, err := Load(cf, kf, clock)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		t.Helper()
		c, err := f.GetCertificate(&tls.ClientHelloInfo{ServerName: "box.test"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber.Int64()
	}
	if serial() != 1 {
		t.Fatalf("serial %d, want 1", serial())
	}
	testCert(t, dir, "box.test", 2, now.Add(-time.Hour), now.Add(90*24*time.Hour))
	if err := f.Reload(cf, kf); err != nil || serial() != 2 {
		t.Fatalf("reload: %v; serial %d, want 2", err, serial())
	}

	other := t.TempDir()
	_, otherKey := testCert(t, other, "box.test", 3, now.Add(-time.Hour), now.Add(time.Hour))
	expiredDir := t.TempDir()
	ecf, ekf := testCert(t, expiredDir, "box.test", 4, now.Add(-48*time.Hour), now.Add(-time.Hour))
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, cert, key, want string }{
		{"garbage", garbage, kf, "cannot load"},
		{"missing", filepath.Join(dir, "nope.pem"), kf, "cannot load"},
		{"another key", cf, otherKey, "cannot load"},
		{"expired", ecf, ekf, "expired"},
	} {
		if err := f.Reload(c.cert, c.key); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
		if serial() != 2 {
			t.Errorf("%s: serial %d after a refused reload, want 2 (the running one)", c.name, serial())
		}
	}
	if err := Check(ecf, ekf, clock); err == nil {
		t.Error("Check passed an expired certificate")
	}
	if got := f.Leaf().NotAfter; !got.Equal(now.Add(90 * 24 * time.Hour)) {
		t.Errorf("Leaf NotAfter %v", got)
	}
}

// TestRedirect: every request goes to the same host and path over HTTPS,
// the port only when not 443, an IPv6 host in brackets; a Host that could
// smuggle another destination is refused; an absolute-form target cannot
// move the host; a claimed request is left to its claimer.
func TestRedirect(t *testing.T) {
	h := Redirect("8443", func(ctx *fasthttp.RequestCtx) bool {
		if strings.HasPrefix(string(ctx.Path()), "/.well-known/acme-challenge/") {
			ctx.SetBodyString("token")
			return true
		}
		return false
	})
	for _, c := range []struct {
		host, uri string
		status    int
		loc       string
	}{
		{"box.test", "/v1/balance?x=1", 308, "https://box.test:8443/v1/balance?x=1"},
		{"box.test:80", "/", 308, "https://box.test:8443/"},
		{"[::1]:80", "/a", 308, "https://[::1]:8443/a"},
		{"evil.test/x", "/", 400, ""},
		{"box.test@evil.test", "/", 400, ""},
		{"box.test", "http://evil.test/steal", 308, "https://box.test:8443/steal"},
		{"box.test", "/.well-known/acme-challenge/abc", 200, ""},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(c.uri)
		ctx.Request.Header.SetHost(c.host)
		h(&ctx)
		if got := ctx.Response.StatusCode(); got != c.status || string(ctx.Response.Header.Peek("Location")) != c.loc {
			t.Errorf("Host %q %s: %d Location %q, want %d %q", c.host, c.uri, got, ctx.Response.Header.Peek("Location"), c.status, c.loc)
		}
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/x")
	ctx.Request.Header.SetHost("box.test")
	Redirect("443", nil)(&ctx)
	if loc := string(ctx.Response.Header.Peek("Location")); loc != "https://box.test/x" {
		t.Errorf("port 443: Location %q", loc)
	}
}

func TestHSTS(t *testing.T) {
	if got := HSTS(DefaultHSTSMaxAge); got != "max-age=31536000" {
		t.Errorf("HSTS %q", got)
	}
	if got := HSTS(0); got != "" {
		t.Errorf("HSTS(0) %q", got)
	}
}
