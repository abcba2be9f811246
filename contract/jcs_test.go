package contract

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"
)

// This file is the suite's own receipt verifier: RFC 8785 (JSON
// Canonicalization Scheme) and Ed25519 from the standard library, against
// the key set verifyd publishes. It shares no code with verifyd's signer.
//
// §2.4 sig: "base64url Ed25519 signature over the canonical receipt: all
// keys sorted, sig itself omitted. It verifies against the published
// public key set identified by kid."
//
// Decision: the canonical receipt is RFC 8785 (JCS) of the receipt
// without sig; sig is base64url without padding (RFC 4648 §5) of the
// 64-byte Ed25519 signature; the key set is a JWK Set (RFC 7517) served
// unauthenticated at GET /.well-known/jwks.json (and GET /v1/keys), each
// key kty "OKP", crv "Ed25519", kid, x (base64url).

// parseJSON reads one JSON text into nil, bool, json.Number, string,
// []any and map[string]any, refusing duplicate member names (RFC 8785
// §3.1: a JCS input must not have them) and trailing data.
func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '{':
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf("member %q given twice", k)
				}
				if m[k], err = parseValue(dec); err != nil {
					return nil, err
				}
			}
			_, err := dec.Token() // '}'
			return m, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token() // ']'
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", tok)
	default:
		return tok, nil
	}
}

// canonical writes v in RFC 8785 form. Receipts hold integers only: an
// integral number is written as ECMAScript writes it (no fraction, no
// exponent, -0 as 0); any other number is an error, loudly, rather than a
// guess at ECMAScript's shortest round-trip form.
func canonical(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(v))
	case json.Number:
		s := v.String()
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			if i > 1<<53-1 || i < -(1<<53-1) {
				return fmt.Errorf("integer %s is beyond ECMAScript's exact range", s)
			}
			buf.WriteString(strconv.FormatInt(i, 10))
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53-1 {
			return fmt.Errorf("the number %s is not an integer: this verifier canonicalizes integers only (receipts hold no other numbers)", s)
		}
		buf.WriteString(strconv.FormatInt(int64(f), 10))
	case string:
		canonicalString(buf, v)
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := canonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		// RFC 8785 §3.2.3: members sorted by their names as arrays of
		// UTF-16 code units.
		slices.SortFunc(keys, func(a, b string) int {
			return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		})
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			canonicalString(buf, k)
			buf.WriteByte(':')
			if err := canonical(buf, v[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("unexpected value %T", v)
	}
	return nil
}

// canonicalString writes s as RFC 8785 §3.2.2.2 says (ECMAScript's
// JSON.stringify): '"' and '\' escaped, the control characters as \b \t
// \n \f \r or \u00xx (lower-case hex), everything else as UTF-8.
func canonicalString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\b':
			buf.WriteString(`\b`)
		case '\t':
			buf.WriteString(`\t`)
		case '\n':
			buf.WriteString(`\n`)
		case '\f':
			buf.WriteString(`\f`)
		case '\r':
			buf.WriteString(`\r`)
		default:
			if r < 0x20 {
				fmt.Fprintf(buf, `\u%04x`, r)
			} else {
				buf.WriteRune(r)
			}
		}
	}
	buf.WriteByte('"')
}

// jwk is one key of the published set.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	X   string `json:"x"`
}

// keySet caches the published key set; a receipt naming a kid the cache
// lacks makes it fetch the set again (a key rotated since).
var keySet struct {
	sync.Mutex
	keys map[string]ed25519.PublicKey
}

// fetchKeys reads the key set from path and checks each key's shape.
func fetchKeys(t testing.TB, c *client, path string) map[string]ed25519.PublicKey {
	t.Helper()
	r := c.with("").get(path)
	if r.status != 200 {
		t.Fatalf("the key set: %s", r)
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(r.body, &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("the key set is not a JWK Set with keys (%v): %s", err, r)
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		x, err := base64.RawURLEncoding.Strict().DecodeString(k.X)
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Kid == "" || err != nil || len(x) != ed25519.PublicKeySize {
			t.Fatalf("key %+v is not an Ed25519 OKP key with a kid and a 32-byte base64url x (%v): %s", k, err, r)
		}
		if _, dup := keys[k.Kid]; dup {
			t.Fatalf("kid %s twice in the key set: %s", k.Kid, r)
		}
		keys[k.Kid] = ed25519.PublicKey(x)
	}
	return keys
}

// receiptKey is the published key of kid.
func receiptKey(t testing.TB, c *client, kid string) (ed25519.PublicKey, bool) {
	t.Helper()
	keySet.Lock()
	defer keySet.Unlock()
	if k, ok := keySet.keys[kid]; ok {
		return k, true
	}
	keySet.keys = fetchKeys(t, c, "/.well-known/jwks.json")
	k, ok := keySet.keys[kid]
	return k, ok
}

// verifyReceipt checks a receipt's signature as §2.4 and the decisions
// above say, with keys fetched over HTTP by c.
func verifyReceipt(t testing.TB, c *client, body []byte) error {
	t.Helper()
	v, err := parseJSON(body)
	if err != nil {
		return fmt.Errorf("the receipt is not JSON without duplicate members: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return errors.New("the receipt is not a JSON object")
	}
	sigText, ok := m["sig"].(string)
	if !ok {
		return errors.New("the receipt has no string sig")
	}
	kid, ok := m["kid"].(string)
	if !ok {
		return errors.New("the receipt has no string kid")
	}
	if strings.ContainsAny(sigText, "=+/") {
		return fmt.Errorf("sig %q is not base64url without padding", sigText)
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(sigText)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("sig %q is not a base64url Ed25519 signature (%v, %d bytes)", sigText, err, len(sig))
	}
	delete(m, "sig")
	var buf bytes.Buffer
	if err := canonical(&buf, m); err != nil {
		return err
	}
	key, ok := receiptKey(t, c, kid)
	if !ok {
		return fmt.Errorf("kid %q is not in the published key set", kid)
	}
	if !ed25519.Verify(key, buf.Bytes(), sig) {
		return fmt.Errorf("the signature does not verify with key %s over the canonical form %s", kid, buf.Bytes())
	}
	return nil
}

// TestSpec2_4CanonicalFormIsRFC8785 checks the suite's own canonicalizer
// on RFC 8785's examples, so that a signature failure elsewhere is
// verifyd's and not the verifier's.
func TestSpec2_4CanonicalFormIsRFC8785(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		// RFC 8785 §3.2.3: sorting by UTF-16 code units.
		{`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		// RFC 8785 §3.2.2.2: string escapes.
		{`{"s":"\u0000\u001f\b\t\n\f\r\"\\/\u00e9\u2028"}`, "{\"s\":\"\\u0000\\u001f\\b\\t\\n\\f\\r\\\"\\\\/\u00e9\u2028\"}"},
		// Whitespace goes, nesting sorts at every level, literals stay.
		{` { "b" : [ 1 , true , null , { "z" : 0 , "a" : -0 } ] , "a" : 1E2 } `, `{"a":100,"b":[1,true,null,{"a":0,"z":0}]}`},
		{`{"n":-9007199254740991}`, `{"n":-9007199254740991}`},
	} {
		v, err := parseJSON([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		var buf bytes.Buffer
		if err := canonical(&buf, v); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if buf.String() != tc.want {
			t.Errorf("canonical(%s)\n= %s\nwant %s", tc.in, buf.String(), tc.want)
		}
	}
	// A receipt holds integers only: anything else fails loudly.
	for _, in := range []string{`{"x":1.5}`, `{"x":1e400}`, `{"x":9007199254740993}`} {
		v, err := parseJSON([]byte(in))
		if err != nil {
			continue
		}
		if err := canonical(new(bytes.Buffer), v); err == nil {
			t.Errorf("canonical(%s) did not fail", in)
		}
	}
	if _, err := parseJSON([]byte(`{"a":1,"a":2}`)); err == nil {
		t.Error("duplicate member names were accepted")
	}
}
