package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/verifyd/verifyd/server/httpapi"
)

func TestDecodeValidate(t *testing.T) {
	long := strings.Repeat("a", 310) + "@example.com" // 322
	for _, tc := range []struct {
		body   string
		req    validateRequest
		issues []httpapi.Issue
	}{
		{`{"email":"a@b.test"}`, validateRequest{Email: "a@b.test"}, nil},
		{`{"email":"a@b.test","cache":true}`, validateRequest{Email: "a@b.test", Cache: true}, nil},
		{` { "cache" : false , "email" : "x@y" } `, validateRequest{Email: "x@y"}, nil},
		{`{"email":"bad syntax @ but has at"}`, validateRequest{Email: "bad syntax @ but has at"}, nil},
		{`{}`, validateRequest{}, []httpapi.Issue{{Path: "email", Message: "is required"}}},
		{`{"email":""}`, validateRequest{}, []httpapi.Issue{{Path: "email", Message: "must not be empty"}}},
		{`{"email":"nobody"}`, validateRequest{Email: "nobody"}, []httpapi.Issue{{Path: "email", Message: "must be an email address (no @)"}}},
		{`{"email":42}`, validateRequest{}, []httpapi.Issue{{Path: "email", Message: "must be a string"}}},
		{`{"email":null}`, validateRequest{}, []httpapi.Issue{{Path: "email", Message: "must be a string"}}},
		{`{"email":["a@b"]}`, validateRequest{}, []httpapi.Issue{{Path: "email", Message: "must be a string"}}},
		{`{"email":"` + long + `"}`, validateRequest{Email: long}, []httpapi.Issue{{Path: "email", Message: "must be at most 320 characters, not 322"}}},
		{`{"email":"a@b","cache":"yes"}`, validateRequest{Email: "a@b"}, []httpapi.Issue{{Path: "cache", Message: "must be a boolean"}}},
		{`{"email":"a@b","extra":1,"more":{"x":[1]}}`, validateRequest{Email: "a@b"}, []httpapi.Issue{{Path: "extra", Message: "unknown property"}, {Path: "more", Message: "unknown property"}}},
		{`{"cache":1,"x":2}`, validateRequest{}, []httpapi.Issue{{Path: "cache", Message: "must be a boolean"}, {Path: "x", Message: "unknown property"}, {Path: "email", Message: "is required"}}},
	} {
		req, issues := decodeValidate([]byte(tc.body))
		if req != tc.req || !reflect.DeepEqual(issues, tc.issues) {
			t.Errorf("%s: %+v %+v, want %+v %+v", tc.body, req, issues, tc.req, tc.issues)
		}
	}
	// 320 characters, not octets: a UTF-8 address of 320 runes passes.
	u := strings.Repeat("é", 300) + "@" + strings.Repeat("x", 14) + ".test"
	if _, issues := decodeValidate([]byte(`{"email":"` + u + `"}`)); issues != nil {
		t.Errorf("320-character UTF-8 address: %v", issues)
	}
}

func TestDecodeValidateMalformed(t *testing.T) {
	for _, body := range []string{
		``, `null`, `[]`, `"a@b"`, `{"email":"a@b"`, `{"email":"a@b"}{}`, `{"email":"a@b"} x`,
		`{"email":"a@b","email":"c@d"}`, `{email:"a@b"}`, `{"email":"a@b",}`, "{\"email\":\"a@b\xff\"}x",
	} {
		_, issues := decodeValidate([]byte(body))
		if len(issues) != 1 || issues[0].Path != "" || issues[0].Message == "" {
			t.Errorf("%q: %+v, want one body-level issue", body, issues)
		}
	}
}

// FuzzDecodeValidate: never panics; an accepted body has a non-empty email
// with an @ of at most 320 characters; issues always carry a message.
func FuzzDecodeValidate(f *testing.F) {
	for _, s := range []string{`{"email":"a@b.test"}`, `{"email":"a@b","cache":true}`, `{}`, `{"x":1}`,
		`{"email":"` + strings.Repeat("a", 330) + `"}`, `[1,2]`, `{"email":"a@b","email":"a@b"}`} {
		f.Add([]byte(s))
	}
	for _, s := range []string{" {\n\"cache\" : false , \"email\":\"ü@b\" }\t", `{"email":"a\u0040b"}`, `{"email":"a@b","cache":tru}`,
		`{"email":"a@b","cache":truex}`, `{"email":"a@b"}x`, `{"email":"a@b",}`, `{"cache":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, issues := decodeValidate(body)
		// The fast path, where it answers, answers as the slow one.
		if fast, ok := decodeValidateFast(body); ok {
			slow, slowIssues := decodeValidateSlow(body)
			if fast != slow || slowIssues != nil {
				t.Fatalf("%q: fast path %+v, slow %+v %v", body, fast, slow, slowIssues)
			}
		}
		for _, is := range issues {
			if is.Message == "" {
				t.Fatalf("issue without message: %+v", is)
			}
		}
		if len(issues) == 0 {
			if req.Email == "" || !strings.Contains(req.Email, "@") || len([]rune(req.Email)) > httpapi.MaxEmailLength {
				t.Fatalf("accepted bad email %q from %q", req.Email, body)
			}
			if !json.Valid(body) {
				t.Fatalf("accepted invalid JSON %q", body)
			}
		}
	})
}

// The bodies clients send most take the fast path.
func TestDecodeValidateFastPath(t *testing.T) {
	for _, body := range []string{`{"email":"user1@bench.test","cache":true}`, `{"email":"a@b.test"}`,
		` { "cache" : false , "email" : "ü@b.test" } `} {
		if _, ok := decodeValidateFast([]byte(body)); !ok {
			t.Errorf("%s: not on the fast path", body)
		}
	}
	for _, body := range []string{`{"email":"a\u0040b"}`, `{"email":"ab"}`, `{"email":"a@b","x":1}`, `{"email":"a@b","email":"a@b"}`,
		`{"cache":true}`, `{"email":"a@b","cache":1}`, `{"email":"a@b"} x`, "{\"email\":\"a@b\xff\"}"} {
		if req, ok := decodeValidateFast([]byte(body)); ok {
			t.Errorf("%s: fast path answered %+v", body, req)
		}
	}
}
