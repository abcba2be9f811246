package smtpclient

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseEHLO(t *testing.T) {
	for _, tc := range []struct {
		in       string
		wantHost string
		want     Extensions
		has      []string
	}{
		{"250 mx.test\r\n", "mx.test", Extensions{}, nil},
		{"250 \r\n", "", Extensions{}, nil},
		{"250-mx.test Hello [127.0.0.1]\r\n250-PIPELINING\r\n250-STARTTLS\r\n250-SMTPUTF8\r\n250-8BITMIME\r\n" +
			"250-ENHANCEDSTATUSCODES\r\n250-CHUNKING\r\n250-DSN\r\n250-REQUIRETLS\r\n250 SIZE 52428800\r\n",
			"mx.test", Extensions{Pipelining: true, StartTLS: true, SMTPUTF8: true, EightBitMIME: true,
				EnhancedStatusCodes: true, Chunking: true, DSN: true, RequireTLS: true, Size: 52428800, HasSize: true},
			[]string{"PIPELINING", "size", "Chunking"}},
		// Case-insensitive keywords, tabs, unknown keywords kept for Has.
		{"250-[127.0.0.1]\r\n250-pipelining\r\n250-Size\t1000\r\n250-X-EXPS GSSAPI\r\n250 AUTH=LOGIN\r\n",
			"[127.0.0.1]", Extensions{Pipelining: true, Size: 1000, HasSize: true}, []string{"x-exps", "AUTH=LOGIN"}},
		// SIZE that cannot be read is "no known maximum".
		{"250-mx\r\n250 SIZE 99999999999999999999\r\n", "mx", Extensions{HasSize: true}, nil},
		{"250-mx\r\n250 SIZE -5\r\n", "mx", Extensions{HasSize: true}, nil},
		{"250-mx\r\n250 SIZE\r\n", "mx", Extensions{HasSize: true}, nil},
		// Keywords only count on their own line, not in the greeting line.
		{"250 mx.test PIPELINING\r\n", "mx.test", Extensions{}, nil},
		{"250-mx.test\r\n250-NOT-PIPELINING\r\n250 XSTARTTLS\r\n", "mx.test", Extensions{}, []string{"not-pipelining"}},
	} {
		r, err := ParseReply([]byte(tc.in))
		if err != nil {
			t.Fatalf("ParseReply(%q): %v", tc.in, err)
		}
		host, ext := ParseEHLO(r)
		for _, h := range tc.has {
			if !ext.Has(h) {
				t.Errorf("%q: Has(%q) = false", tc.in, h)
			}
		}
		ext.lines = nil
		if host != tc.wantHost || !reflect.DeepEqual(ext, tc.want) {
			t.Errorf("ParseEHLO(%q) = %q %+v, want %q %+v", tc.in, host, ext, tc.wantHost, tc.want)
		}
	}
	if host, ext := ParseEHLO(Reply{}); host != "" || !reflect.DeepEqual(ext, Extensions{}) {
		t.Errorf("ParseEHLO(zero) = %q %+v", host, ext)
	}
	long := "250 " + strings.Repeat("h", 1000) + "\r\n"
	r, _ := ParseReply([]byte(long))
	if host, _ := ParseEHLO(r); len(host) != maxHostLen {
		t.Errorf("host of %d bytes, want it cut to %d", len(host), maxHostLen)
	}
}

func FuzzParseEHLO(f *testing.F) {
	for _, s := range []string{
		"250-mx.test\r\n250-PIPELINING\r\n250 SIZE 1000\r\n",
		"250-[127.0.0.1]\r\n250-pipelining\r\n250 Size\t1000\r\n",
		"250 mx\r\n",
		"250-mx\r\n250 SIZE 99999999999999999999\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseReply(in)
		if err != nil {
			return
		}
		host, ext := ParseEHLO(r)
		if len(host) > maxHostLen || strings.ContainsAny(host, " \t") {
			t.Fatalf("%q: host %q", in, host)
		}
		if ext.Size < 0 || (ext.Size != 0 && !ext.HasSize) {
			t.Fatalf("%q: Size %d HasSize %v", in, ext.Size, ext.HasSize)
		}
		if ext.Has("PIPELINING") != ext.Pipelining || ext.Has("STARTTLS") != ext.StartTLS || ext.Has("SIZE") != ext.HasSize {
			t.Fatalf("%q: Has disagrees with the fields: %+v", in, ext)
		}
	})
}
