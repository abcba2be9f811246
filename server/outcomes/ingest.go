package outcomes

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/storage"
)

// MaxOutcomes is how many outcomes one POST /v1/outcomes may carry.
const MaxOutcomes = 100_000

// MaxBody is the largest body POST /v1/outcomes takes: 100,000 lines of
// about 300 bytes.
const MaxBody = 32 << 20

// Formats of POST /v1/outcomes.
const (
	FormatJSONLines = "jsonl"
	FormatCSV       = "csv"
)

// ErrContentType is a Content-Type POST /v1/outcomes does not take.
var ErrContentType = errors.New("Content-Type must be application/x-ndjson (JSON lines) or text/csv")

// FormatOf reads a request's Content-Type: JSON lines
// (application/x-ndjson, application/jsonl, application/json) or CSV
// (text/csv), UTF-8.
func FormatOf(contentType string) (string, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", ErrContentType
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "", ErrContentType
	}
	switch mt {
	case "application/x-ndjson", "application/jsonl", "application/json", "application/x-jsonlines":
		return FormatJSONLines, nil
	case "text/csv":
		return FormatCSV, nil
	}
	return "", ErrContentType
}

// Columns are the fields of an outcome line, in JSON lines and CSV alike.
var Columns = []string{"event_id", "email", "event", "time", "smtp_code", "enhanced_code", "diagnostic"}

// line is one outcome as a client writes it.
type line struct {
	EventID      *string `json:"event_id"`
	Email        *string `json:"email"`
	Event        *string `json:"event"`
	Time         *string `json:"time"`
	SMTPCode     *int    `json:"smtp_code"`
	EnhancedCode *string `json:"enhanced_code"`
	Diagnostic   *string `json:"diagnostic"`
}

var enhancedRe = regexp.MustCompile(`^[245]\.[0-9]{1,3}\.[0-9]{1,3}$`)

// Parse reads a POST /v1/outcomes body in format: one outcome per line
// (empty lines skipped; CSV: a header line naming the columns, in any
// order, then one outcome per row). Every problem is an issue whose path
// is "lines[N]" or "lines[N].field", N the line's number as an editor
// counts it (1 is the first line; in CSV, the header). Any issue refuses
// the whole body: nothing is stored.
func Parse(format string, body []byte) ([]storage.Outcome, []httpapi.Issue) {
	var is httpapi.Issues
	if !utf8.Valid(body) {
		is.Add("", "body must be UTF-8")
		return nil, is.List()
	}
	var outs []storage.Outcome
	lines, over := 0, false
	add := func(n int, l *line) {
		if lines++; lines > MaxOutcomes {
			if !over {
				is.Add("", "more than %d outcomes: send them in several requests", MaxOutcomes)
				over = true
			}
			return
		}
		if o, ok := checkLine(&is, n, l); ok {
			outs = append(outs, o)
		}
	}
	switch format {
	case FormatJSONLines:
		n := 0
		for raw := range bytes.Lines(body) {
			n++
			raw = bytes.TrimSpace(raw)
			if len(raw) == 0 {
				continue
			}
			var l line
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&l); err != nil {
				is.Add(fmt.Sprintf("lines[%d]", n), "%s", lineErr(err))
				continue
			}
			if dec.More() {
				is.Add(fmt.Sprintf("lines[%d]", n), "one JSON object per line")
				continue
			}
			add(n, &l)
		}
	case FormatCSV:
		r := csv.NewReader(bytes.NewReader(body))
		r.FieldsPerRecord = -1
		r.ReuseRecord = true
		head, err := r.Read()
		if err != nil {
			is.Add("lines[1]", "a header line naming the columns (%s) is needed", strings.Join(Columns, ", "))
			return nil, is.List()
		}
		cols := make([]string, len(head))
		seen := map[string]bool{}
		for i, h := range head {
			h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
			switch {
			case !slices.Contains(Columns, h):
				is.Add(fmt.Sprintf("lines[1].%s", h), "unknown column; the columns are %s", strings.Join(Columns, ", "))
			case seen[h]:
				is.Add(fmt.Sprintf("lines[1].%s", h), "column appears twice")
			}
			seen[h], cols[i] = true, h
		}
		if is.List() != nil {
			return nil, is.List()
		}
		for {
			rec, err := r.Read()
			if err == io.EOF {
				break
			}
			n, _ := r.FieldPos(0)
			if err != nil {
				var pe *csv.ParseError
				if errors.As(err, &pe) {
					n = pe.Line
				}
				is.Add(fmt.Sprintf("lines[%d]", n), "not CSV: %v", errors.Unwrap(err))
				if pe == nil {
					break
				}
				continue
			}
			if len(rec) != len(cols) {
				is.Add(fmt.Sprintf("lines[%d]", n), "%d fields; the header has %d", len(rec), len(cols))
				continue
			}
			var l line
			for i, v := range rec {
				if v == "" {
					continue // an empty cell is an absent field
				}
				v := v
				switch cols[i] {
				case "event_id":
					l.EventID = &v
				case "email":
					l.Email = &v
				case "event":
					l.Event = &v
				case "time":
					l.Time = &v
				case "enhanced_code":
					l.EnhancedCode = &v
				case "diagnostic":
					l.Diagnostic = &v
				case "smtp_code":
					code, err := strconv.Atoi(v)
					if err != nil || strconv.Itoa(code) != v {
						is.Add(fmt.Sprintf("lines[%d].smtp_code", n), "must be a reply code such as 550")
						code = -1
					}
					l.SMTPCode = &code
				}
			}
			add(n, &l)
		}
	default:
		is.Add("", "%v", ErrContentType)
	}
	if list := is.List(); list != nil {
		return nil, list
	}
	if len(outs) == 0 {
		is.Add("", "no outcomes: the body has no lines")
		return nil, is.List()
	}
	return outs, nil
}

// checkLine turns line n into an outcome, or records its problems.
func checkLine(is *httpapi.Issues, n int, l *line) (storage.Outcome, bool) {
	path := func(f string) string { return fmt.Sprintf("lines[%d].%s", n, f) }
	ok := true
	bad := func(f, format string, args ...any) {
		is.Add(path(f), format, args...)
		ok = false
	}
	var o storage.Outcome
	o.Source = SourceAPI
	switch {
	case l.EventID == nil || *l.EventID == "":
		bad("event_id", "required: the platform's id of the event, which makes a retry safe")
	case len(*l.EventID) > storage.MaxOutcomeEventID || httpapi.CheckText(*l.EventID) != "":
		bad("event_id", "must be 1 to %d bytes of text", storage.MaxOutcomeEventID)
	default:
		o.EventID = *l.EventID
	}
	switch {
	case l.Email == nil:
		bad("email", "required")
	default:
		if msg := httpapi.EmailIssue(*l.Email); msg != "" {
			bad("email", "%s", msg)
			break
		}
		in := address.NewInput(*l.Email)
		if in.Err != nil {
			bad("email", "not an email address: %v", in.Err)
			break
		}
		o.Email = in.Email
	}
	switch {
	case l.Event == nil:
		bad("event", "required: one of %s", strings.Join(storage.OutcomeEvents, ", "))
	case !slices.Contains(storage.OutcomeEvents, *l.Event):
		bad("event", "must be one of %s", strings.Join(storage.OutcomeEvents, ", "))
	default:
		o.Event = *l.Event
	}
	switch {
	case l.Time == nil:
		bad("time", "required: when it happened, RFC 3339 (2026-11-21T10:04:31Z)")
	default:
		t, err := time.Parse(time.RFC3339Nano, *l.Time)
		if err != nil || t.Year() < 2000 || t.Year() > 9999 {
			bad("time", "must be an RFC 3339 date-time, such as 2026-11-21T10:04:31Z")
			break
		}
		o.At = t.UTC()
	}
	if l.SMTPCode != nil {
		if c := *l.SMTPCode; c < 200 || c > 599 {
			if c != -1 { // a CSV cell already reported
				bad("smtp_code", "must be a reply code from 200 to 599")
			}
			ok = false
		} else {
			o.SMTPCode = c
		}
	}
	if l.EnhancedCode != nil {
		if !enhancedRe.MatchString(*l.EnhancedCode) {
			bad("enhanced_code", "must be an enhanced status code such as 5.1.1")
		} else {
			o.Enhanced = *l.EnhancedCode
		}
	}
	if l.Diagnostic != nil {
		d := *l.Diagnostic
		if len(d) > storage.MaxOutcomeDiagnostic || httpapi.CheckText(d) != "" {
			bad("diagnostic", "must be text of at most %d bytes", storage.MaxOutcomeDiagnostic)
		} else {
			o.Diagnostic = d
		}
	}
	return o, ok
}

// lineErr words a line's JSON error for a client.
func lineErr(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("field %s has the wrong type", te.Field)
	case errors.As(err, &te):
		return "not a JSON object"
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON: %s at byte %d", se.Error(), se.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + "; the fields are " + strings.Join(Columns, ", ")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "not JSON: unexpected end of the line"
	}
	return "not a JSON object"
}
