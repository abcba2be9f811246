package server

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble/pebbletest"
)

func TestDecodeBatch(t *testing.T) {
	g := webhookGuard{}
	long := strings.Repeat("a", 310) + "@b.test" // 317 characters
	tooLong := strings.Repeat("é", 314) + "@b.test"
	for _, tc := range []struct {
		body   string
		issues []string // "path: message fragment"
	}{
		{`{"emails":["a@b.test"]}`, nil},
		{`{"emails":["a@b.test","not an address@"],"listName":"March","webhookUrl":"https://h.example/x"}`, nil},
		{`{"emails":["a@b.test","nope","also nope"]}`, []string{"emails[1]: no @", "emails[2]: no @"}},
		{`{"emails":["a@b.test"],"listName":"a\u0000b"}`, []string{"listName: control characters"}},
		{`{"emails":["a@b.test"],"listName":"line\nbreak"}`, []string{"listName: control characters"}},
		{`{"emails":["a@b.test"],"listName":"\ud800"}`, []string{"listName: lone surrogate"}},
		{`{"emails":["a@b.test"],"listName":"März 2026 — ☃"}`, nil},
		{`{"emails":["` + long + `"]}`, nil},
		{` { "emails" : [ "a@b.test" ] } `, nil},
		{`{}`, []string{"emails: is required"}},
		{`{"emails":[]}`, []string{"emails: at least 1"}},
		{`{"emails":"a@b.test"}`, []string{"emails: must be an array"}},
		{`{"emails":{"a":1}}`, []string{"emails: must be an array"}},
		{`{"emails":[1,null,true,{"x":[1]},["y"],"ok@b.test",""]}`, []string{
			"emails[0]: must be a string", "emails[1]: must be a string", "emails[2]: must be a string",
			"emails[3]: must be a string", "emails[4]: must be a string", "emails[6]: must not be empty"}},
		{`{"emails":["` + tooLong + `"]}`, []string{"emails[0]: at most 320"}},
		{`{"emails":["a@b.test"],"listName":"` + strings.Repeat("l", 201) + `"}`, []string{"listName: at most 200"}},
		{`{"emails":["a@b.test"],"listName":5}`, []string{"listName: must be a string"}},
		{`{"emails":["a@b.test"],"webhookUrl":"/relative"}`, []string{"webhookUrl: absolute"}},
		{`{"emails":["a@b.test"],"webhookUrl":"ftp://x.example/"}`, []string{"webhookUrl: http or https"}},
		{`{"emails":["a@b.test"],"webhookUrl":"http://10.0.0.1/hook"}`, []string{"webhookUrl: webhook address 10.0.0.1 refused: private"}},
		{`{"emails":["a@b.test"],"webhookUrl":null}`, []string{"webhookUrl: must be a string"}},
		{`{"emails":["a@b.test"],"extra":{"deep":[1,2]},"more":1}`, []string{"extra: unknown property", "more: unknown property"}},
		{`{"emails":["a@b.test"],"emails":["c@d.test"]}`, []string{": appears twice"}},
		{`{"emails":["a@b.test"]} x`, []string{": data after"}},
		{`{"emails":["a@b.test"]`, []string{": malformed JSON"}},
		{`["a@b.test"]`, []string{": must be a JSON object"}},
		{``, []string{": must be a JSON object"}},
		{`{"emails":["a@b.test",]}`, []string{": malformed JSON"}},
	} {
		_, issues := decodeBatch([]byte(tc.body), 10, g)
		var got []string
		for _, is := range issues {
			got = append(got, is.Path+": "+is.Message)
		}
		if len(got) != len(tc.issues) {
			t.Errorf("%.80s: issues %q, want %q", tc.body, got, tc.issues)
			continue
		}
		for i := range got {
			path, frag, _ := strings.Cut(tc.issues[i], ": ")
			if !strings.HasPrefix(got[i], path+": ") || !strings.Contains(got[i], frag) {
				t.Errorf("%.80s: issue %q, want %q", tc.body, got[i], tc.issues[i])
			}
		}
	}
}

func TestDecodeBatchLimits(t *testing.T) {
	emails := make([]string, 7)
	for i := range emails {
		emails[i] = fmt.Sprintf("u%d@b.test", i)
	}
	b, _ := json.Marshal(map[string]any{"emails": emails})
	if _, issues := decodeBatch(b, 7, webhookGuard{}); len(issues) != 0 {
		t.Errorf("7 of 7: %v", issues)
	}
	if _, issues := decodeBatch(b, 6, webhookGuard{}); len(issues) != 1 || !strings.Contains(issues[0].Message, "at most 6 items, not 7") {
		t.Errorf("7 of 6: %v", issues)
	}
	// Many bad items: the list is capped and says how many more.
	bad := strings.Repeat("1,", 300) + "1"
	_, issues := decodeBatch([]byte(`{"emails":[`+bad+`]}`), 1000, webhookGuard{})
	if len(issues) != httpapi.MaxIssues+1 || !strings.Contains(issues[httpapi.MaxIssues].Message, "and 201 more") {
		t.Errorf("%d issues, last %v", len(issues), issues[len(issues)-1])
	}
}

// TestNormalize: spec §2.2, "Lower-cased and de-duplicated by the
// service": every address lower-cased, its local part too (Unicode
// letters as well); repeats dropped among every spelling of an address (a
// quoted local part that needs no quotes, an IDN domain in A-labels), the
// first place kept; a string that is no address is lower-cased and kept;
// one that is not UTF-8 has its ASCII letters lower-cased, its bad bytes
// kept (so it stays no address).
func TestNormalize(t *testing.T) {
	got := normalize([]string{"Ann@X.test", "bob@x.test", "ann@x.TEST", `"ann"@x.test`, "ÉVE@x.test", "éve@x.test",
		"u@XN--BCHER-KVA.de", "u@bücher.de", "junk", "JUNK", `"John Doe"@x.test`, "A\xffB@x.test"})
	want := []string{"ann@x.test", "bob@x.test", "éve@x.test", "u@bücher.de", "junk", `"john doe"@x.test`, "a\xffb@x.test"}
	if !slices.Equal(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
}

// FuzzDecodeBatch: any body decodes without panicking, and a body without
// issues yields 1 to max non-empty addresses of at most 320 characters.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range []string{`{"emails":["a@b.test"]}`, `{"emails":[1,[2,{}]],"x":{}}`, `{"emails":["a@"],"listName":"x","webhookUrl":"https://h.example/"}`, `{`, `[`, `{"emails":[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, issues := decodeBatch(body, 10, webhookGuard{})
		if len(issues) > 0 {
			return
		}
		if len(req.Emails) < 1 || len(req.Emails) > 10 {
			t.Fatalf("accepted %d addresses", len(req.Emails))
		}
		for _, e := range req.Emails {
			if e == "" || len([]rune(e)) > 320 {
				t.Fatalf("accepted %q", e)
			}
		}
	})
}

// TestCSV: the header and column order of spec §4.4, one row per
// address in upload order, RFC 4180 quoting of addresses with commas,
// quotes and line breaks, booleans as true/false, an empty mx_host.
func TestCSV(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 10)
	addrs := []string{`"john,doe"@x.test`, `a"b@x.test`, "plain@x.test", "line\nbreak@x.test", "nomx@nowhere.test"}
	j, err := db.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: addrs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartJob(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	probed := time.Date(2026, 11, 21, 10, 0, 0, 123_000_000, time.UTC)
	var rs []storage.JobResult
	for i, a := range addrs {
		r := valid(a)
		r.ProbedAt = probed
		r.Checks.IsRoleBased = i == 1
		r.Checks.IsCatchAll = i == 2
		r.Checks.IsDisposable = i == 3
		r.Checks.IsFreeProvider = i == 0
		if i == 4 {
			r.Status, r.Reason, r.Score, r.Checks.MXHost, r.Checks.MX = probe.StatusInvalid, probe.ReasonNoMX, 0, "", false
		}
		res := receipt.Stored(a, r)
		res.Receipt, _ = receipt.Unsigned(r, a)
		rs = append(rs, storage.JobResult{Index: i, Result: res})
	}
	// Written in two chunks, out of order: the CSV is in upload order.
	if _, err := db.PutJobResults(t.Context(), j.ID, rs[3:]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutJobResults(t.Context(), j.ID, rs[:3]); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := writeCSV(t.Context(), &buf, db, j.ID, nil)
	if err != nil || n != len(addrs) {
		t.Fatalf("writeCSV: %d rows, %v", n, err)
	}
	if !strings.HasPrefix(buf.String(), "email,status,score,is_disposable,is_role_based,is_catch_all,is_free_provider,mx_host,latency_ms,probed_at\r\n") {
		t.Fatalf("header: %q", buf.String()[:120])
	}
	if !strings.Contains(buf.String(), "\"\"\"john,doe\"\"@x.test\",valid,90,false,false,false,true,mx.x.test,12,2026-11-21T10:00:00.123Z\r\n") {
		t.Errorf("quoting of a comma and quotes:\n%s", buf.String())
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		csvHeader,
		{`"john,doe"@x.test`, "valid", "90", "false", "false", "false", "true", "mx.x.test", "12", "2026-11-21T10:00:00.123Z"},
		{`a"b@x.test`, "valid", "90", "false", "true", "false", "false", "mx.x.test", "12", "2026-11-21T10:00:00.123Z"},
		{"plain@x.test", "valid", "90", "false", "false", "true", "false", "mx.x.test", "12", "2026-11-21T10:00:00.123Z"},
		{"line\nbreak@x.test", "valid", "90", "true", "false", "false", "false", "mx.x.test", "12", "2026-11-21T10:00:00.123Z"},
		{"nomx@nowhere.test", "invalid", "0", "false", "false", "false", "false", "", "12", "2026-11-21T10:00:00.123Z"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i := range want {
		if !slices.Equal(rows[i], want[i]) {
			t.Errorf("row %d: %q, want %q", i, rows[i], want[i])
		}
	}
}

// webhookGuard is the SSRF guard's verdict on a posted webhookUrl, as
// webhook.Dispatcher.CheckPosted gives it.
type webhookGuard struct{}

func (webhookGuard) CheckPosted(raw string) error {
	_, err := (&webhook.Guard{}).CheckURL(raw)
	return err
}

// valid is the engine's result for a deliverable address.
func valid(email string) *probe.Result {
	d := email[strings.LastIndexByte(email, '@')+1:]
	return &probe.Result{Email: email, Status: probe.StatusValid, Reason: probe.ReasonOK, Score: 90,
		Checks:   probe.Checks{Syntax: true, MX: true, Domain: d, MXHost: "mx." + d},
		ProbedAt: time.Now(), Latency: 12 * time.Millisecond}
}
