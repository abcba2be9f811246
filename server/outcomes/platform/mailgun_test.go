package platform

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"
)

const mailgunKey = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"

// signMailgun puts a signature in a webhook body: the hex HMAC-SHA256
// of timestamp and token with key.
func signMailgun(t testing.TB, b []byte, key string, ts time.Time, token string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	sec := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(sec + token))
	sig, _ := json.Marshal(map[string]string{"timestamp": sec, "token": token, "signature": hex.EncodeToString(mac.Sum(nil))})
	m["signature"] = sig
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// token is a fresh token for test n.
func token(n int) string { return fmt.Sprintf("%050d", n) }

func TestMailgun(t *testing.T) {
	at := func(sec float64) time.Time { return (number(strconv.FormatFloat(sec, 'f', -1, 64))).time() }
	for file, want := range map[string][]Event{
		"mailgun-delivered.json": {{ID: "CPgfbmQMTCKtHW6uIWtuVe", Email: "ann@example.com", Type: Delivered, At: time.Date(2026, 11, 20, 9, 59, 55, 123456000, time.UTC), SMTPCode: 250, Diagnostic: "OK"}},
		"mailgun-failed-permanent.json": {{ID: "G9Bn5sl1TC6nu79C8C0bwg", Email: "bob@example.org", Type: HardBounce, At: at(1795168796.5), SMTPCode: 550, Enhanced: "5.1.1",
			Diagnostic: "5.1.1 The email account that you tried to reach does not exist. Please try double-checking the recipient's email address for typos or unnecessary spaces."}},
		// The code as a string; the enhanced code read from the message.
		"mailgun-failed-temporary.json": {{ID: "Fs7-5t81S2ml8VzHb9fGsA", Email: "carol@example.net", Type: SoftBounce, At: at(1795168797), SMTPCode: 452, Enhanced: "4.2.2",
			Diagnostic: "452 4.2.2 The email account that you tried to reach is over quota."}},
		// Mailgun's own 605 is no SMTP code; the description stands in.
		"mailgun-failed-suppressed.json": {{ID: "kB2R4E8RTRaxk5oO3IZoDg", Email: "dave@example.com", Type: HardBounce, At: at(1795168798.25), Diagnostic: "Not delivering to previously bounced address"}},
		"mailgun-complained.json":        {{ID: "-Agny091SquKnsrW2NEKUA", Email: "erin@example.com", Type: Complaint, At: at(1795168799)}},
		"mailgun-unsubscribed.json":      {{ID: "Ase7i2zsRYeDXztHGENqRA", Email: "frank@example.com", Type: Unsubscribed, At: at(1795168799.5)}},
		"mailgun-opened.json":            nil,
	} {
		t.Run(file, func(t *testing.T) {
			m := &Mailgun{Now: fixedClock}
			b := signMailgun(t, readTestdata(t, file), mailgunKey, testNow.Add(-time.Minute), token(1))
			res, err := m.Receive(b, mailgunKey)
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

// TestMailgunEvents: what parseMailgunEvent makes of event-data that
// the examples do not show.
func TestMailgunEvents(t *testing.T) {
	for name, c := range map[string]struct {
		data string
		typ  string // "" for skipped
		ok   bool
	}{
		"failed of no severity, soft": {data: `{"event":"failed","id":"a","timestamp":1795168800,"recipient":"a@example.com"}`, typ: SoftBounce, ok: true},
		"failed of a new severity":    {data: `{"event":"failed","severity":"fatal","id":"a","timestamp":1795168800,"recipient":"a@example.com"}`, typ: SoftBounce, ok: true},
		"rejected":                    {data: `{"event":"rejected","reject":{"reason":"no"}}`, ok: true},
		"accepted, any shape":         {data: `{"event":"accepted","recipient":5}`, ok: true},
		"not an object":               {data: `[]`},
		"no recipient":                {data: `{"event":"delivered","id":"a","timestamp":1795168800}`},
		"timestamp in ms":             {data: `{"event":"delivered","id":"a","timestamp":1795168800000,"recipient":"a@example.com"}`},
		"code of the wrong kind":      {data: `{"event":"failed","id":"a","timestamp":1795168800,"recipient":"a@example.com","delivery-status":{"code":{"x":1},"message":"550 5.1.1 no"}}`, typ: SoftBounce, ok: true},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := parseMailgunEvent([]byte(c.data))
			if !c.ok {
				wantKind(t, err, ErrPayload)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res)
			got := ""
			if len(res.Events) == 1 {
				got = res.Events[0].Type
			}
			if got != c.typ || (got == "") != (res.Skipped == 1) {
				t.Errorf("%+v, want %q", res, c.typ)
			}
		})
	}
}

func TestMailgunForged(t *testing.T) {
	b := readTestdata(t, "mailgun-failed-permanent.json")
	signed := signMailgun(t, b, mailgunKey, testNow, token(1))
	edit := func(field, value string) []byte {
		var m map[string]map[string]any
		if err := json.Unmarshal(signed, &m); err != nil {
			t.Fatal(err)
		}
		if value == "" {
			delete(m["signature"], field)
		} else {
			m["signature"][field] = value
		}
		out, _ := json.Marshal(m)
		return out
	}
	for name, body := range map[string][]byte{
		"signed with another key":         signMailgun(t, b, "key-another", testNow, token(1)),
		"token changed after signing":     edit("token", token(2)),
		"timestamp changed after signing": edit("timestamp", strconv.FormatInt(testNow.Unix()-1, 10)),
		"signature not hex":               edit("signature", "zz"),
		"signature cut":                   edit("signature", "12d99f5a"),
		"no signature":                    edit("signature", ""),
		"no token":                        edit("token", ""),
		"no timestamp":                    edit("timestamp", ""),
		"timestamp not a number":          edit("timestamp", "now"),
		"token too long":                  edit("token", token(1)+string(make([]byte, maxToken))),
		"stale timestamp":                 signMailgun(t, b, mailgunKey, testNow.Add(-5*time.Minute-time.Second), token(1)),
		"timestamp in the future":         signMailgun(t, b, mailgunKey, testNow.Add(5*time.Minute+time.Second), token(1)),
		"no signature object":             []byte(`{"event-data":{"event":"delivered"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			res, err := (&Mailgun{Now: fixedClock}).Receive(body, mailgunKey)
			wantKind(t, err, ErrSignature)
			if len(res.Events) != 0 {
				t.Errorf("refused, yet %d events", len(res.Events))
			}
		})
	}
	t.Run("no key", func(t *testing.T) {
		_, err := (&Mailgun{Now: fixedClock}).Receive(signed, "")
		wantKind(t, err, ErrConfig)
	})
	t.Run("not JSON", func(t *testing.T) {
		_, err := (&Mailgun{Now: fixedClock}).Receive([]byte("timestamp=1&token=2"), mailgunKey)
		wantKind(t, err, ErrPayload)
	})
	t.Run("no event-data", func(t *testing.T) {
		_, err := (&Mailgun{Now: fixedClock}).Receive(signMailgun(t, []byte(`{}`), mailgunKey, testNow, token(3)), mailgunKey)
		wantKind(t, err, ErrPayload)
	})
}

// TestMailgunReplay: a token is taken once per key, whatever the body
// it comes with, until its timestamp is too old to be taken anyway.
func TestMailgunReplay(t *testing.T) {
	now := testNow
	m := &Mailgun{Now: func() time.Time { return now }}
	b := readTestdata(t, "mailgun-failed-permanent.json")
	signed := signMailgun(t, b, mailgunKey, now, token(1))
	if _, err := m.Receive(signed, mailgunKey); err != nil {
		t.Fatal(err)
	}
	replays := mailgunReplays.Get()
	_, err := m.Receive(signed, mailgunKey)
	wantKind(t, err, ErrSignature)
	if mailgunReplays.Get() != replays+1 {
		t.Error("the replay was not counted")
	}

	// The same signature with other event data: Mailgun signs no body,
	// so only the token tells.
	other := signMailgun(t, readTestdata(t, "mailgun-delivered.json"), mailgunKey, now, token(1))
	_, err = m.Receive(other, mailgunKey)
	wantKind(t, err, ErrSignature)

	// Another account's key: its own tokens.
	const key2 = "key-of-another-account"
	if _, err := m.Receive(signMailgun(t, b, key2, now, token(1)), key2); err != nil {
		t.Errorf("the same token with another key: %v", err)
	}

	// A subaccount's event, with the primary account's signature.
	var msg map[string]map[string]any
	json.Unmarshal(signMailgun(t, b, key2, now, token(4)), &msg)
	parent := signMailgun(t, b, mailgunKey, now, token(4))
	var pm map[string]map[string]any
	json.Unmarshal(parent, &pm)
	msg["signature"]["parent-signature"] = pm["signature"]["signature"]
	sub, _ := json.Marshal(msg)
	if _, err := m.Receive(sub, mailgunKey); err != nil {
		t.Errorf("parent-signature: %v", err)
	}

	// Past the window, the timestamp refuses the replay.
	now = now.Add(5*time.Minute + time.Second)
	_, err = m.Receive(signed, mailgunKey)
	wantKind(t, err, ErrSignature)
}

func TestReplayCache(t *testing.T) {
	var c replayCache
	t0 := testNow
	forget := t0.Add(time.Minute)
	if !c.add("a", forget, t0, 2) || !c.add("b", forget, t0, 2) || c.add("a", forget, t0, 2) {
		t.Fatal("a, b, a")
	}
	// Full: the oldest is forgotten for the new one.
	if !c.add("c", forget, t0, 2) || !c.add("a", forget, t0, 2) || c.add("c", forget, t0, 2) {
		t.Error("c, a, c with room for two")
	}
	if len(c.seen) != 2 || len(c.queue) != 2 {
		t.Errorf("%d seen, %d queued", len(c.seen), len(c.queue))
	}
	// Their time over, all are forgotten.
	if !c.add("c", forget.Add(time.Minute), forget, 2) || len(c.seen) != 1 || len(c.queue) != 1 {
		t.Errorf("after their time: %d seen, %d queued", len(c.seen), len(c.queue))
	}
}
