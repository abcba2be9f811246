package platform

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sendGridKey is a verification key, as SendGrid shows it, and its
// private half.
func sendGridKey(t testing.TB) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return k, base64.StdEncoding.EncodeToString(der)
}

// signSendGrid is the headers of a signed request: the signature of
// the timestamp followed by the body.
func signSendGrid(t testing.TB, k *ecdsa.PrivateKey, ts time.Time, body []byte) map[string]string {
	t.Helper()
	sec := strconv.FormatInt(ts.Unix(), 10)
	d := sha256.Sum256(append([]byte(sec), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		SendGridSignatureHeader: base64.StdEncoding.EncodeToString(sig),
		SendGridTimestampHeader: sec,
	}
}

func lookup(h map[string]string) func(string) string {
	return func(name string) string { return h[name] }
}

func TestSendGrid(t *testing.T) {
	key, pub := sendGridKey(t)
	b := readTestdata(t, "sendgrid-events.json")
	s := &SendGrid{Now: fixedClock}
	res, err := s.Receive(b, lookup(signSendGrid(t, key, testNow.Add(-time.Minute), b)), pub)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, res)
	at := func(sec int64) time.Time { return time.Unix(sec, 0) }
	// The last delivery has no sg_event_id: the hash of its raw event.
	i := bytes.LastIndex(b, []byte(`{"email":"hal@example.com"`))
	j := bytes.Index(b[i:], []byte("}")) + i + 1
	sameEvents(t, res.Events, []Event{
		{ID: "ZGVsaXZlcmVkLTEyMzQ1Ng", Email: "ann@example.com", Type: Delivered, At: at(1795168820), SMTPCode: 250, Enhanced: "2.0.0", Diagnostic: "250 2.0.0 OK 1795168820 d2si1234567qkf.123 - gsmtp"},
		{ID: "Ym91bmNlLTEyMzQ1Ng", Email: "bob@example.org", Type: HardBounce, At: at(1795168830), SMTPCode: 550, Enhanced: "5.1.1",
			Diagnostic: "550 5.1.1 The email account that you tried to reach does not exist. Please try double-checking the recipient's email address for typos or unnecessary spaces."},
		// A block is soft, whatever its code says.
		{ID: "YmxvY2tlZC0xMjM0NTY", Email: "carol@example.net", Type: SoftBounce, At: at(1795168840), SMTPCode: 550, Enhanced: "5.7.1",
			Diagnostic: "550 5.7.1 [198.51.100.7] Our system has detected an unusual rate of unsolicited mail originating from your IP address."},
		{ID: "ZHJvcHBlZC1ib3VuY2Vk", Email: "dave@example.com", Type: HardBounce, At: at(1795168850), Diagnostic: "Bounced Address"},
		{ID: "c3BhbXJlcG9ydC0xMjM0NTY", Email: "erin@example.com", Type: Complaint, At: at(1795168860)},
		{ID: "dW5zdWJzY3JpYmUtMTIzNDU2", Email: "frank@example.com", Type: Unsubscribed, At: at(1795168870)},
		{ID: "Z3JvdXBfdW5zdWItMTIzNDU2", Email: "gina@example.com", Type: Unsubscribed, At: at(1795168880)},
		{ID: hashID(NameSendGrid, b[i:j]), Email: "hal@example.com", Type: Delivered, At: at(1795168895), SMTPCode: 250, Diagnostic: "250 OK"},
	})
	// processed, deferred, open, click, dropped as Invalid, group_resubscribe
	if res.Skipped != 6 {
		t.Errorf("%d skipped", res.Skipped)
	}
	if !strings.HasPrefix(res.Events[7].ID, "sendgrid:") || len(res.Events[7].ID) != len("sendgrid:")+32 {
		t.Errorf("hashed id %q", res.Events[7].ID)
	}
}

func TestSendGridForged(t *testing.T) {
	key, pub := sendGridKey(t)
	otherKey, _ := sendGridKey(t)
	b := readTestdata(t, "sendgrid-events.json")
	for name, c := range map[string]struct {
		body    []byte
		headers map[string]string
		skew    time.Duration
	}{
		"body changed after signing": {
			body:    bytes.Replace(b, []byte(`"type":"blocked"`), []byte(`"type":"bounce"`), 1),
			headers: signSendGrid(t, key, testNow, b),
		},
		"signed by another key": {body: b, headers: signSendGrid(t, otherKey, testNow, b)},
		"no signature": {body: b, headers: map[string]string{
			SendGridTimestampHeader: signSendGrid(t, key, testNow, b)[SendGridTimestampHeader],
		}},
		"no timestamp": {body: b, headers: map[string]string{
			SendGridSignatureHeader: signSendGrid(t, key, testNow, b)[SendGridSignatureHeader],
		}},
		"timestamp changed after signing": {body: b, headers: func() map[string]string {
			h := signSendGrid(t, key, testNow, b)
			h[SendGridTimestampHeader] = strconv.FormatInt(testNow.Unix()-1, 10)
			return h
		}()},
		"stale timestamp":                  {body: b, headers: signSendGrid(t, key, testNow.Add(-5*time.Minute-time.Second), b)},
		"timestamp in the future":          {body: b, headers: signSendGrid(t, key, testNow.Add(5*time.Minute+time.Second), b)},
		"stale for a shorter window":       {body: b, headers: signSendGrid(t, key, testNow.Add(-2*time.Minute), b), skew: time.Minute},
		"timestamp not a number":           {body: b, headers: map[string]string{SendGridSignatureHeader: "MEUCIQ==", SendGridTimestampHeader: "yesterday"}},
		"signature not base64":             {body: b, headers: map[string]string{SendGridSignatureHeader: "%%%", SendGridTimestampHeader: strconv.FormatInt(testNow.Unix(), 10)}},
		"signature of the timestamp alone": {body: b, headers: signSendGrid(t, key, testNow, nil)},
		"no headers":                       {body: b, headers: map[string]string{}},
		"signature over another timestamp": {body: b, headers: map[string]string{SendGridSignatureHeader: signSendGrid(t, key, testNow.Add(-time.Second), b)[SendGridSignatureHeader], SendGridTimestampHeader: strconv.FormatInt(testNow.Unix(), 10)}},
	} {
		t.Run(name, func(t *testing.T) {
			s := &SendGrid{Now: fixedClock, MaxSkew: c.skew}
			res, err := s.Receive(c.body, lookup(c.headers), pub)
			wantKind(t, err, ErrSignature)
			if len(res.Events) != 0 {
				t.Errorf("refused, yet %d events", len(res.Events))
			}
		})
	}
	t.Run("at the edge of the window", func(t *testing.T) {
		s := &SendGrid{Now: fixedClock}
		if _, err := s.Receive(b, lookup(signSendGrid(t, key, testNow.Add(-5*time.Minute), b)), pub); err != nil {
			t.Error(err)
		}
	})
}

func TestSendGridKey(t *testing.T) {
	_, pub := sendGridKey(t)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	for _, k := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte("junk")), base64.StdEncoding.EncodeToString(der)} {
		if _, err := ParseSendGridKey(k); err == nil {
			t.Errorf("ParseSendGridKey(%.20q) took it", k)
		}
		_, err := (&SendGrid{Now: fixedClock}).Receive([]byte("[]"), lookup(nil), k)
		wantKind(t, err, ErrConfig)
	}
	if _, err := ParseSendGridKey(" " + pub + "\n"); err != nil {
		t.Error(err)
	}
}

func TestSendGridPayload(t *testing.T) {
	key, pub := sendGridKey(t)
	ev := func(i int) string {
		return fmt.Sprintf(`{"email":"u%d@example.com","timestamp":1795168800,"event":"delivered","sg_event_id":"id%d"}`, i, i)
	}
	many := func(n int) []byte {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = ev(i)
		}
		return []byte("[" + strings.Join(parts, ",") + "]")
	}
	for name, c := range map[string]struct {
		body   string
		events int
		soft   bool
		ok     bool
	}{
		"empty array":                {body: "[]", ok: true},
		"not events":                 {body: `[1, "x", null, [], {"event": 5}]`, ok: true},
		"MaxEvents":                  {body: string(many(MaxEvents)), events: MaxEvents, ok: true},
		"more than MaxEvents":        {body: string(many(MaxEvents + 1))},
		"an object":                  {body: `{"email":"a@example.com","event":"delivered"}`},
		"not JSON":                   {body: `email=a@example.com`},
		"cut short":                  {body: `[` + ev(1) + `,`},
		"data after":                 {body: `[` + ev(1) + `] [`},
		"no email":                   {body: `[{"timestamp":1795168800,"event":"delivered"}]`},
		"no timestamp":               {body: `[{"email":"a@example.com","event":"bounce","type":"bounce"}]`},
		"timestamp out of range":     {body: `[{"email":"a@example.com","timestamp":99999999999999,"event":"delivered"}]`},
		"email too long":             {body: `[{"email":"` + strings.Repeat("a", MaxEmail) + `@x","timestamp":1795168800,"event":"delivered"}]`},
		"email of the wrong type":    {body: `[{"email":5,"timestamp":1795168800,"event":"delivered"}]`},
		"string timestamp":           {body: `[{"email":"a@example.com","timestamp":"1795168800","event":"delivered"}]`, events: 1, ok: true},
		"skipped event, any shape":   {body: `[{"email":5,"timestamp":"x","event":"open"}]`, ok: true},
		"bounce of no type, soft":    {body: `[{"email":"a@example.com","timestamp":1795168800,"event":"bounce","reason":"550 5.1.1 no such user"}]`, events: 1, soft: true, ok: true},
		"bounce of a new type, soft": {body: `[{"email":"a@example.com","timestamp":1795168800,"event":"bounce","type":"expired"}]`, events: 1, soft: true, ok: true},
	} {
		t.Run(name, func(t *testing.T) {
			b := []byte(c.body)
			res, err := (&SendGrid{Now: fixedClock}).Receive(b, lookup(signSendGrid(t, key, testNow, b)), pub)
			if !c.ok {
				wantKind(t, err, ErrPayload)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res)
			if len(res.Events) != c.events {
				t.Errorf("%d events, want %d", len(res.Events), c.events)
			}
			if c.soft && res.Events[0].Type != SoftBounce {
				t.Errorf("%s, want soft", res.Events[0].Type)
			}
		})
	}
}

// TestSendGridLongFields: an id too long becomes a hash; a diagnostic
// too long is cut at a character.
func TestSendGridLongFields(t *testing.T) {
	reason := strings.Repeat("é", MaxDiagnostic)
	b := []byte(`[{"email":"a@example.com","timestamp":1795168800,"event":"bounce","type":"bounce","status":"5.1.1","sg_event_id":"` +
		strings.Repeat("x", MaxID+1) + `","reason":"550 ` + reason + `"}]`)
	res, err := parseSendGrid(b)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, res)
	e := res.Events[0]
	if e.ID != hashID(NameSendGrid, []byte(strings.Repeat("x", MaxID+1))) {
		t.Errorf("id %q", e.ID)
	}
	if len(e.Diagnostic) != MaxDiagnostic || e.SMTPCode != 550 || e.Enhanced != "5.1.1" {
		t.Errorf("%d bytes of diagnostic, %d %s", len(e.Diagnostic), e.SMTPCode, e.Enhanced)
	}
}
