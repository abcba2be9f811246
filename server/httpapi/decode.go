package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// Issue is one problem of a request body, as details.issues of spec §7
// lists them. Path names the field: "email", "emails[3]", "cache", or ""
// for the body itself.
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// MaxEmailLength is spec §2.1's limit, in characters.
const MaxEmailLength = 320

// EmailIssue is the problem with an email value of a request (POST
// /v1/validate's email, each of POST /v1/batch's emails), "" when there
// is none: not valid Unicode text (CheckText), empty, longer than
// MaxEmailLength characters, or without an "@" (spec §2.1, §2.2: email
// format). Address syntax beyond the "@" is the engine's to judge: a
// malformed address is a result (invalid, syntax_error), never a 400.
func EmailIssue(s string) string {
	if msg := CheckText(s); msg != "" {
		return msg
	}
	switch n := utf8.RuneCountInString(s); {
	case n == 0:
		return "must not be empty"
	case n > MaxEmailLength:
		return fmt.Sprintf("must be at most %d characters, not %d", MaxEmailLength, n)
	case !strings.Contains(s, "@"):
		return "must be an email address (no @)"
	}
	return ""
}

// Issues collects a request's problems, at most MaxIssues of them; the
// last one then says how many more there were.
type Issues struct {
	list  []Issue
	extra int
}

// MaxIssues bounds the issues one answer lists.
const MaxIssues = 100

// Add records the problem of the field at path.
func (is *Issues) Add(path, format string, args ...any) {
	if len(is.list) >= MaxIssues {
		is.extra++
		return
	}
	is.list = append(is.list, Issue{Path: path, Message: fmt.Sprintf(format, args...)})
}

// List is the problems recorded, nil when there are none.
func (is *Issues) List() []Issue {
	if is.extra > 0 {
		return append(is.list, Issue{Path: "", Message: fmt.Sprintf("and %d more problems", is.extra)})
	}
	return is.list
}

// WalkObject decodes body as one JSON object and calls member for each
// member name, with the decoder positioned at its value; member must
// consume the value. Duplicate names, trailing data, anything but an
// object and a body that is not UTF-8 (spec §1.5; encoding/json would
// quietly turn the bad bytes into U+FFFD) are errors, worded for a client
// (details.issues). The request decoders of every endpoint use it.
func WalkObject(body []byte, member func(name string, dec *json.Decoder) error) error {
	if !utf8.Valid(body) {
		return fmt.Errorf("body must be UTF-8: byte %d is not", invalidUTF8At(body))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("body must be a JSON object: %s", jsonErr(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("body must be a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("malformed JSON: %s", jsonErr(err))
		}
		name, _ := tok.(string)
		if seen[name] {
			return fmt.Errorf("property %q appears twice", name)
		}
		seen[name] = true
		if err := member(name, dec); err != nil {
			return fmt.Errorf("malformed JSON: %s", jsonErr(err))
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("malformed JSON: %s", jsonErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("malformed JSON: data after the object")
	}
	return nil
}

// CheckText is the problem with a decoded JSON string that holds U+FFFD:
// encoding/json puts it in place of a lone surrogate escape (\ud800), and
// no real address holds it; "" when there is none. An address is never
// probed or charged in an altered form.
func CheckText(s string) string {
	if strings.ContainsRune(s, utf8.RuneError) {
		return "must be valid Unicode text: it holds U+FFFD or a lone surrogate escape"
	}
	return ""
}

// invalidUTF8At is the offset of the first byte of b that is not UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// jsonErr words a decoder error for a client, without Go type names.
func jsonErr(err error) string {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return "unexpected end of input"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at offset %d", se.Error(), se.Offset)
	}
	return "invalid JSON"
}

// QueryIssues reports the query parameters outside known, and those given
// more than once (limit=50&limit=abc is refused, not read as its first
// value). The /v1 routes and the dashboard's JSON routes (server/web)
// check their queries with it.
func QueryIssues(args *fasthttp.Args, known ...string) []Issue {
	var issues []Issue
	seen := make(map[string]bool, args.Len())
	for k := range args.All() {
		name := string(k)
		switch {
		case !slices.Contains(known, name):
			if !seen[name] {
				issues = append(issues, Issue{Path: name, Message: "unknown query parameter"})
			}
		case seen[name]:
			issues = append(issues, Issue{Path: name, Message: "appears more than once"})
		}
		seen[name] = true
	}
	return issues
}
