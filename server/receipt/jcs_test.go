package receipt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical form.
func TestAppendNumberRFC8785AppendixB(t *testing.T) {
	for _, tc := range []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"}, // minus zero
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	} {
		b, err := strconv.ParseUint(tc.bits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(AppendNumber(nil, math.Float64frombits(b))); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.bits, got, tc.want)
		}
	}
}

// testdata/numbers.txt holds what node's Number.prototype.toString says
// for 6,000 doubles (testdata/numbers.js makes it).
func TestAppendNumberECMAScript(t *testing.T) {
	f, err := os.Open("testdata/numbers.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		bitsHex, want, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("bad line %q", sc.Text())
		}
		b, err := strconv.ParseUint(bitsHex, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		v := math.Float64frombits(b)
		if got := string(AppendNumber(nil, v)); got != want {
			t.Errorf("%s (%g): got %s, want %s", bitsHex, v, got, want)
		}
		// The same through the parser, from Go's and ECMAScript's spelling.
		for _, in := range []string{want, strconv.FormatFloat(v, 'g', -1, 64)} {
			if got, err := Canonicalize([]byte(in)); err != nil || string(got) != want {
				t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, want)
			}
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 5000 {
		t.Fatalf("only %d numbers in testdata/numbers.txt", n)
	}
}

func TestCanonicalizeNumbers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1e21", "1e+21"},
		{"1e+21", "1e+21"},
		{"1E30", "1e+30"},
		{"333333333.33333329", "333333333.3333333"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"0.000000000000000000000000001", "1e-27"},
		{"0", "0"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"0e10", "0"},
		{"100", "100"},
		{"-100", "-100"},
		{"1.0", "1"},
		{"1e2", "100"},
		{"1e20", "100000000000000000000"},
		{"123456789012345678901", "123456789012345680000"},
		{"1e-6", "0.000001"},
		{"1e-7", "1e-7"},
		{"1.5e-7", "1.5e-7"},
		{"999999999999999", "999999999999999"},
		{"9007199254740993", "9007199254740992"}, // rounded to a double, as every JCS does
		{"123456789012345.6", "123456789012345.6"},
		{"1e-400", "0"}, // underflows to zero
		{"-1e-400", "0"},
		{"5e-324", "5e-324"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
	} {
		got, err := Canonicalize([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// RFC 8785 §3.2.4.
func TestCanonicalizeRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Canonicalize([]byte(in))
	if err != nil || string(got) != want {
		t.Errorf("got  %s, %v\nwant %s", got, err, want)
	}
}

// RFC 8785 §3.2.3: names sort by UTF-16 code units, so U+1F600 (D83D DE00)
// comes before U+FB33 although its UTF-8 bytes are greater.
func TestCanonicalizeSortsByUTF16(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{" +
		`"\r":"Carriage Return",` +
		`"1":"One",` +
		"\"\u0080\":\"Control\"," +
		"\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
		"\"\u20ac\":\"Euro Sign\"," +
		"\"\U0001F600\":\"Emoji: Grinning Face\"," +
		"\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"" +
		"}"
	got, err := Canonicalize([]byte(in))
	if err != nil || string(got) != want {
		t.Errorf("got  %s, %v\nwant %s", got, err, want)
	}
	// The same names written as raw UTF-8.
	got, err = Canonicalize([]byte(want))
	if err != nil || string(got) != want {
		t.Errorf("raw UTF-8: got %s, %v", got, err)
	}
}

func TestCompareUTF16(t *testing.T) {
	// In UTF-16 order.
	names := []string{"", "\x00", "a", "ab", "b", "\u00e9", "\u0800", "\ud7ff", "\U00010000", "\U0001F600", "\U0010FFFF", "\ue000", "\uff61", "\uffff", "\uffffa"}
	for i := range names {
		for j := range names {
			got := compareUTF16([]byte(names[i]), []byte(names[j]))
			if (got < 0) != (i < j) || (got == 0) != (i == j) {
				t.Errorf("compareUTF16(%+q, %+q) = %d", names[i], names[j], got)
			}
		}
	}
}

func TestCanonicalizeStrings(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"\u0000\u0001\u001f"`, `"\u0000\u0001\u001f"`},
		{`"\u001F"`, `"\u001f"`},
		{`"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{`"\u0008\u000c\u000A\u000D\u0009"`, `"\b\f\n\r\t"`},
		{`"\"\\\/"`, `"\"\\/"`},
		{`"\u007f"`, "\"\x7f\""},   // DEL is not a control for RFC 8785
		{`"\u0080"`, "\"\u0080\""}, // nor are the C1 controls
		{`"\u2028\u2029"`, "\"\u2028\u2029\""},
		{`"<>&"`, `"<>&"`},
		{`"\u003c\u003e\u0026"`, `"<>&"`}, // encoding/json's HTML escapes undone
		{`"\ud83d\ude00"`, "\"\U0001F600\""},
		{`"\uD83D\uDE00"`, "\"\U0001F600\""},
		{`"\uffff\ufffe"`, "\"\uffff\ufffe\""}, // noncharacters pass
		{`"jos\u00e9@exampl\u00e9.com"`, `"josé@examplé.com"`},
		{`"用户@例子.广告"`, `"用户@例子.广告"`},
		{`""`, `""`},
		{` "a" `, `"a"`},
	} {
		got, err := Canonicalize([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestCanonicalizeStructure(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{}", "{}"},
		{"[]", "[]"},
		{" { } ", "{}"},
		{"[ 1 , [ ] , { } ]", "[1,[],{}]"},
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"a":{"d":[{"z":1,"y":2}],"c":null}}`, `{"a":{"c":null,"d":[{"y":2,"z":1}]}}`},
		{`{"aa":1,"a":2,"":3}`, `{"":3,"a":2,"aa":1}`},
		{`{"\u0061b":1,"a\u0061":2}`, `{"aa":2,"ab":1}`},
		{"true", "true"},
		{"\t\r\n null \n", "null"},
		{`{"sig":"x","kid":"y"}`, `{"kid":"y","sig":"x"}`}, // Canonicalize itself keeps both
	} {
		got, err := Canonicalize([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	for _, tc := range []struct {
		in   string
		kind ErrorKind
	}{
		{"", KindSyntax},
		{"   ", KindSyntax},
		{"{", KindSyntax},
		{"[1,]", KindSyntax},
		{`{"a":1,}`, KindSyntax},
		{`{"a" 1}`, KindSyntax},
		{`{a:1}`, KindSyntax},
		{`{'a':1}`, KindSyntax},
		{"01", KindSyntax},
		{"1.", KindSyntax},
		{".5", KindSyntax},
		{"+1", KindSyntax},
		{"-", KindSyntax},
		{"1e", KindSyntax},
		{"1e+", KindSyntax},
		{"NaN", KindSyntax},
		{"Infinity", KindSyntax},
		{"-Infinity", KindSyntax},
		{"tru", KindSyntax},
		{"nul", KindSyntax},
		{"1 2", KindSyntax},
		{"{}{}", KindSyntax},
		{"\ufeff{}", KindSyntax}, // a BOM is not JSON text (RFC 8259 §8.1)
		{"\"a\tb\"", KindSyntax},
		{"\"a\x00b\"", KindSyntax},
		{`"\x"`, KindSyntax},
		{`"\u12"`, KindSyntax},
		{`"\u12G4"`, KindSyntax},
		{`"abc`, KindSyntax},
		{`"abc\`, KindSyntax},
		{"\"\xff\"", KindUTF8},
		{"\"\xc3\"", KindUTF8},
		{"\"\xed\xa0\x80\"", KindUTF8}, // a surrogate encoded in UTF-8
		{"\"a\\n\xff\"", KindUTF8},
		{`"\ud800"`, KindSurrogate},
		{`"\udc00"`, KindSurrogate},
		{`"\ude00\ud83d"`, KindSurrogate},
		{`"\ud83d\u0041"`, KindSurrogate},
		{`"\ud83dx"`, KindSurrogate},
		{`"\ud83d\ud83d"`, KindSurrogate},
		{`{"a":1,"a":2}`, KindDuplicate},
		{`{"a":1,"\u0061":2}`, KindDuplicate},
		{`{"x":{"b":1,"c":2,"b":3}}`, KindDuplicate},
		{"1e400", KindNumber},
		{"-1e400", KindNumber},
		{"[1e309]", KindNumber},
		{deep, KindDepth},
	} {
		got, err := Canonicalize([]byte(tc.in))
		var je *JSONError
		if !errors.As(err, &je) {
			t.Errorf("Canonicalize(%q) = %s, %v; want an error of kind %d", tc.in, got, err, tc.kind)
			continue
		}
		if je.Kind != tc.kind {
			t.Errorf("Canonicalize(%q): %v: kind %d, want %d", tc.in, err, je.Kind, tc.kind)
		}
		if !strings.HasPrefix(err.Error(), "receipt: jcs: ") {
			t.Errorf("Canonicalize(%q): error %q lacks the package prefix", tc.in, err)
		}
	}
	// Exactly MaxDepth levels are fine.
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := Canonicalize([]byte(ok)); err != nil {
		t.Errorf("%d levels: %v", MaxDepth, err)
	}
}

// Canonicalize must not keep or change its input, and its result must not
// share memory with a later call (the canonicalizer is pooled).
func TestCanonicalizeOwnsResult(t *testing.T) {
	in := []byte(`{"b":"x\n","a":[1,2]}`)
	orig := string(in)
	a, err := Canonicalize(in)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := string(a)
	for range 10 {
		if _, err := Canonicalize([]byte(`{"z":"zzzzzzzzzzzzzzzzzzzzzzz","y":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	if string(a) != snapshot {
		t.Errorf("result changed by later calls: %s", a)
	}
	if string(in) != orig {
		t.Errorf("input changed: %s", in)
	}
}

// Objects large and small, sorted by the binary insertion sort (up to 64
// members) or slices.SortFunc, against a reference order built from
// utf16.Encode.
func TestCanonicalizeSortsManyMembers(t *testing.T) {
	pool := []string{"a", "b", "\u00e9", "\ue000", "\uffff", "\U00010000", "\U0001F600", "\ufb33", "\x01", "aaaaaaaa"}
	for _, n := range []int{2, 10, 63, 64, 65, 300} {
		var names []string
		seen := map[string]bool{}
		for i := 0; len(names) < n; i++ {
			// Deterministic names of 1-3 pieces, many sharing 8-byte prefixes.
			s := pool[i%len(pool)] + pool[(i/len(pool))%len(pool)] + pool[(i*7/3)%len(pool)]
			if i%5 == 0 {
				s = "dmarc_alignment_" + s
			}
			if !seen[s] {
				seen[s] = true
				names = append(names, s)
			}
		}
		var in strings.Builder
		in.WriteByte('{')
		for i, s := range names {
			if i > 0 {
				in.WriteByte(',')
			}
			in.Write(appendString(nil, []byte(s)))
			in.WriteString(":" + strconv.Itoa(i))
		}
		in.WriteByte('}')
		want := slices.Clone(names)
		slices.SortFunc(want, func(a, b string) int {
			return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		})
		out, err := Canonicalize([]byte(in.String()))
		if err != nil {
			t.Fatalf("%d members: %v", n, err)
		}
		var got []string
		dec := json.NewDecoder(bytes.NewReader(out))
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		for dec.More() {
			k, _ := dec.Token()
			got = append(got, k.(string))
			if _, err := dec.Token(); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%d members: order\n got %+q\nwant %+q", n, got, want)
		}
	}
}
