package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"unicode/utf8"
)

// FuzzCanonicalize checks, for any input, that Canonicalize never panics;
// accepts only JSON; rejects valid JSON only for an I-JSON reason; and
// that what it writes is a fixed point, valid JSON, and decodes to the
// same value as the input. go test keeps a failing input in
// testdata/fuzz/FuzzCanonicalize; add it as a row of the tables in
// jcs_test.go too, where it says what it is.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null,"x"]}`,
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`[1e21,1e-7,-0,0.1,123456789012345678901,5e-324]`,
		`"\ud800"`,
		`{"a":1,"a":2}`,
		`{"a":{"b":{"c":[[[]]]}}}`,
		"\"\xff\"",
		` [ 1 , 2 ] `,
		string(realisticReceiptJSON()),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			var je *JSONError
			if !errors.As(err, &je) {
				t.Fatalf("error %v is not a *JSONError", err)
			}
			if je.Kind == KindSyntax && json.Valid(in) && utf8.Valid(in) {
				t.Fatalf("valid JSON %q rejected: %v", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q as %q", in, out)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("wrote invalid JSON %q for %q", out, in)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q -> %q -> %q, %v", in, out, again, err)
		}
		a, b := decodeForCompare(t, in), decodeForCompare(t, out)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed: %q -> %q\n%#v\n%#v", in, out, a, b)
		}
	})
}

// decodeForCompare decodes JSON with numbers as float64 values.
func decodeForCompare(t *testing.T, b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return floatNumbers(v)
}

func floatNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(v), 64)
		if f == 0 {
			f = 0 // -0 == 0
		}
		return f
	case []any:
		for i := range v {
			v[i] = floatNumbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = floatNumbers(v[k])
		}
	}
	return v
}

// FuzzSignVerify: every I-JSON object signs, and what Sign returns
// verifies; Verify never panics on any input and accepts only what was
// signed (a fuzzer cannot forge Ed25519, so anything else it accepts is a
// bug in the parsing around the signature).
func FuzzSignVerify(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"kid":"v1","sig":"x"}`,
		`{"email":"a@b.c","score":1,"checks":{"auth":{}}}`,
		`{"\ud83d\ude00":1,"\ufb33":2,"a":[1.5,null]}`,
		`[1]`,
		string(realisticReceiptJSON()),
	} {
		f.Add([]byte(s))
	}
	ks, err := NewKeySet(&memStore{})
	if err != nil {
		f.Fatal(err)
	}
	pub := ks.PublicKeys()
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := pub.Verify(in); err == nil {
			t.Fatalf("Verify accepted unsigned input %q", in)
		}
		canon, err := Canonicalize(in)
		signed, signErr := ks.Sign(in)
		if err != nil || canon[0] != '{' {
			if signErr == nil {
				t.Fatalf("Sign accepted %q: %s", in, signed)
			}
			return
		}
		if signErr != nil {
			// An object that canonicalizes signs, unless kid or sig is repeated —
			// which Canonicalize already rejects as a duplicate name.
			t.Fatalf("Sign(%q): %v", in, signErr)
		}
		if kid, err := pub.Verify(signed); err != nil || kid != "v1" {
			t.Fatalf("Verify(Sign(%q)) = %q, %v\n%s", in, kid, err, signed)
		}
	})
}
