package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/verifyd/verifyd/server/httpapi"
)

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
func decodeValidate(body []byte) (validateRequest, []httpapi.Issue) {
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
			if seenEmail || !ok || !utf8.Valid(v) || bytes.ContainsRune(v, utf8.RuneError) || bytes.IndexByte(v, '@') < 0 || utf8.RuneCount(v) > httpapi.MaxEmailLength {
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
func decodeValidateSlow(body []byte) (validateRequest, []httpapi.Issue) {
	var req validateRequest
	var issues []httpapi.Issue
	seenEmail := false
	err := httpapi.WalkObject(body, func(name string, dec *json.Decoder) error {
		switch name {
		case "email":
			seenEmail = true
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			s, msg := emailValue(raw)
			if msg != "" {
				issues = append(issues, httpapi.Issue{Path: "email", Message: msg})
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
				issues = append(issues, httpapi.Issue{Path: "cache", Message: "must be a boolean"})
			}
		default:
			issues = append(issues, httpapi.Issue{Path: name, Message: "unknown property"})
			var skip json.RawMessage
			return dec.Decode(&skip)
		}
		return nil
	})
	if err != nil {
		return req, []httpapi.Issue{{Path: "", Message: err.Error()}}
	}
	if !seenEmail {
		issues = append(issues, httpapi.Issue{Path: "email", Message: "is required"})
	}
	return req, issues
}

// emailValue checks one email value of a request: a JSON string that
// httpapi.EmailIssue finds nothing wrong with. It returns the string, or
// the problem.
func emailValue(raw json.RawMessage) (string, string) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", "must be a string"
	}
	return s, httpapi.EmailIssue(s)
}
