package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
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

// validateRequest is the body of POST /v1/validate (spec §2.1).
type validateRequest struct {
	Email string
	Cache bool
}

// decodeValidate reads a validate body strictly: one JSON object, "email"
// a non-empty string of at most 320 characters with an "@", "cache" a
// boolean, nothing else, no member twice. Every problem is reported, not
// only the first. Address syntax beyond the "@" is the engine's business: a
// malformed address gets a 200 receipt with status invalid (DESIGN.md).
func decodeValidate(body []byte) (validateRequest, []Issue) {
	if req, ok := decodeValidateFast(body); ok {
		return req, nil
	}
	return decodeValidateSlow(body)
}

// decodeValidateFast reads the common body, {"email":"…"} with an optional
// "cache":true|false in either order and JSON whitespace around tokens,
// without encoding/json. It gives up (ok false) on anything else — an
// escape or a control character or invalid UTF-8 in the string, another
// member, a repeated one, another value type, an email without "@" or too
// long — and decodeValidateSlow decides. FuzzDecodeValidate checks that
// where it answers, decodeValidateSlow answers the same.
func decodeValidateFast(b []byte) (req validateRequest, ok bool) {
	i := 0
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	// str reads a string without escapes and returns its contents.
	str := func() ([]byte, bool) {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		start := i + 1
		for j := start; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				i = j + 1
				return b[start:j], true
			case c == '\\' || c < 0x20:
				return nil, false
			}
		}
		return nil, false
	}
	ws()
	if i >= len(b) || b[i] != '{' {
		return req, false
	}
	i++
	var seenEmail, seenCache bool
	for {
		ws()
		name, ok := str()
		if !ok {
			return req, false
		}
		ws()
		if i >= len(b) || b[i] != ':' {
			return req, false
		}
		i++
		ws()
		switch string(name) {
		case "email":
			v, ok := str()
			if seenEmail || !ok || !utf8.Valid(v) || bytes.ContainsRune(v, utf8.RuneError) || bytes.IndexByte(v, '@') < 0 || utf8.RuneCount(v) > MaxEmailLength {
				return req, false
			}
			seenEmail, req.Email = true, string(v)
		case "cache":
			switch {
			case seenCache:
				return req, false
			case bytes.HasPrefix(b[i:], []byte("true")):
				req.Cache, i = true, i+4
			case bytes.HasPrefix(b[i:], []byte("false")):
				i += 5
			default:
				return req, false
			}
			seenCache = true
		default:
			return req, false
		}
		ws()
		if i >= len(b) {
			return req, false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '}' {
			return req, false
		}
		i++
		ws()
		return req, seenEmail && i == len(b)
	}
}

// decodeValidateSlow is decodeValidate with encoding/json, for every body.
func decodeValidateSlow(body []byte) (validateRequest, []Issue) {
	var req validateRequest
	var issues []Issue
	seenEmail := false
	err := WalkObject(body, func(name string, dec *json.Decoder) error {
		switch name {
		case "email":
			seenEmail = true
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			s, msg := emailValue(raw)
			if msg != "" {
				issues = append(issues, Issue{Path: "email", Message: msg})
			} else if !strings.Contains(s, "@") {
				issues = append(issues, Issue{Path: "email", Message: "must be an email address (no @)"})
			}
			req.Email = s
		case "cache":
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			switch string(raw) {
			case "true":
				req.Cache = true
			case "false":
			default:
				issues = append(issues, Issue{Path: "cache", Message: "must be a boolean"})
			}
		default:
			issues = append(issues, Issue{Path: name, Message: "unknown property"})
			var skip json.RawMessage
			return dec.Decode(&skip)
		}
		return nil
	})
	if err != nil {
		return req, []Issue{{Path: "", Message: err.Error()}}
	}
	if !seenEmail {
		issues = append(issues, Issue{Path: "email", Message: "is required"})
	}
	return req, issues
}

// emailValue checks one email value of a request: a non-empty JSON string
// of at most MaxEmailLength characters. It returns the string, or the
// problem.
func emailValue(raw json.RawMessage) (string, string) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", "must be a string"
	}
	if msg := CheckText(s); msg != "" {
		return "", msg
	}
	switch n := utf8.RuneCountInString(s); {
	case n == 0:
		return "", "must not be empty"
	case n > MaxEmailLength:
		return "", fmt.Sprintf("must be at most %d characters, not %d", MaxEmailLength, n)
	}
	return s, ""
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
