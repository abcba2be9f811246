package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/httpapi"
)

// MaxListName is spec §2.2's limit on listName, in characters.
const MaxListName = 200

// batchRequest is the body of POST /v1/batch (spec §2.2).
type batchRequest struct {
	Emails     []string
	ListName   string
	WebhookURL string
}

// decodeBatch reads a batch body strictly: one JSON object with "emails"
// (an array of 1 to maxEmails non-empty strings of at most 320
// characters, each with an "@"), "listName" (a string of at most 200
// characters, no control characters) and
// "webhookUrl" (an absolute http or https URL the SSRF guard does not
// refuse outright), nothing else, no member twice. Every problem is
// reported (up to httpapi.MaxIssues). Address syntax beyond the "@" is not
// checked here: an address the engine finds malformed is a result row (invalid,
// syntax_error), never a reason to refuse the upload (DESIGN.md).
func decodeBatch(body []byte, maxEmails int, hooks URLChecker) (batchRequest, []httpapi.Issue) {
	var req batchRequest
	var is httpapi.Issues
	seenEmails := false
	err := httpapi.WalkObject(body, func(name string, dec *json.Decoder) error {
		var err error
		switch name {
		case "emails":
			seenEmails = true
			req.Emails, err = decodeEmails(dec, maxEmails, &is)
		case "listName":
			var s string
			var ok bool
			if s, ok, err = stringValue(dec, "listName", &is); ok {
				switch n := utf8.RuneCountInString(s); {
				case httpapi.CheckText(s) != "":
					is.Add("listName", "%s", httpapi.CheckText(s))
				case strings.IndexFunc(s, unicode.IsControl) >= 0:
					is.Add("listName", "must not hold control characters (NUL, line breaks, …)")
				case n > MaxListName:
					is.Add("listName", "must be at most %d characters, not %d", MaxListName, n)
				}
				req.ListName = s
			}
		case "webhookUrl":
			var s string
			var ok bool
			if s, ok, err = stringValue(dec, "webhookUrl", &is); ok {
				if hooks != nil {
					if uerr := hooks.CheckPosted(s); uerr != nil {
						is.Add("webhookUrl", "%v", uerr)
					}
				}
				req.WebhookURL = s
			}
		default:
			is.Add(name, "unknown property")
			err = skipValue(dec)
		}
		return err
	})
	if err != nil {
		return req, []httpapi.Issue{{Path: "", Message: err.Error()}}
	}
	if !seenEmails {
		is.Add("emails", "is required")
	}
	return req, is.List()
}

// decodeEmails reads the emails array.
func decodeEmails(dec *json.Decoder, maxEmails int, is *httpapi.Issues) ([]string, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		is.Add("emails", "must be an array of strings")
		if ok {
			return nil, skipRest(dec, 1)
		}
		return nil, nil
	}
	out := make([]string, 0, 1024)
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		path := func() string { return fmt.Sprintf("emails[%d]", n) }
		switch v := tok.(type) {
		case string:
			// As /v1/validate: spec §2.2 items are in email format.
			// Anything with an "@" is the engine's to judge: a malformed
			// one is a result row (invalid, syntax_error).
			if msg := httpapi.EmailIssue(v); msg != "" {
				is.Add(path(), "%s", msg)
			} else if n < maxEmails {
				out = append(out, v)
			}
		case json.Delim:
			is.Add(path(), "must be a string")
			if err := skipRest(dec, 1); err != nil {
				return nil, err
			}
		default:
			is.Add(path(), "must be a string")
		}
		n++
	}
	if _, err := dec.Token(); err != nil { // ']'
		return nil, err
	}
	switch {
	case n == 0:
		is.Add("emails", "must have at least 1 item")
	case n > maxEmails:
		is.Add("emails", "must have at most %d items, not %d", maxEmails, n)
	}
	return out, nil
}

// stringValue reads a member that must be a string; ok is false (and
// the issue recorded) when it is not.
func stringValue(dec *json.Decoder, path string, is *httpapi.Issues) (s string, ok bool, err error) {
	tok, err := dec.Token()
	if err != nil {
		return "", false, err
	}
	switch v := tok.(type) {
	case string:
		return v, true, nil
	case json.Delim:
		is.Add(path, "must be a string")
		return "", false, skipRest(dec, 1)
	}
	is.Add(path, "must be a string")
	return "", false, nil
}

// skipValue consumes one value.
func skipValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if _, ok := tok.(json.Delim); ok {
		return skipRest(dec, 1)
	}
	return nil
}

// skipRest consumes tokens until depth open arrays or objects are closed.
func skipRest(dec *json.Decoder, depth int) error {
	for depth > 0 {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '[' || d == '{' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// normalize lower-cases and parses each address once
// (address.NewLowerInput) and drops repeats, keeping the first place:
// spec §2.2, "Lower-cased and de-duplicated by the service". The stored
// rows, results.csv, the job's counts and credits_reserved all use the
// lower-cased address; the engine asks for it in RCPT TO as a single
// validation does (address.Address.Rcpt; server/README.md, "Address
// case").
func normalize(emails []string) []string {
	seen := make(map[string]struct{}, len(emails))
	out := make([]string, 0, len(emails))
	for _, e := range emails {
		in := address.NewLowerInput(e)
		if _, dup := seen[in.Email]; dup {
			continue
		}
		seen[in.Email] = struct{}{}
		out = append(out, in.Email)
	}
	return out
}
