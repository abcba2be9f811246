package platform

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The fuzz tests run on their seeds as normal tests; go test -fuzz
// FuzzX ./server/outcomes/platform/ explores further. A crasher found
// is kept as a seed in testdata/fuzz/FuzzX. Each checks that no input
// panics, that an error is an *Error of a kind, and that events keep
// every bound (eventIssue).

// addFiles seeds f with the testdata files starting with prefix.
func addFiles(f *testing.F, prefix string) {
	for _, name := range testdataFiles(f, prefix) {
		f.Add(readTestdata(f, name))
	}
}

// checkError fails t unless err is nil or an *Error of a kind.
func checkError(t *testing.T, err error) {
	t.Helper()
	var pe *Error
	if err == nil {
		return
	}
	if !errors.As(err, &pe) {
		t.Fatalf("%T %v is not an *Error", err, err)
	}
	for _, k := range []error{ErrSignature, ErrPayload, ErrNotAllowed, ErrConfig, ErrUnavailable} {
		if errors.Is(err, k) {
			return
		}
	}
	t.Fatalf("%v is of no kind", err)
}

func FuzzSendGrid(f *testing.F) {
	addFiles(f, "sendgrid-")
	f.Add([]byte(`[{"email":"a@example.com","timestamp":"1795168800.5","event":"dropped","reason":" bounced address "}]`))
	f.Add([]byte(`[{"email":"a@example.com","timestamp":-1,"event":"bounce"}]`))
	f.Add([]byte(`[{"email":"\ud800@example.com","timestamp":1795168800,"event":"delivered","sg_event_id":"\ud800"}]`))
	f.Add([]byte(`[[[[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := parseSendGrid(b)
		checkError(t, err)
		checkResult(t, res)
		if err == nil && res.Skipped+len(res.Events) > MaxEvents {
			t.Errorf("%d events and skips", res.Skipped+len(res.Events))
		}
	})
}

func FuzzMailgun(f *testing.F) {
	addFiles(f, "mailgun-")
	f.Add([]byte(`{"event-data":{"event":"failed","severity":"permanent","recipient":"a@example.com","timestamp":"1e9","delivery-status":{"code":"5e2","enhanced-code":"5.1.1.1"}}}`))
	f.Add([]byte(`{"event-data":{"event":"delivered","recipient":"a@example.com","timestamp":1795168800,"id":"` + strings.Repeat("é", MaxID) + `"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var body mailgunBody
		if json.Unmarshal(b, &body) != nil {
			return
		}
		res, err := parseMailgunEvent(body.EventData)
		checkError(t, err)
		checkResult(t, res)
	})
}

func FuzzPostmark(f *testing.F) {
	addFiles(f, "postmark-")
	f.Add([]byte(`{"RecordType":"Bounce","TypeCode":"4096","ID":"x","Email":"a@example.com","BouncedAt":"2026-11-20T09:58:43.123456789123Z"}`))
	f.Add([]byte(`{"RecordType":"Delivery","Recipient":"a@example.com","DeliveredAt":"0000-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := parsePostmark(b)
		checkError(t, err)
		checkResult(t, res)
	})
}

func FuzzSES(f *testing.F) {
	addFiles(f, "ses-")
	f.Add([]byte(`{"notificationType":"Bounce","bounce":{"bouncedRecipients":[{"emailAddress":"a@example.com"}]}}`))
	f.Add([]byte(`{"eventType":"Delivery","delivery":{"recipients":["a@example.com",""]}}`))
	f.Add([]byte(`Successfully validated SNS topic for Amazon SES event publishing.`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := parseSES("22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", string(b), testNow)
		checkError(t, err)
		checkResult(t, res)
	})
}

// FuzzSNS reads SNS messages up to the point where a certificate would
// be fetched: the message, its string to sign, its URLs.
func FuzzSNS(f *testing.F) {
	f.Add(body(f, signSNS(f, snsKey(), "1", notification(`{"notificationType":"Delivery"}`))))
	f.Add(body(f, signSNS(f, snsKey(), "2", confirmation())))
	f.Add([]byte(`{"Type":"Notification","Signature":"x","SignatureVersion":"2","Subject":null}`))
	s := &SNS{AllowedHosts: []string{"sns.*.amazonaws.com", "127.0.0.1:8443"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseSNS(b)
		checkError(t, err)
		if err != nil {
			return
		}
		sts := string(m.stringToSign())
		if !strings.HasPrefix(sts, "Message\n") || !strings.HasSuffix(sts, "Type\n"+m.Type+"\n") {
			t.Errorf("string to sign %q", sts)
		}
		for _, u := range []string{m.SigningCertURL, m.SubscribeURL} {
			if p, err := s.checkURL(u, false); err == nil && (p.Scheme != "https" || p.User != nil) {
				t.Errorf("%q allowed", u)
			}
		}
	})
}

func FuzzParseSMTP(f *testing.F) {
	for _, s := range []string{
		"smtp; 550 5.1.1 <x@y>: Recipient address rejected: User unknown",
		"550-5.1.1 a\n550 5.1.1 b", "4.16.55.1", "5.1.", "5.1.1234", "250", "550 #5.1.0", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		code, enh := ParseSMTP(s)
		if code != 0 && (code < 200 || code > 599 || code/100 == 3) {
			t.Errorf("code %d", code)
		}
		if enh != "" && (!enhancedRe.MatchString(enh) || !strings.Contains(s, enh)) {
			t.Errorf("enhanced %q", enh)
		}
	})
}

func FuzzPostmarkAuth(f *testing.F) {
	f.Add(basic(postmarkUser, postmarkPass))
	f.Add("Basic Og==")
	f.Add("basic")
	f.Fuzz(func(t *testing.T, h string) {
		_, err := (&Postmark{}).Receive([]byte(`{"RecordType":"Open"}`), h, postmarkUser, PostmarkPassHash(postmarkPass))
		checkError(t, err)
		if err == nil {
			u, p, ok := basicAuth(h)
			if !ok || u != postmarkUser || p != postmarkPass || !strings.EqualFold(h[:6], "basic ") {
				t.Errorf("%q taken", h)
			}
		}
	})
}
