package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The receipts of the interoperability tests: the spec's shape, non-ASCII
// addresses, and nested values whose canonical form exercises every rule
// of RFC 8785 (UTF-16 name order, escapes, numbers).
func interopReceipts(t *testing.T) map[string]any {
	full := realisticReceipt()
	idn := realisticReceipt()
	idn.Email = "用户@例子.广告"
	idn.Checks.Domain = "例子.广告"
	accented := realisticReceipt()
	accented.Email = "josé.müller+ñ@exämple.de"
	nested := realisticReceipt()
	nested.Extra = &testNested{
		Names: map[string]any{
			"\u20ac": "euro", "\r": "cr", "\ufb33": "dalet", "1": "one",
			"\U0001F600": "grin", "\u0080": "c1", "\u00f6": "ö", "": "empty",
			"a\"b\\c": "quote and backslash", "tab\there": "\x00\x1f\x7f",
			"\u2028": "line separator", "<&>": "</script>",
		},
		List: []any{nil, true, false, 0, -1, 1.5, 1e21, 1e-7, 333333333.3333333, 0.1, 5e-324, math.Copysign(0, -1),
			"", []any{}, map[string]any{}, map[string]any{"z": []any{map[string]any{"\U0001F600": 1, "\uffff": 2}}}},
	}
	return map[string]any{
		"full":     full,
		"idn":      idn,
		"accented": accented,
		"nested":   nested,
		"map": map[string]any{
			"email": "x@y.z", "status": "unknown", "score": 0, "checks": map[string]any{"auth": map[string]any{}},
			"probed_at": "2026-01-01T00:00:00.000Z", "latency_ms": 0, "credits_remaining": 0, "cached": true,
		},
	}
}

func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	return py
}

// runPy runs verifier-py/verify_receipt.py with jwks as its key set file
// and receipt on stdin, and returns its exit status and output.
func runPy(t *testing.T, py, jwksPath string, receipt []byte) (int, string) {
	t.Helper()
	cmd := exec.Command(py, "verifier-py/verify_receipt.py", jwksPath)
	cmd.Stdin = bytes.NewReader(receipt)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	default:
		t.Fatalf("python3: %v", err)
		return -1, ""
	}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Receipts signed here are checked by the stdlib-only Python verifier,
// which shares no code with this package: the valid ones must pass, the
// tampered ones must not.
func TestPythonVerifier(t *testing.T) {
	py := python(t)
	if out, err := exec.Command(py, "verifier-py/verify_receipt.py", "--self-test").CombinedOutput(); err != nil {
		t.Fatalf("self-test: %v\n%s", err, out)
	}
	ks, err := NewKeySet(&memStore{})
	if err != nil {
		t.Fatal(err)
	}
	v1Receipt, err := ks.SignStruct(realisticReceipt())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Rotate(); err != nil {
		t.Fatal(err)
	}
	jwks := writeFile(t, "jwks.json", ks.JWKS())
	legacy := writeFile(t, "jwks-legacy.json", ks.JWKSLegacy())
	oneKey, err := NewKeySet(&memStore{}) // another set, whose v1 is not ours
	if err != nil {
		t.Fatal(err)
	}
	foreign := writeFile(t, "foreign.json", oneKey.JWKS())

	type run struct {
		name     string
		receipt  []byte
		jwks     string
		wantCode int
	}
	runs := []run{{"v1 receipt after rotation", v1Receipt, jwks, 0}}
	for name, v := range interopReceipts(t) {
		signed, err := ks.SignStruct(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(signed, ks.JWKS()); err != nil {
			t.Fatalf("%s: the Go verifier: %v", name, err)
		}
		s := string(signed)
		sig := regexp.MustCompile(`"sig":"([^"]+)"`).FindStringSubmatch(s)[1]
		badSig := []byte(sig)
		badSig[5] = map[bool]byte{true: 'B', false: 'A'}[badSig[5] == 'A']
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, signed, "", "\t"); err != nil {
			t.Fatal(err)
		}
		runs = append(runs,
			run{name, signed, jwks, 0},
			run{name + ", score changed", []byte(strings.Replace(s, `"score":`, `"score":1`, 1)), jwks, 1},
			run{name + ", kid changed to v1", []byte(strings.Replace(s, `"kid":"v2"`, `"kid":"v1"`, 1)), jwks, 1},
			run{name + ", sig changed", []byte(strings.Replace(s, sig, string(badSig), 1)), jwks, 1},
		)
		if name != "full" {
			continue
		}
		runs = append(runs,
			run{name + ", legacy JWKS", signed, legacy, 0},
			run{name + ", indented", pretty.Bytes(), jwks, 0},
			run{name + ", kid changed to v9", []byte(strings.Replace(s, `"kid":"v2"`, `"kid":"v9"`, 1)), jwks, 1},
			run{name + ", email changed", []byte(strings.Replace(s, `"email":"`, `"email":"a`, 1)), jwks, 1},
			run{name + ", another key set", signed, foreign, 1},
			run{name + ", sig removed", []byte(strings.Replace(s, `,"sig":"`+sig+`"`, "", 1)), jwks, 2},
		)
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			code, out := runPy(t, py, r.jwks, r.receipt)
			if code != r.wantCode {
				t.Errorf("exit %d, want %d: %s\nreceipt: %s", code, r.wantCode, out, r.receipt)
			}
			if r.wantCode == 0 && !strings.HasPrefix(out, "valid: signed with key v") {
				t.Errorf("output %q", out)
			}
		})
	}
}

// The ten-line verifier of README.md runs as printed (it needs the
// cryptography package).
func TestREADMESnippet(t *testing.T) {
	py := python(t)
	if err := exec.Command(py, "-c", "import cryptography").Run(); err != nil {
		t.Skip("the cryptography package is not installed")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- verifier snippet -->\\s*```python\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no python block after <!-- verifier snippet -->")
	}
	snippet := m[1]
	if n := bytes.Count(snippet, []byte("\n")); n > 12 {
		t.Errorf("the snippet has %d lines", n)
	}
	script := writeFile(t, "verify.py", snippet)
	ks, err := NewKeySet(&memStore{})
	if err != nil {
		t.Fatal(err)
	}
	jwks := "file://" + writeFile(t, "jwks.json", ks.JWKS())
	for name, v := range interopReceipts(t) {
		if name == "nested" {
			continue // floats and non-ASCII names: beyond the snippet, see README.md
		}
		signed, err := ks.SignStruct(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			receipt []byte
			ok      bool
		}{
			{signed, true},
			{bytes.Replace(signed, []byte(`"score":`), []byte(`"score":1`), 1), false},
		} {
			cmd := exec.Command(py, script, jwks)
			cmd.Stdin = bytes.NewReader(tc.receipt)
			out, err := cmd.CombinedOutput()
			if (err == nil) != tc.ok {
				t.Errorf("%s: ok=%t: %v\n%s", name, tc.ok, err, out)
			}
		}
	}
}
