package platform

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"
)

const postmarkUser, postmarkPass = "verifyd", "Kq8#mZ2:vL9p"

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestPostmark(t *testing.T) {
	at := func(s string) time.Time { return parseTime(s) }
	for file, want := range map[string][]Event{
		// A delivery has no id: the hash of the record stands for one.
		"postmark-delivery.json": {{ID: hashID(NamePostmark, readTestdata(t, "postmark-delivery.json")), Email: "ann@example.com", Type: Delivered,
			At: time.Date(2026, 11, 20, 9, 58, 41, 273539300, time.UTC), SMTPCode: 250, Enhanced: "2.0.0", Diagnostic: "smtp;250 2.0.0 OK 1795168721 d2si1234567qkf.123 - gsmtp"}},
		"postmark-bounce-hard.json": {{ID: "4323372036854775807", Email: "bob@example.org", Type: HardBounce, At: at("2026-11-20T09:58:42.6941477Z"), SMTPCode: 550, Enhanced: "5.1.1",
			Diagnostic: "smtp;550 5.1.1 The email account that you tried to reach does not exist. Please try double-checking the recipient's email address for typos or unnecessary spaces."}},
		// A soft bounce stays soft with a 5.x.x code: Postmark decides.
		"postmark-bounce-soft.json":                {{ID: "4323372036854775808", Email: "carol@example.net", Type: SoftBounce, At: at("2026-11-20T09:58:43Z"), SMTPCode: 552, Enhanced: "5.2.2", Diagnostic: "smtp;552 5.2.2 Mailbox full"}},
		"postmark-bounce-autoresponder.json":       nil,
		"postmark-spam-complaint.json":             {{ID: "42", Email: "erin@example.com", Type: Complaint, At: at("2026-11-20T16:33:54.9070259Z")}},
		"postmark-subscription-change.json":        {{ID: hashID(NamePostmark, readTestdata(t, "postmark-subscription-change.json")), Email: "frank@example.com", Type: Unsubscribed, At: at("2026-11-20T16:04:28.8123456Z")}},
		"postmark-subscription-change-bounce.json": nil,
		"postmark-open.json":                       nil,
	} {
		t.Run(file, func(t *testing.T) {
			res, err := (&Postmark{}).Receive(readTestdata(t, file), basic(postmarkUser, postmarkPass), postmarkUser, PostmarkPassHash(postmarkPass))
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res)
			sameEvents(t, res.Events, want)
			if skipped := len(want) == 0; (res.Skipped == 1) != skipped {
				t.Errorf("skipped %d", res.Skipped)
			}
		})
	}
}

func TestPostmarkAuth(t *testing.T) {
	b := readTestdata(t, "postmark-bounce-hard.json")
	hash := PostmarkPassHash(postmarkPass)
	for name, h := range map[string]string{
		"wrong password":         basic(postmarkUser, "Kq8#mZ2:vL9P"),
		"wrong user":             basic("verifyd2", postmarkPass),
		"no header":              "",
		"user alone":             "Basic " + base64.StdEncoding.EncodeToString([]byte(postmarkUser)),
		"password as the user":   basic(postmarkPass, postmarkUser),
		"another scheme":         "Bearer " + base64.StdEncoding.EncodeToString([]byte(postmarkUser+":"+postmarkPass)),
		"not base64":             "Basic !!!",
		"the hash as password":   basic(postmarkUser, hash),
		"empty credentials":      basic("", ""),
		"too long":               basic(postmarkUser, postmarkPass+strings.Repeat(" ", maxAuthorization)),
		"scheme without a space": "Basic" + base64.StdEncoding.EncodeToString([]byte(postmarkUser+":"+postmarkPass)),
	} {
		t.Run(name, func(t *testing.T) {
			res, err := (&Postmark{}).Receive(b, h, postmarkUser, hash)
			wantKind(t, err, ErrSignature)
			if len(res.Events) != 0 {
				t.Error("refused, yet events")
			}
		})
	}
	t.Run("scheme in any case", func(t *testing.T) {
		h := "bASIC " + strings.TrimPrefix(basic(postmarkUser, postmarkPass), "Basic ")
		if _, err := (&Postmark{}).Receive(b, h, postmarkUser, strings.ToUpper(hash)); err != nil {
			t.Error(err)
		}
	})
	for name, c := range map[string][2]string{
		"no user":           {"", hash},
		"no hash":           {postmarkUser, ""},
		"hash not hex":      {postmarkUser, strings.Repeat("z", 64)},
		"hash too short":    {postmarkUser, hash[:62]},
		"password, no hash": {postmarkUser, postmarkPass},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := (&Postmark{}).Receive(b, basic(postmarkUser, postmarkPass), c[0], c[1])
			wantKind(t, err, ErrConfig)
		})
	}
}

func TestPostmarkPayload(t *testing.T) {
	for name, c := range map[string]struct {
		body   string
		events int
		ok     bool
	}{
		"not JSON":                        {body: "RecordType=Bounce"},
		"an array":                        {body: `[{"RecordType":"Bounce"}]`},
		"bounce without email":            {body: `{"RecordType":"Bounce","Type":"HardBounce","ID":1,"BouncedAt":"2026-11-20T09:58:43Z"}`},
		"bounce without time":             {body: `{"RecordType":"Bounce","Type":"HardBounce","ID":1,"Email":"a@example.com"}`},
		"delivery with a bad time":        {body: `{"RecordType":"Delivery","Recipient":"a@example.com","DeliveredAt":"yesterday"}`},
		"suppression of the wrong type":   {body: `{"RecordType":"SubscriptionChange","Recipient":"a@example.com","SuppressSending":"yes"}`},
		"bounce by TypeCode":              {body: `{"RecordType":"Bounce","TypeCode":1,"ID":7,"Email":"a@example.com","BouncedAt":"2026-11-20T09:58:43"}`, events: 1, ok: true},
		"type Postmark may add":           {body: `{"RecordType":"Bounce","Type":"SomethingNew","ID":8,"Email":"a@example.com","BouncedAt":"2026-11-20T09:58:43Z"}`, ok: true},
		"reactivation":                    {body: `{"RecordType":"SubscriptionChange","Recipient":"a@example.com","ChangedAt":"2026-11-20T09:58:43Z","Origin":"Customer","SuppressSending":false,"SuppressionReason":null}`, ok: true},
		"suppressed by the customer":      {body: `{"RecordType":"SubscriptionChange","Recipient":"a@example.com","ChangedAt":"2026-11-20T09:58:43Z","Origin":"Customer","SuppressSending":true,"SuppressionReason":"ManualSuppression"}`, ok: true},
		"inbound, no RecordType":          {body: `{"FromFull":{"Email":"a@example.com"},"Subject":"hi"}`, ok: true},
		"click":                           {body: `{"RecordType":"Click","Recipient":"a@example.com"}`, ok: true},
		"spam complaint in a bounce hook": {body: `{"RecordType":"Bounce","Type":"SpamComplaint","ID":9,"Email":"a@example.com","BouncedAt":"2026-11-20T09:58:43Z"}`, events: 1, ok: true},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := parsePostmark([]byte(c.body))
			if !c.ok {
				wantKind(t, err, ErrPayload)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res)
			if len(res.Events) != c.events || len(res.Events)+res.Skipped != 1 {
				t.Errorf("%d events, %d skipped; want %d events", len(res.Events), res.Skipped, c.events)
			}
		})
	}
}

// TestPostmarkBounceTypes: every type of Postmark's list, by name and
// by code, maps as README.md says.
func TestPostmarkBounceTypes(t *testing.T) {
	want := map[string]string{
		"HardBounce": HardBounce, "BadEmailAddress": HardBounce,
		"Transient": SoftBounce, "SoftBounce": SoftBounce, "DnsError": SoftBounce, "Unknown": SoftBounce,
		"SpamNotification": SoftBounce, "VirusNotification": SoftBounce, "Blocked": SoftBounce, "DMARCPolicy": SoftBounce,
		"SpamComplaint": Complaint, "Unsubscribe": Unsubscribed,
		"Subscribe": "", "AutoResponder": "", "AddressChange": "", "OpenRelayTest": "", "ChallengeVerification": "",
		"ManuallyDeactivated": "", "Unconfirmed": "", "SMTPApiError": "", "InboundError": "", "TemplateRenderingFailed": "",
	}
	if len(postmarkTypeCodes) != len(want) {
		t.Errorf("%d type codes, %d types", len(postmarkTypeCodes), len(want))
	}
	for code, name := range postmarkTypeCodes {
		typ, ok := want[name]
		if !ok {
			t.Errorf("code %d: type %s not in the list", code, name)
			continue
		}
		for _, rec := range []string{
			`{"RecordType":"Bounce","Type":"` + name + `","ID":1,"Email":"a@example.com","BouncedAt":"2026-11-20T09:58:43Z"}`,
			`{"RecordType":"Bounce","TypeCode":` + strconv.Itoa(code) + `,"ID":1,"Email":"a@example.com","BouncedAt":"2026-11-20T09:58:43Z"}`,
		} {
			res, err := parsePostmark([]byte(rec))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if len(res.Events) == 1 {
				got = res.Events[0].Type
			}
			if got != typ {
				t.Errorf("%s: %q, want %q", rec, got, typ)
			}
		}
	}
}
