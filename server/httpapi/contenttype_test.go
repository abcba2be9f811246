package httpapi

import (
	"testing"

	"github.com/valyala/fasthttp"
)

func TestCheckJSONType(t *testing.T) {
	for ct, ok := range map[string]bool{
		"":                                     true, // none: read as JSON
		"application/json":                     true,
		"application/json; charset=utf-8":      true,
		"Application/JSON;Charset=UTF-8":       true,
		"APPLICATION/JSON; CHARSET=UTF-8":      true,
		"application/json; charset=utf-9":      false,
		"application/jsom":                     false,
		`application/json; charset="utf-8"`:    true,
		"application/json ; charset=utf-8":     true,
		"application/json; charset=utf-16":     false,
		"application/json; charset=latin1":     false,
		"application/json; charset=utf-8; x=1": false,
		"application/json; x=1":                false,
		"application/json;":                    true, // no parameter after all
		"application/jsonx":                    false,
		"application/problem+json":             false,
		"text/json":                            false,
		"text/plain":                           false,
		"text/plain; charset=utf-8":            false,
		"application/x-www-form-urlencoded":    false,
		"multipart/form-data; boundary=x":      false,
		"application/xml":                      false,
		"*/*":                                  false,
	} {
		var h fasthttp.RequestHeader
		h.SetContentType(ct)
		e := CheckJSONType(&h)
		if (e == nil) != ok {
			t.Errorf("%q: %v, want accepted %v", ct, e, ok)
			continue
		}
		if e != nil && (e.Code != CodeBadRequest || len(e.Details["issues"].([]Issue)) != 1 || e.Details["issues"].([]Issue)[0].Path != "Content-Type") {
			t.Errorf("%q: %+v, want BAD_REQUEST with an issue about Content-Type", ct, e)
		}
	}
}

// TestJSONTypeDoNotAllocate: the spellings nearly every client sends
// cost no allocation (CheckJSONType runs on every request with a body).
func TestJSONTypeDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8"} {
		var h fasthttp.RequestHeader
		h.SetContentType(ct)
		if n := testing.AllocsPerRun(100, func() { CheckJSONType(&h) }); n != 0 {
			t.Errorf("%q: %v allocations", ct, n)
		}
	}
}
