package platform

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testTopic = "arn:aws:sns:eu-west-1:123456789012:ses-outcomes"
	snsHost   = "https://sns.eu-west-1.amazonaws.com"
	leafURL   = snsHost + "/SimpleNotificationService-leaf.pem"
	chainURL  = snsHost + "/SimpleNotificationService-chain.pem"
)

// The tests' RSA keys: SNS's signing key, and another one.
var (
	snsKey   = sync.OnceValue(func() *rsa.PrivateKey { return mustRSA() })
	otherKey = sync.OnceValue(func() *rsa.PrivateKey { return mustRSA() })
)

func mustRSA() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// snsWorld is AWS as the tests see it: a CA, an intermediate that
// issues SNS's signing certificate, and an HTTPS server that answers
// for sns.<region>.amazonaws.com (through the client's dialer) with the
// certificate files and subscription confirmations.
type snsWorld struct {
	sns        *SNS
	srv        *httptest.Server
	roots      *x509.CertPool
	inter      *x509.Certificate
	strayDials atomic.Int64 // dials to any other host

	mu       sync.Mutex
	requests map[string]int // by path, "/" for a confirmation
	tokens   []string       // of the confirmations
	confirm  int            // the status confirmations get
}

// caCert makes a certificate for key, signed by parent (self-signed
// when nil).
func caCert(t testing.TB, name string, pub, key crypto.Signer, parent *x509.Certificate, ca bool, from, to time.Time, dns ...string) *x509.Certificate {
	t.Helper()
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             from,
		NotAfter:              to,
		IsCA:                  ca,
		BasicConstraintsValid: true,
		DNSNames:              dns,
		KeyUsage:              x509.KeyUsageDigitalSignature,
	}
	if ca {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pemOf(certs ...*x509.Certificate) []byte {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

func newSNSWorld(t *testing.T) *snsWorld {
	t.Helper()
	ecKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	from, to := testNow.Add(-24*time.Hour), testNow.Add(365*24*time.Hour)
	rootKey, interKey, tlsKey := ecKey(), ecKey(), ecKey()
	root := caCert(t, "test root", rootKey, rootKey, nil, true, from, to)
	inter := caCert(t, "test SNS CA", interKey, rootKey, root, true, from, to)
	leaf := caCert(t, "sns.amazonaws.com", snsKey(), interKey, inter, false, testNow.Add(-time.Hour), testNow.Add(30*24*time.Hour), "sns.amazonaws.com")
	expired := caCert(t, "sns.amazonaws.com", snsKey(), interKey, inter, false, testNow.Add(-48*time.Hour), testNow.Add(-time.Minute), "sns.amazonaws.com")
	tlsCert := caCert(t, "sns", tlsKey, rootKey, root, false, from, to, "sns.eu-west-1.amazonaws.com", "sns.us-east-1.amazonaws.com")

	w := &snsWorld{roots: x509.NewCertPool(), inter: inter, requests: map[string]int{}, confirm: http.StatusOK}
	w.roots.AddCert(root)
	files := map[string][]byte{
		"/SimpleNotificationService-leaf.pem":    pemOf(leaf),
		"/SimpleNotificationService-chain.pem":   pemOf(leaf, inter),
		"/SimpleNotificationService-expired.pem": pemOf(expired),
		"/not-a-certificate.pem":                 []byte("<Error>NoSuchKey</Error>"),
		"/big.pem":                               []byte(strings.Repeat("x", MaxCertSize+1)),
	}
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.requests[r.URL.Path]++
		status := w.confirm
		if r.URL.Path == "/" {
			w.tokens = append(w.tokens, r.URL.Query().Get("Token"))
		}
		w.mu.Unlock()
		switch {
		case r.Method != http.MethodGet:
			rw.WriteHeader(http.StatusMethodNotAllowed)
		case r.URL.Path == "/slow.pem":
			// Never a response: a 200 written after the client gave up
			// could still reach it through crypto/tls's close_notify.
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			panic(http.ErrAbortHandler)
		case r.URL.Path == "/redirect.pem":
			http.Redirect(rw, r, "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-leaf.pem", http.StatusFound)
		case r.URL.Path == "/" && r.URL.Query().Get("Action") == "ConfirmSubscription":
			rw.WriteHeader(status)
			fmt.Fprint(rw, "<ConfirmSubscriptionResponse><ConfirmSubscriptionResult><SubscriptionArn>arn</SubscriptionArn></ConfirmSubscriptionResult></ConfirmSubscriptionResponse>")
		case files[r.URL.Path] != nil:
			rw.Write(files[r.URL.Path])
		default:
			http.NotFound(rw, r)
		}
	}))
	w.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{tlsCert.Raw}, PrivateKey: tlsKey}}}
	w.srv.StartTLS()
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: w.roots},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			switch addr {
			case "sns.eu-west-1.amazonaws.com:443", "sns.us-east-1.amazonaws.com:443":
				var d net.Dialer
				return d.DialContext(ctx, "tcp", w.srv.Listener.Addr().String())
			}
			w.strayDials.Add(1)
			return nil, fmt.Errorf("test: no dialing %s", addr)
		},
	}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		w.srv.Close()
	})
	inters := x509.NewCertPool()
	inters.AddCert(inter)
	clock := testNow
	w.sns = &SNS{
		Roots:         w.roots,
		Intermediates: inters,
		Client:        &http.Client{Transport: tr},
		Now:           func() time.Time { return clock },
	}
	return w
}

// requested is how many requests the server had for path.
func (w *snsWorld) requested(path string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.requests[path]
}

// allRequests is how many requests the server had.
func (w *snsWorld) allRequests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.requests {
		n += c
	}
	return n
}

// notification is an SNS notification carrying message, unsigned.
func notification(message string) map[string]string {
	return map[string]string{
		"Type":           "Notification",
		"MessageId":      "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
		"TopicArn":       testTopic,
		"Subject":        "Amazon SES Email Event Notification",
		"Message":        message,
		"Timestamp":      "2026-11-20T09:58:42.500Z",
		"SigningCertURL": leafURL,
		"UnsubscribeURL": snsHost + "/?Action=Unsubscribe&SubscriptionArn=" + testTopic + ":c9135db0-26c4-47ec-8998-413945fb5a96",
	}
}

// confirmation is an SNS subscription confirmation, unsigned.
func confirmation() map[string]string {
	return map[string]string{
		"Type":           "SubscriptionConfirmation",
		"MessageId":      "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
		"Token":          "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736",
		"TopicArn":       testTopic,
		"Message":        "You have chosen to subscribe to the topic " + testTopic + ".\nTo confirm the subscription, visit the SubscribeURL included in this message.",
		"SubscribeURL":   snsHost + "/?Action=ConfirmSubscription&TopicArn=" + testTopic + "&Token=2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736",
		"Timestamp":      "2026-11-20T09:50:00.000Z",
		"SigningCertURL": leafURL,
	}
}

// signSNS signs m with key as AWS documents it, written apart from the
// code under test: for a notification Message, MessageId, Subject (when
// present), Timestamp, TopicArn, Type; for a confirmation Message,
// MessageId, SubscribeURL, Timestamp, Token, TopicArn, Type; each name
// and value followed by a newline.
func signSNS(t testing.TB, key *rsa.PrivateKey, version string, m map[string]string) map[string]string {
	t.Helper()
	fields := []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	if m["Type"] == "Notification" {
		fields = []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	}
	var s strings.Builder
	for _, f := range fields {
		if v, ok := m[f]; ok {
			s.WriteString(f + "\n" + v + "\n")
		}
	}
	var sig []byte
	var err error
	if version == "1" {
		d := sha1.Sum([]byte(s.String()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA1, d[:])
	} else {
		d := sha256.Sum256([]byte(s.String()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	m["SignatureVersion"] = version
	m["Signature"] = base64.StdEncoding.EncodeToString(sig)
	return m
}

func body(t testing.TB, m map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSNSNotification(t *testing.T) {
	at := func(s string) time.Time { return parseTime(s) }
	permanent := "0100018bd0e0f8a2-6c1e9a4b-2f0d-4c39-9d6e-5b8a1f3c7e21-000000"
	delivery := "0100018bd0d0dd00-33334444-5555-6666-7777-888899990000-000000"
	for file, want := range map[string]Result{
		"ses-bounce-permanent.json": {Events: []Event{
			{ID: permanent + ":" + hash16("ann@example.com"), Email: "ann@example.com", Type: HardBounce, At: at("2026-11-20T09:58:41.123Z"),
				SMTPCode: 550, Enhanced: "5.1.1", Diagnostic: "smtp; 550 5.1.1 <ann@example.com>: Recipient address rejected: User unknown in virtual mailbox table"},
			// The platform's status wins over the diagnostic's code.
			{ID: permanent + ":" + hash16("bob@example.org"), Email: "Bob@Example.org", Type: HardBounce, At: at("2026-11-20T09:58:41.123Z"),
				SMTPCode: 550, Enhanced: "5.0.0", Diagnostic: "smtp; 550-5.1.1 The email account that you tried to reach does not exist. Please try\n550-5.1.1 double-checking the recipient's email address for typos or\n550 5.1.1 unnecessary spaces. https://support.google.com/mail/?p=NoSuchUser - gsmtp"},
		}},
		"ses-bounce-transient.json": {Events: []Event{
			{ID: "0100018bd0e1aa00-1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9-000000:" + hash16("dave@example.com"), Email: "dave@example.com", Type: SoftBounce, At: at("2026-11-20T09:59:00.5Z"),
				SMTPCode: 452, Enhanced: "4.2.2", Diagnostic: "smtp; 452 4.2.2 The email account that you tried to reach is over quota."},
		}},
		// Undetermined is soft, even with a 5.x.x code: SES decides.
		"ses-bounce-undetermined.json": {Events: []Event{
			{ID: "0100018bd0e2bb00-9a8b7c6d-5e4f-4321-8765-0fedcba98765-000000:" + hash16("erin@example.com"), Email: "erin@example.com", Type: SoftBounce, At: at("2026-11-20T09:59:30Z"),
				SMTPCode: 550, Enhanced: "5.1.1", Diagnostic: "Remote server returned '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup'"},
		}},
		"ses-complaint.json": {Events: []Event{
			{ID: "0100018bd0c0cc00-abcdabcd-1234-4321-abcd-1234567890ab-000000:" + hash16("frank@example.com"), Email: "frank@example.com", Type: Complaint, At: at("2026-11-20T08:00:05.25Z")},
		}},
		"ses-delivery.json": {Events: []Event{
			{ID: delivery + ":" + hash16("gina@example.com"), Email: "gina@example.com", Type: Delivered, At: at("2026-11-20T09:40:01.75Z"),
				SMTPCode: 250, Enhanced: "2.0.0", Diagnostic: "250 2.0.0 OK  1732095601 a1-20020a05600c000000b00412345678si1234567wmq.12 - gsmtp"},
			{ID: delivery + ":" + hash16("hal@example.com"), Email: "hal@example.com", Type: Delivered, At: at("2026-11-20T09:40:01.75Z"),
				SMTPCode: 250, Enhanced: "2.0.0", Diagnostic: "250 2.0.0 OK  1732095601 a1-20020a05600c000000b00412345678si1234567wmq.12 - gsmtp"},
		}},
		"ses-subscription-succeeded.json": {Skipped: 1},
		"ses-open.json":                   {Skipped: 1},
	} {
		for _, version := range []string{"1", "2"} {
			t.Run(file+"/v"+version, func(t *testing.T) {
				w := newSNSWorld(t)
				m := signSNS(t, snsKey(), version, notification(string(readTestdata(t, file))))
				res, err := w.sns.Receive(t.Context(), body(t, m), []string{"arn:aws:sns:eu-west-1:123456789012:other", testTopic})
				if err != nil {
					t.Fatal(err)
				}
				checkResult(t, res)
				sameEvents(t, res.Events, want.Events)
				if res.Skipped != want.Skipped || res.Confirmed {
					t.Errorf("skipped %d, confirmed %v; want %d, false", res.Skipped, res.Confirmed, want.Skipped)
				}
			})
		}
	}
}

// TestSNSSubject: the subject is signed when present, and only then.
func TestSNSSubject(t *testing.T) {
	w := newSNSWorld(t)
	msg := string(readTestdata(t, "ses-complaint.json"))
	m := notification(msg)
	delete(m, "Subject")
	if _, err := w.sns.Receive(t.Context(), body(t, signSNS(t, snsKey(), "2", m)), []string{testTopic}); err != nil {
		t.Fatalf("without a subject: %v", err)
	}
	m = signSNS(t, snsKey(), "2", notification(msg))
	m["Subject"] = "Another subject"
	_, err := w.sns.Receive(t.Context(), body(t, m), []string{testTopic})
	wantKind(t, err, ErrSignature)
}

func TestSNSForged(t *testing.T) {
	msg := string(readTestdata(t, "ses-bounce-permanent.json"))
	for name, c := range map[string]struct {
		message func() map[string]string
		sns     func(*SNS)
		kind    error
	}{
		"message changed after signing": {message: func() map[string]string {
			m := signSNS(t, snsKey(), "2", notification(msg))
			m["Message"] = strings.Replace(m["Message"], "Permanent", "Transient", 1)
			return m
		}, kind: ErrSignature},
		"topic changed after signing": {message: func() map[string]string {
			m := signSNS(t, snsKey(), "1", notification(msg))
			m["MessageId"] = "another"
			return m
		}, kind: ErrSignature},
		"signed by another key": {message: func() map[string]string {
			return signSNS(t, otherKey(), "2", notification(msg))
		}, kind: ErrSignature},
		"signed as version 1, said to be version 2": {message: func() map[string]string {
			m := signSNS(t, snsKey(), "1", notification(msg))
			m["SignatureVersion"] = "2"
			return m
		}, kind: ErrSignature},
		"no signature": {message: func() map[string]string {
			m := signSNS(t, snsKey(), "2", notification(msg))
			delete(m, "Signature")
			return m
		}, kind: ErrSignature},
		"signature not base64": {message: func() map[string]string {
			m := signSNS(t, snsKey(), "2", notification(msg))
			m["Signature"] = "%%%"
			return m
		}, kind: ErrSignature},
		"unknown signature version": {message: func() map[string]string {
			m := signSNS(t, snsKey(), "2", notification(msg))
			m["SignatureVersion"] = "3"
			return m
		}, kind: ErrSignature},
		"raw message delivery": {message: func() map[string]string {
			return map[string]string{"notificationType": "Bounce"}
		}, kind: ErrSignature},
		"expired certificate": {message: func() map[string]string {
			m := notification(msg)
			m["SigningCertURL"] = snsHost + "/SimpleNotificationService-expired.pem"
			return signSNS(t, snsKey(), "2", m)
		}, kind: ErrSignature},
		"certificate of an untrusted CA": {message: func() map[string]string {
			return signSNS(t, snsKey(), "2", notification(msg))
		}, sns: func(s *SNS) { s.Roots = x509.NewCertPool() }, kind: ErrSignature},
		"chain without its intermediate": {message: func() map[string]string {
			return signSNS(t, snsKey(), "2", notification(msg))
		}, sns: func(s *SNS) { s.Intermediates = nil }, kind: ErrSignature},
		"clock past the certificate's expiry": {message: func() map[string]string {
			return signSNS(t, snsKey(), "2", notification(msg))
		}, sns: func(s *SNS) { s.Now = func() time.Time { return testNow.Add(31 * 24 * time.Hour) } }, kind: ErrSignature},
		"not a certificate": {message: func() map[string]string {
			m := notification(msg)
			m["SigningCertURL"] = snsHost + "/not-a-certificate.pem"
			return signSNS(t, snsKey(), "2", m)
		}, kind: ErrSignature},
		"no certificate there": {message: func() map[string]string {
			m := notification(msg)
			m["SigningCertURL"] = snsHost + "/SimpleNotificationService-gone.pem"
			return signSNS(t, snsKey(), "2", m)
		}, kind: ErrUnavailable},
		"certificate file too large": {message: func() map[string]string {
			m := notification(msg)
			m["SigningCertURL"] = snsHost + "/big.pem"
			return signSNS(t, snsKey(), "2", m)
		}, kind: ErrUnavailable},
		"certificate redirected": {message: func() map[string]string {
			m := notification(msg)
			m["SigningCertURL"] = snsHost + "/redirect.pem"
			return signSNS(t, snsKey(), "2", m)
		}, kind: ErrUnavailable},
		"certificate too slow": {message: func() map[string]string {
			m := notification(msg)
			m["SigningCertURL"] = snsHost + "/slow.pem"
			return signSNS(t, snsKey(), "2", m)
		}, sns: func(s *SNS) { s.Timeout = 50 * time.Millisecond }, kind: ErrUnavailable},
		"stale, with a max age": {message: func() map[string]string {
			return signSNS(t, snsKey(), "2", notification(msg)) // sent at 09:58:42.5
		}, sns: func(s *SNS) { s.MaxAge = time.Minute }, kind: ErrSignature},
		"unknown type": {message: func() map[string]string {
			m := notification(msg)
			m["Type"] = "Announcement"
			return signSNS(t, snsKey(), "2", m)
		}, kind: ErrPayload},
	} {
		t.Run(name, func(t *testing.T) {
			w := newSNSWorld(t)
			if c.sns != nil {
				c.sns(w.sns)
			}
			res, err := w.sns.Receive(t.Context(), body(t, c.message()), []string{testTopic})
			wantKind(t, err, c.kind)
			if len(res.Events) != 0 || res.Confirmed {
				t.Errorf("refused, yet %+v", res)
			}
			if n := w.requested("/redirect.pem"); n > 0 && w.requested("/SimpleNotificationService-leaf.pem") > 0 {
				t.Error("the redirect was followed")
			}
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		w := newSNSWorld(t)
		_, err := w.sns.Receive(t.Context(), []byte("Type=Notification"), []string{testTopic})
		wantKind(t, err, ErrPayload)
	})
}

// TestSNSMaxAge: within the window a message is taken; out of it, it
// is refused before anything is fetched.
func TestSNSMaxAge(t *testing.T) {
	w := newSNSWorld(t)
	w.sns.MaxAge = 2 * time.Minute
	b := body(t, signSNS(t, snsKey(), "2", notification(string(readTestdata(t, "ses-complaint.json")))))
	if _, err := w.sns.Receive(t.Context(), b, []string{testTopic}); err != nil {
		t.Fatal(err)
	}
	w.sns.MaxAge = time.Minute
	_, err := w.sns.Receive(t.Context(), b, []string{testTopic})
	wantKind(t, err, ErrSignature)
	if n := w.allRequests(); n != 1 {
		t.Errorf("%d requests", n)
	}
}

// TestSNSIntermediateInFile: a certificate file that holds its
// intermediate needs none configured.
func TestSNSIntermediateInFile(t *testing.T) {
	w := newSNSWorld(t)
	w.sns.Intermediates = nil
	m := notification(string(readTestdata(t, "ses-complaint.json")))
	m["SigningCertURL"] = chainURL
	res, err := w.sns.Receive(t.Context(), body(t, signSNS(t, snsKey(), "2", m)), []string{testTopic})
	if err != nil || len(res.Events) != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
}

// TestSNSCertURLNotAllowed: a certificate URL verifyd may not fetch is
// refused before any request, whatever the signature.
func TestSNSCertURLNotAllowed(t *testing.T) {
	for _, u := range []string{
		"https://evil.example.com/SimpleNotificationService-leaf.pem",
		"https://sns.eu-west-1.amazonaws.com.evil.example/SimpleNotificationService-leaf.pem",
		"https://evilsns.eu-west-1.amazonaws.com/SimpleNotificationService-leaf.pem",
		"https://sns.eu.west-1.amazonaws.com/SimpleNotificationService-leaf.pem",
		"https://sns..amazonaws.com/SimpleNotificationService-leaf.pem",
		"https://sns.eu-west-1.amazonaws.com./SimpleNotificationService-leaf.pem",
		"http://sns.eu-west-1.amazonaws.com/SimpleNotificationService-leaf.pem",
		"https://user:pass@sns.eu-west-1.amazonaws.com/SimpleNotificationService-leaf.pem",
		"https://sns.eu-west-1.amazonaws.com:8443/SimpleNotificationService-leaf.pem",
		"https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-leaf.crt",
		"https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-leaf.pem.txt",
		"https://127.0.0.1/SimpleNotificationService-leaf.pem",
		"https://[::1]/SimpleNotificationService-leaf.pem",
		"//sns.eu-west-1.amazonaws.com/SimpleNotificationService-leaf.pem",
		"https:sns.eu-west-1.amazonaws.com/SimpleNotificationService-leaf.pem",
		snsHost + "/" + strings.Repeat("a", maxURL) + ".pem",
	} {
		t.Run(u[:min(len(u), 80)], func(t *testing.T) {
			w := newSNSWorld(t)
			m := notification(string(readTestdata(t, "ses-complaint.json")))
			m["SigningCertURL"] = u
			_, err := w.sns.Receive(t.Context(), body(t, signSNS(t, snsKey(), "2", m)), []string{testTopic})
			wantKind(t, err, ErrNotAllowed)
			if n, d := w.allRequests(), w.strayDials.Load(); n != 0 || d != 0 {
				t.Errorf("%d requests, %d dials", n, d)
			}
		})
	}
}

// TestSNSAllowedHosts: the patterns as configured, one label a star,
// the port named when it is not 443.
func TestSNSAllowedHosts(t *testing.T) {
	s := &SNS{AllowedHosts: []string{"sns.*.amazonaws.com", "SNS.*.amazonaws.com.cn", "127.0.0.1:8443", "certs.example.org"}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for u, ok := range map[string]bool{
		"https://sns.eu-west-1.amazonaws.com/a.pem":     true,
		"https://SNS.EU-WEST-1.AMAZONAWS.COM/a.pem":     true,
		"https://sns.eu-west-1.amazonaws.com:443/a.pem": true,
		"https://sns.cn-north-1.amazonaws.com.cn/a.pem": true,
		"https://127.0.0.1:8443/a.pem":                  true,
		"https://certs.example.org/a.pem":               true,
		"https://127.0.0.1/a.pem":                       false,
		"https://127.0.0.1:8444/a.pem":                  false,
		"https://sns.amazonaws.com/a.pem":               false,
		"https://sns.a.b.amazonaws.com/a.pem":           false,
		"https://sns.eu_west.amazonaws.com/a.pem":       false,
		"https://x.certs.example.org/a.pem":             false,
		"https://certs.example.org:444/a.pem":           false,
	} {
		if _, err := s.checkURL(u, true); (err == nil) != ok {
			t.Errorf("checkURL(%s): %v, want allowed %v", u, err, ok)
		}
	}
	bad := &SNS{AllowedHosts: []string{"sns.*.amazonaws.com:0", "sns.**.amazonaws.com", "sns..amazonaws.com", "*.example.com:https"}}
	err := bad.Validate()
	if err == nil || strings.Count(err.Error(), "\n") != 3 {
		t.Errorf("Validate: %v, want four problems", err)
	}
	if err := (&SNS{AllowedHosts: []string{}}).Validate(); err == nil {
		t.Error("no allowed hosts is valid")
	}
	if err := (&SNS{}).Validate(); err != nil {
		t.Errorf("the zero SNS: %v", err)
	}
}

// TestSNSTopicNotAllowed: a topic not the account's is refused before
// anything is fetched.
func TestSNSTopicNotAllowed(t *testing.T) {
	for name, topics := range map[string][]string{
		"another topic": {"arn:aws:sns:eu-west-1:123456789012:other"},
		"no topics":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			w := newSNSWorld(t)
			for _, m := range []map[string]string{
				signSNS(t, snsKey(), "2", notification(string(readTestdata(t, "ses-complaint.json")))),
				signSNS(t, snsKey(), "2", confirmation()),
			} {
				_, err := w.sns.Receive(t.Context(), body(t, m), topics)
				wantKind(t, err, ErrNotAllowed)
			}
			if n := w.allRequests(); n != 0 {
				t.Errorf("%d requests", n)
			}
		})
	}
}

func TestSNSSubscriptionConfirmation(t *testing.T) {
	t.Run("confirmed", func(t *testing.T) {
		w := newSNSWorld(t)
		m := signSNS(t, snsKey(), "1", confirmation())
		res, err := w.sns.Receive(t.Context(), body(t, m), []string{testTopic})
		if err != nil || !res.Confirmed || len(res.Events) != 0 {
			t.Fatalf("%+v, %v", res, err)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if n := w.requests["/"]; n != 1 || w.tokens[0] != m["Token"] {
			t.Errorf("%d confirmations, tokens %q", n, w.tokens)
		}
	})
	t.Run("forged", func(t *testing.T) {
		w := newSNSWorld(t)
		m := signSNS(t, snsKey(), "2", confirmation())
		m["SubscribeURL"] = strings.Replace(m["SubscribeURL"], "eu-west-1", "us-east-1", 1)
		_, err := w.sns.Receive(t.Context(), body(t, m), []string{testTopic})
		wantKind(t, err, ErrSignature)
		if n := w.requested("/"); n != 0 {
			t.Errorf("%d confirmations", n)
		}
	})
	t.Run("subscribe URL not allowed", func(t *testing.T) {
		w := newSNSWorld(t)
		m := confirmation()
		m["SubscribeURL"] = "https://evil.example.com/?Action=ConfirmSubscription&Token=x"
		_, err := w.sns.Receive(t.Context(), body(t, signSNS(t, snsKey(), "2", m)), []string{testTopic})
		wantKind(t, err, ErrNotAllowed)
		if n, d := w.requested("/"), w.strayDials.Load(); n != 0 || d != 0 {
			t.Errorf("%d confirmations, %d dials", n, d)
		}
	})
	t.Run("SNS fails", func(t *testing.T) {
		w := newSNSWorld(t)
		w.mu.Lock()
		w.confirm = http.StatusServiceUnavailable
		w.mu.Unlock()
		res, err := w.sns.Receive(t.Context(), body(t, signSNS(t, snsKey(), "2", confirmation())), []string{testTopic})
		wantKind(t, err, ErrUnavailable)
		if res.Confirmed || strings.Contains(err.Error(), "Token") {
			t.Errorf("%+v, %v", res, err)
		}
	})
	t.Run("unsubscribe", func(t *testing.T) {
		w := newSNSWorld(t)
		m := confirmation()
		m["Type"] = "UnsubscribeConfirmation"
		res, err := w.sns.Receive(t.Context(), body(t, signSNS(t, snsKey(), "2", m)), []string{testTopic})
		if err != nil || res.Confirmed || len(res.Events) != 0 || w.requested("/") != 0 {
			t.Errorf("%+v, %v, %d confirmations", res, err, w.requested("/"))
		}
	})
}

// TestSNSCertCache: a certificate is fetched once for many messages,
// again when its time in the cache is over, and the cache is bounded.
func TestSNSCertCache(t *testing.T) {
	w := newSNSWorld(t)
	now := testNow
	w.sns.Now = func() time.Time { return now }
	w.sns.CacheTTL = time.Hour
	send := func(certURL string) {
		t.Helper()
		m := notification(string(readTestdata(t, "ses-delivery.json")))
		m["SigningCertURL"] = certURL
		if _, err := w.sns.Receive(t.Context(), body(t, signSNS(t, snsKey(), "2", m)), []string{testTopic}); err != nil {
			t.Fatal(err)
		}
	}
	const leaf, chain = "/SimpleNotificationService-leaf.pem", "/SimpleNotificationService-chain.pem"
	hits := snsCertHits.Get()
	send(leafURL)
	send(leafURL)
	if n := w.requested(leaf); n != 1 {
		t.Errorf("fetched %d times", n)
	}
	if d := snsCertHits.Get() - hits; d != 1 {
		t.Errorf("%d cache hits counted", d)
	}
	now = now.Add(time.Hour)
	send(leafURL)
	if n := w.requested(leaf); n != 2 {
		t.Errorf("fetched %d times after the TTL", n)
	}

	w.sns.CacheSize = 1
	send(chainURL)
	send(leafURL)
	send(chainURL)
	if a, b := w.requested(leaf), w.requested(chain); a != 3 || b != 2 {
		t.Errorf("fetched %d and %d times with room for one", a, b)
	}
	if n := len(w.sns.certs); n != 1 {
		t.Errorf("%d cached", n)
	}
}

// TestSNSConcurrent: one SNS serves many requests at once.
func TestSNSConcurrent(t *testing.T) {
	w := newSNSWorld(t)
	b := body(t, signSNS(t, snsKey(), "2", notification(string(readTestdata(t, "ses-delivery.json")))))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if res, err := w.sns.Receive(context.Background(), b, []string{testTopic}); err != nil || len(res.Events) != 2 {
				t.Errorf("%+v, %v", res, err)
			}
		})
	}
	wg.Wait()
}
