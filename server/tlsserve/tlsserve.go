// Package tlsserve is verifyd's own HTTPS, an alternative to a reverse
// proxy in front of it: the certificate and key from PEM files (Files),
// read again on SIGHUP with no connection dropped; the TLS configuration
// the API listener serves with (Config); the plain-HTTP listener that only
// sends browsers and clients to HTTPS (Redirect); and the HSTS header value
// (HSTS). The README's "HTTPS" section is the operator's guide.
//
// A certificate is taken per handshake from an atomic pointer
// (tls.Config.GetCertificate): a reload swaps the pointer, connections
// already open keep the session they made, new ones get the new
// certificate. A pair that does not load (a missing file, a key that does
// not match, a certificate already expired) is refused and the running one
// kept.
package tlsserve

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
)

// Metrics:
//
//	verifyd_tls_cert_expiry_timestamp_seconds  when the served certificate expires (Unix seconds)
//	verifyd_tls_cert_reloads_total{result}     certificate reloads: "ok", "refused"
//	verifyd_tls_redirects_total                requests the plain-HTTP listener sent to HTTPS
var (
	certExpiry     atomic.Int64
	reloadsOK      = metrics.NewCounter(`verifyd_tls_cert_reloads_total{result="ok"}`)
	reloadsRefused = metrics.NewCounter(`verifyd_tls_cert_reloads_total{result="refused"}`)
	redirects      = metrics.NewCounter(`verifyd_tls_redirects_total`)
)

func init() {
	metrics.NewGauge(`verifyd_tls_cert_expiry_timestamp_seconds`, func() float64 { return float64(certExpiry.Load()) })
}

// Files serves the certificate and key of two PEM files.
type Files struct {
	certFile, keyFile string
	now               func() time.Time
	cur               atomic.Pointer[tls.Certificate]
}

// Load reads the pair; now is the clock that judges expiry (nil:
// time.Now).
func Load(certFile, keyFile string, now func() time.Time) (*Files, error) {
	if now == nil {
		now = time.Now
	}
	f := &Files{certFile: certFile, keyFile: keyFile, now: now}
	if err := f.Reload(certFile, keyFile); err != nil {
		return nil, err
	}
	return f, nil
}

// Check loads the pair as Load would and serves nothing: verifyd
// -check-config.
func Check(certFile, keyFile string, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	_, err := loadPair(certFile, keyFile, now())
	return err
}

// Reload reads the pair again, from these paths from now on (the
// configuration may have named others); on an error the running
// certificate stays.
func (f *Files) Reload(certFile, keyFile string) error {
	c, err := loadPair(certFile, keyFile, f.now())
	if err != nil {
		reloadsRefused.Inc()
		return err
	}
	f.certFile, f.keyFile = certFile, keyFile
	f.cur.Store(c)
	certExpiry.Store(c.Leaf.NotAfter.Unix())
	reloadsOK.Inc()
	return nil
}

// Leaf is the certificate served now.
func (f *Files) Leaf() *x509.Certificate { return f.cur.Load().Leaf }

// GetCertificate is tls.Config.GetCertificate.
func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.cur.Load(), nil
}

func loadPair(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: cannot load %s and %s: %w", certFile, keyFile, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: %s: %w", certFile, err)
		}
	}
	if now.After(c.Leaf.NotAfter) {
		return nil, fmt.Errorf("tls: %s expired on %s", certFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &c, nil
}

// Config is the API listener's TLS configuration: TLS 1.2 and 1.3 with Go's
// default cipher suites (Mozilla's "intermediate" profile), HTTP/1.1 (the
// API server speaks no HTTP/2), the certificate from get.
func Config(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: get,
	}
}

// DefaultHSTSMaxAge is http.hsts_max_age's default: a year, as the HSTS
// preload list asks (a shorter one is allowed).
const DefaultHSTSMaxAge = 365 * 24 * time.Hour

// HSTS is the Strict-Transport-Security header's value for maxAge (RFC
// 6797 §6.1), "" for none (maxAge ≤ 0). It covers this host only: a box
// does not speak for its parent domain's other hosts.
func HSTS(maxAge time.Duration) string {
	if maxAge <= 0 {
		return ""
	}
	return "max-age=" + strconv.FormatInt(int64(maxAge/time.Second), 10)
}

// Redirect answers every request of the plain-HTTP listener with a 308 to
// the same host and path over HTTPS at httpsPort ("" or "443": the
// default port), so that a POST stays a POST; claim, when set, answers
// first the requests it takes (the ACME http-01 challenges) and reports
// whether it did. The host is the request's own, without its port: a
// client is never sent elsewhere.
func Redirect(httpsPort string, claim func(*fasthttp.RequestCtx) bool) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if claim != nil && claim(ctx) {
			return
		}
		host := string(ctx.Request.Header.Host()) // the header, not an absolute-form target's
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if host == "" || !validHost(host) {
			ctx.Error("HTTPS only; no usable Host header", fasthttp.StatusBadRequest)
			return
		}
		if strings.Contains(host, ":") {
			host = "[" + host + "]" // an IPv6 address
		}
		if httpsPort != "" && httpsPort != "443" {
			host += ":" + httpsPort
		}
		redirects.Inc()
		// The parsed path and query, never an absolute-form request target.
		ctx.Response.Header.Set("Location", "https://"+host+string(ctx.URI().RequestURI()))
		ctx.Response.Header.Set("Cache-Control", "no-store")
		ctx.SetStatusCode(fasthttp.StatusPermanentRedirect)
	}
}

// validHost reports whether h can go into a URL's host as it is: letters,
// digits, '-', '.', and ':' for an IPv6 address; nothing that could end the
// host or start a path.
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}
