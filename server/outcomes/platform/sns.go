package platform

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultSNSHosts are the hosts SNS names in SigningCertURL and
// SubscribeURL: sns.<region>.amazonaws.com. The China regions
// (amazonaws.com.cn) need "sns.*.amazonaws.com.cn" added.
var DefaultSNSHosts = []string{"sns.*.amazonaws.com"}

// Defaults of an SNS.
const (
	DefaultSNSTimeout   = 10 * time.Second
	DefaultSNSCacheSize = 64
	DefaultSNSCacheTTL  = 12 * time.Hour
	// MaxCertSize is the largest signing certificate file fetched.
	MaxCertSize = 64 << 10
	// maxURL is the longest URL a message may name.
	maxURL = 2048
)

// The SNS message types (the envelope's Type).
const (
	snsNotification = "Notification"
	snsSubscribe    = "SubscriptionConfirmation"
	snsUnsubscribe  = "UnsubscribeConfirmation"
)

// SNS receives Amazon SES events through Amazon SNS: it verifies each
// message's signature with the signing certificate it names, fetched
// from an allowed host only, confirms subscriptions, and reads the SES
// events of notifications. The zero value works with the defaults; set
// the fields before the first Receive and do not copy an SNS after it.
type SNS struct {
	// AllowedHosts are the host patterns a SigningCertURL or a
	// SubscribeURL may name: DNS names where "*" stands for exactly one
	// label, with ":port" when the port is not 443. Nil means
	// DefaultSNSHosts.
	AllowedHosts []string
	// Roots are the roots a signing certificate must chain to; nil
	// means the system's.
	Roots *x509.CertPool
	// Intermediates are certificates that may complete a signing
	// certificate's chain, besides those its file holds. SNS serves the
	// signing certificate alone, so production needs the CA certificates
	// that issue it here (README.md).
	Intermediates *x509.CertPool
	// Client makes the requests (its redirects are never followed); nil
	// means a client of its own.
	Client *http.Client
	// Timeout bounds each request; 0 means DefaultSNSTimeout.
	Timeout time.Duration
	// CacheSize is how many signing certificates are kept, by URL; 0
	// means DefaultSNSCacheSize.
	CacheSize int
	// CacheTTL is how long one is kept (never past its expiry); 0 means
	// DefaultSNSCacheTTL.
	CacheTTL time.Duration
	// MaxAge, when positive, refuses a message whose signed Timestamp
	// is more than MaxAge from now. 0, the default, takes any age: SNS
	// retries a delivery as long as the subscription's delivery policy
	// says, always with the Timestamp of the publication, and a replayed
	// message yields the same event ids, which storage keeps once.
	MaxAge time.Duration
	// Now is the clock certificates (and MaxAge) are checked against;
	// nil means time.Now.
	Now func() time.Time

	mu    sync.Mutex
	certs map[string]*certEntry
}

// certEntry is a fetched signing certificate file, parsed.
type certEntry struct {
	leaf    *x509.Certificate
	chain   []*x509.Certificate // the file's other certificates
	expires time.Time
}

// Validate reports every problem of s's settings.
func (s *SNS) Validate() error {
	var errs []error
	for _, p := range s.AllowedHosts {
		if err := checkHostPattern(p); err != nil {
			errs = append(errs, err)
		}
	}
	if s.AllowedHosts != nil && len(s.AllowedHosts) == 0 {
		errs = append(errs, errors.New("sns: no allowed hosts"))
	}
	if s.Timeout < 0 || s.CacheSize < 0 || s.CacheTTL < 0 || s.MaxAge < 0 {
		errs = append(errs, errors.New("sns: timeout, cache size, cache TTL and max age must not be negative"))
	}
	return errors.Join(errs...)
}

// snsMessage is the JSON body SNS posts (the HTTP/HTTPS notification
// and subscription confirmation JSON formats).
type snsMessage struct {
	Type             string  `json:"Type"`
	MessageID        string  `json:"MessageId"`
	Token            string  `json:"Token"`
	TopicArn         string  `json:"TopicArn"`
	Subject          *string `json:"Subject"`
	Message          string  `json:"Message"`
	Timestamp        string  `json:"Timestamp"`
	SignatureVersion string  `json:"SignatureVersion"`
	Signature        string  `json:"Signature"`
	SigningCertURL   string  `json:"SigningCertURL"`
	SubscribeURL     string  `json:"SubscribeURL"`
}

// stringToSign is what SNS signs: name and value of each signed field,
// each followed by a newline, in AWS's fixed order. A notification signs
// Message, MessageId, Subject (only when present), Timestamp, TopicArn
// and Type; a confirmation Message, MessageId, SubscribeURL, Timestamp,
// Token, TopicArn and Type.
func (m *snsMessage) stringToSign() []byte {
	var b strings.Builder
	add := func(name, value string) {
		b.WriteString(name)
		b.WriteByte('\n')
		b.WriteString(value)
		b.WriteByte('\n')
	}
	add("Message", m.Message)
	add("MessageId", m.MessageID)
	if m.Type == snsNotification {
		if m.Subject != nil {
			add("Subject", *m.Subject)
		}
	} else {
		add("SubscribeURL", m.SubscribeURL)
	}
	add("Timestamp", m.Timestamp)
	if m.Type != snsNotification {
		add("Token", m.Token)
	}
	add("TopicArn", m.TopicArn)
	add("Type", m.Type)
	return []byte(b.String())
}

// parseSNS reads an SNS message and checks it names all that its type
// needs. An unsigned body is ErrSignature.
func parseSNS(body []byte) (*snsMessage, error) {
	var m snsMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, refuse(ErrPayload, NameSES, nil, "not an SNS message: not a JSON object")
	}
	switch {
	case m.Signature == "":
		return nil, refuse(ErrSignature, NameSES, nil, "unsigned: not an SNS message, or raw message delivery is on")
	case m.Type != snsNotification && m.Type != snsSubscribe && m.Type != snsUnsubscribe:
		return nil, refuse(ErrPayload, NameSES, nil, "unknown SNS message type %.40q", m.Type)
	case m.SignatureVersion != "1" && m.SignatureVersion != "2":
		return nil, refuse(ErrSignature, NameSES, nil, "unknown signature version %.10q", m.SignatureVersion)
	case m.MessageID == "" || m.TopicArn == "" || m.Timestamp == "" || m.SigningCertURL == "":
		return nil, refuse(ErrPayload, NameSES, nil, "%s without MessageId, TopicArn, Timestamp or SigningCertURL", m.Type)
	case m.Type != snsNotification && (m.SubscribeURL == "" || m.Token == ""):
		return nil, refuse(ErrPayload, NameSES, nil, "%s without SubscribeURL or Token", m.Type)
	}
	return &m, nil
}

// Receive takes the body of a POST from SNS to an account whose topics
// are allowedTopics (ARNs). It refuses a topic that is not one of them
// before anything else, so it fetches nothing for another's topic (nor,
// with MaxAge, for a stale message). Then it checks the signing
// certificate's URL against AllowedHosts, fetches the certificate (or
// takes it from the cache), checks its chain and validity, and verifies
// the signature: SHA1withRSA for SignatureVersion 1, SHA256withRSA for
// 2. A verified notification yields the SES events its Message holds; a
// verified subscription confirmation is confirmed with a GET of its
// SubscribeURL (on an allowed host too) and yields Result.Confirmed; a
// verified unsubscribe confirmation yields nothing.
func (s *SNS) Receive(ctx context.Context, body []byte, allowedTopics []string) (Result, error) {
	m, err := parseSNS(body)
	if err != nil {
		return Result{}, err
	}
	if !slices.Contains(allowedTopics, m.TopicArn) {
		return Result{}, refuse(ErrNotAllowed, NameSES, nil, "topic %.256q is not one of the account's", m.TopicArn)
	}
	if s.MaxAge > 0 && !fresh(parseTime(m.Timestamp), s.now(), s.MaxAge) {
		return Result{}, refuse(ErrSignature, NameSES, nil, "timestamp %.40q more than %v from now", m.Timestamp, s.MaxAge)
	}
	if _, err := s.checkURL(m.SigningCertURL, true); err != nil {
		snsURLsRefused.Inc()
		return Result{}, refuse(ErrNotAllowed, NameSES, err, "signing certificate URL")
	}
	leaf, err := s.certificate(ctx, m.SigningCertURL)
	if err != nil {
		return Result{}, err
	}
	if err := verifySNS(m, leaf); err != nil {
		return Result{}, refuse(ErrSignature, NameSES, err, "signature does not verify")
	}
	switch m.Type {
	case snsSubscribe:
		if _, err := s.checkURL(m.SubscribeURL, false); err != nil {
			snsURLsRefused.Inc()
			return Result{}, refuse(ErrNotAllowed, NameSES, err, "subscribe URL")
		}
		if _, err := s.get(ctx, m.SubscribeURL); err != nil {
			return Result{}, refuse(ErrUnavailable, NameSES, err, "cannot confirm the subscription")
		}
		snsConfirmed.Inc()
		return Result{Confirmed: true}, nil
	case snsUnsubscribe:
		return Result{}, nil
	}
	return parseSES(m.MessageID, m.Message, parseTime(m.Timestamp))
}

// verifySNS checks m's signature with the certificate's key.
func verifySNS(m *snsMessage, leaf *x509.Certificate) error {
	pub, ok := leaf.PublicKey.(*rsa.PublicKey)
	if !ok {
		return errors.New("the signing certificate's key is not RSA")
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil {
		return errors.New("the signature is not base64")
	}
	var hash crypto.Hash
	var digest []byte
	if m.SignatureVersion == "1" {
		d := sha1.Sum(m.stringToSign())
		hash, digest = crypto.SHA1, d[:]
	} else {
		d := sha256.Sum256(m.stringToSign())
		hash, digest = crypto.SHA256, d[:]
	}
	return rsa.VerifyPKCS1v15(pub, hash, digest, sig)
}

// certificate is the signing certificate at rawURL, from the cache or
// fetched, checked against the roots at s's time: every use checks it
// anew, so one that expires while cached is refused.
func (s *SNS) certificate(ctx context.Context, rawURL string) (*x509.Certificate, error) {
	now := s.now()
	e := s.cached(rawURL, now)
	if e != nil {
		snsCertHits.Inc()
	} else {
		b, err := s.get(ctx, rawURL)
		if err != nil {
			snsCertFetches("error").Inc()
			return nil, refuse(ErrUnavailable, NameSES, err, "cannot fetch the signing certificate")
		}
		if e, err = parseCertFile(b); err != nil {
			snsCertFetches("invalid").Inc()
			return nil, refuse(ErrSignature, NameSES, err, "signing certificate")
		}
		snsCertFetches("ok").Inc()
		e.expires = now.Add(s.cacheTTL())
		if e.leaf.NotAfter.Before(e.expires) {
			e.expires = e.leaf.NotAfter
		}
		s.store(rawURL, e, now)
	}
	inter := x509.NewCertPool()
	if s.Intermediates != nil {
		inter = s.Intermediates.Clone()
	}
	for _, c := range e.chain {
		inter.AddCert(c)
	}
	_, err := e.leaf.Verify(x509.VerifyOptions{
		Roots:         s.Roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return nil, refuse(ErrSignature, NameSES, err, "signing certificate not trusted")
	}
	return e.leaf, nil
}

// parseCertFile reads a PEM file of certificates: the first is the
// signing certificate, the others may complete its chain.
func parseCertFile(b []byte) (*certEntry, error) {
	var certs []*x509.Certificate
	for len(certs) < 8 {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return &certEntry{leaf: certs[0], chain: certs[1:]}, nil
}

// cached is the unexpired cache entry for rawURL, nil when none.
func (s *SNS) cached(rawURL string, now time.Time) *certEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.certs[rawURL]
	if e == nil || !now.Before(e.expires) {
		return nil
	}
	return e
}

// store caches e, first dropping expired entries and, when the cache
// is still full, the one that expires first.
func (s *SNS) store(rawURL string, e *certEntry, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.certs == nil {
		s.certs = map[string]*certEntry{}
	}
	for u, c := range s.certs {
		if !now.Before(c.expires) {
			delete(s.certs, u)
		}
	}
	size := s.CacheSize
	if size <= 0 {
		size = DefaultSNSCacheSize
	}
	for len(s.certs) >= size {
		first := ""
		for u, c := range s.certs {
			if first == "" || c.expires.Before(s.certs[first].expires) {
				first = u
			}
		}
		delete(s.certs, first)
	}
	s.certs[rawURL] = e
}

// checkURL parses rawURL and checks that verifyd may fetch it: https,
// no userinfo, a host and port AllowedHosts allows and, for a signing
// certificate, a path ending in .pem.
func (s *SNS) checkURL(rawURL string, cert bool) (*url.URL, error) {
	if len(rawURL) > maxURL {
		return nil, fmt.Errorf("longer than %d bytes", maxURL)
	}
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return nil, errors.New("not a URL")
	case u.Scheme != "https":
		return nil, fmt.Errorf("scheme %.10q is not https", u.Scheme)
	case u.User != nil:
		return nil, errors.New("holds userinfo")
	case u.Opaque != "" || u.Host == "":
		return nil, errors.New("names no host")
	case cert && !strings.HasSuffix(u.Path, ".pem"):
		return nil, errors.New("path does not end in .pem")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = "443"
	}
	hosts := s.AllowedHosts
	if hosts == nil {
		hosts = DefaultSNSHosts
	}
	for _, p := range hosts {
		if matchHost(p, host, port) {
			return u, nil
		}
	}
	return nil, fmt.Errorf("host %.256q port %s is not allowed", host, port)
}

// matchHost reports whether host and port match pattern: the same
// number of labels, each equal (ignoring case) or "*" for any one; the
// pattern's port, 443 when it names none.
func matchHost(pattern, host, port string) bool {
	pattern = strings.ToLower(pattern)
	pport := "443"
	if i := strings.LastIndexByte(pattern, ':'); i >= 0 {
		pattern, pport = pattern[:i], pattern[i+1:]
	}
	if port != pport {
		return false
	}
	pl, hl := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if !isLabel(hl[i]) || pl[i] != "*" && pl[i] != hl[i] {
			return false
		}
	}
	return true
}

// checkHostPattern reports what is wrong with an AllowedHosts pattern.
func checkHostPattern(p string) error {
	h, port := p, "443"
	if i := strings.LastIndexByte(p, ':'); i >= 0 {
		h, port = p[:i], p[i+1:]
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("sns: allowed host %q: bad port", p)
	}
	for _, l := range strings.Split(strings.ToLower(h), ".") {
		if l != "*" && !isLabel(l) {
			return fmt.Errorf("sns: allowed host %q: %q is not a DNS label or *", p, l)
		}
	}
	return nil
}

// isLabel reports whether l is a DNS label: letters, digits, hyphens.
func isLabel(l string) bool {
	if l == "" || len(l) > 63 {
		return false
	}
	for i := 0; i < len(l); i++ {
		if !alnum(l[i]) && l[i] != '-' {
			return false
		}
	}
	return true
}

// get fetches rawURL (already checked) and returns its body, at most
// MaxCertSize bytes: status 200 only, no redirect, within the timeout.
// The error names no URL: a SubscribeURL holds the confirmation token.
func (s *SNS) get(ctx context.Context, rawURL string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, errors.New("cannot make the request")
	}
	resp, err := s.client().Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d from %s", resp.StatusCode, req.URL.Host)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxCertSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxCertSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxCertSize)
	}
	// A response can still arrive after the deadline cancelled the
	// request (the server answers the TLS close_notify); it is late.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b, nil
}

// client is s.Client (or a client of its own) that follows no
// redirect: a redirect could lead off the allowed hosts.
func (s *SNS) client() *http.Client {
	c := http.Client{Timeout: s.timeout()}
	if s.Client != nil {
		c = *s.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func (s *SNS) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *SNS) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultSNSTimeout
}

func (s *SNS) cacheTTL() time.Duration {
	if s.CacheTTL > 0 {
		return s.CacheTTL
	}
	return DefaultSNSCacheTTL
}
