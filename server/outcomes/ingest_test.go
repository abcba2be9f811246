package outcomes

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestFormatOf(t *testing.T) {
	for ct, want := range map[string]string{
		"application/x-ndjson":          FormatJSONLines,
		"application/jsonl":             FormatJSONLines,
		"application/json":              FormatJSONLines,
		"Application/X-NDJSON":          FormatJSONLines,
		"text/csv":                      FormatCSV,
		"text/csv; charset=UTF-8":       FormatCSV,
		"text/csv; charset=utf-16":      "",
		"text/plain":                    "",
		"":                              "",
		"application/x-www-form-urlenc": "",
	} {
		got, err := FormatOf(ct)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("FormatOf(%q) = %q, %v; want %q", ct, got, err, want)
		}
	}
}

// TestParse reads JSON lines and CSV alike, and names each problem by
// its line.
func TestParse(t *testing.T) {
	jl := `{"event_id":"a","email":"Ann@Example.COM","event":"hard_bounce","time":"2026-11-21T10:04:31+01:00","smtp_code":550,"enhanced_code":"5.1.1","diagnostic":"user unknown"}

{"event_id":"b","email":"bob@example.com","event":"delivered","time":"2026-11-21T10:04:32.5Z"}
`
	outs, issues := Parse(FormatJSONLines, []byte(jl))
	if issues != nil || len(outs) != 2 {
		t.Fatalf("JSON lines: %v %v", outs, issues)
	}
	a := outs[0]
	if a.EventID != "a" || a.Email != "Ann@example.com" || a.Event != "hard_bounce" || !a.At.Equal(time.Date(2026, 11, 21, 9, 4, 31, 0, time.UTC)) ||
		a.SMTPCode != 550 || a.Enhanced != "5.1.1" || a.Diagnostic != "user unknown" || a.Source != SourceAPI {
		t.Errorf("first outcome %+v", a)
	}
	csv := "\ufeffEvent_ID,email,event,time,smtp_code,diagnostic\r\n" +
		`a,Ann@Example.COM,hard_bounce,2026-11-21T10:04:31+01:00,550,"user unknown, ""really"""` + "\r\n" +
		"b,bob@example.com,delivered,2026-11-21T10:04:32.5Z,,\r\n"
	outs, issues = Parse(FormatCSV, []byte(csv))
	if issues != nil || len(outs) != 2 || outs[0].Diagnostic != `user unknown, "really"` || outs[1].SMTPCode != 0 {
		t.Fatalf("CSV: %+v %v", outs, issues)
	}

	for _, tc := range []struct {
		format, body string
		want         []string // substrings of the issues, path first
	}{
		{FormatJSONLines, `{"event_id":"a","email":"x@y","event":"delivered","time":"2026-11-21T10:04:31Z","colour":1}`, []string{"lines[1]: unknown field \"colour\""}},
		{FormatJSONLines, `{"event_id":7}`, []string{"lines[1]: field event_id has the wrong type"}},
		{FormatJSONLines, "\n\n[1]", []string{"lines[3]: not a JSON object"}},
		{FormatJSONLines, `{"event_id":"a"} {"event_id":"b"}`, []string{"lines[1]: one JSON object per line"}},
		{FormatJSONLines, `{"email":"no-at","event":"bounced","time":"soon","smtp_code":99,"enhanced_code":"5.1","diagnostic":"` + strings.Repeat("x", 1001) + `"}`,
			[]string{"lines[1].event_id", "lines[1].email", "lines[1].event: must be one of", "lines[1].time", "lines[1].smtp_code", "lines[1].enhanced_code", "lines[1].diagnostic"}},
		{FormatJSONLines, "\xff", []string{": body must be UTF-8"}},
		{FormatJSONLines, "\n \n", []string{": no outcomes"}},
		{FormatCSV, "", []string{"lines[1]: a header line"}},
		{FormatCSV, "event_id,email,email\n", []string{"lines[1].email: column appears twice"}},
		{FormatCSV, "event_id,email,event,time\na,x@y,delivered\n", []string{"lines[2]: 3 fields; the header has 4"}},
		{FormatCSV, "event_id,email,event,time,smtp_code\na,x@y,delivered,2026-11-21T10:04:31Z,5xx\n", []string{"lines[2].smtp_code: must be a reply code"}},
	} {
		_, issues := Parse(tc.format, []byte(tc.body))
		got := fmt.Sprint(issues)
		for _, w := range tc.want {
			path, msg, _ := strings.Cut(w, ": ")
			if !strings.Contains(got, "{"+path+" "+msg) {
				t.Errorf("%s %.60q: issues %s; want %q", tc.format, tc.body, got, w)
			}
		}
	}

	// At most MaxOutcomes, said once.
	var b strings.Builder
	for i := range MaxOutcomes + 2 {
		fmt.Fprintf(&b, `{"event_id":"e%d","email":"a@b.example","event":"delivered","time":"2026-11-21T10:04:31Z"}`+"\n", i)
	}
	_, issues = Parse(FormatJSONLines, []byte(b.String()))
	if len(issues) != 1 || !strings.Contains(issues[0].Message, "more than 100000") {
		t.Errorf("over the limit: %v", issues)
	}
}
