package lists

import (
	"testing"
)

var sink bool

func benchDomains(b *testing.B, f func(string) bool, inputs []string) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink = f(inputs[i%len(inputs)])
	}
}

func BenchmarkIsDisposable(b *testing.B) {
	l := Embedded()
	for _, bc := range []struct {
		name   string
		inputs []string
	}{
		{"hit", []string{"mailinator.com", "yopmail.com", "guerrillamail.com"}},
		{"subdomain", []string{"a.b.mailinator.com", "x.33mail.com"}},
		{"miss", []string{"gmail.com", "example.com", "mail.example.co.uk"}},
		{"uppercase", []string{"Mailinator.COM", "GMAIL.com"}},
	} {
		b.Run(bc.name, func(b *testing.B) { benchDomains(b, l.IsDisposable, bc.inputs) })
	}
}

func BenchmarkIsFree(b *testing.B) {
	l := Embedded()
	b.Run("hit", func(b *testing.B) { benchDomains(b, l.IsFree, []string{"gmail.com", "outlook.com"}) })
	b.Run("miss", func(b *testing.B) { benchDomains(b, l.IsFree, []string{"example.com", "corp.example.org"}) })
}

func BenchmarkIsRole(b *testing.B) {
	l := Embedded()
	b.Run("hit", func(b *testing.B) { benchDomains(b, l.IsRole, []string{"admin", "no-reply", "Sales+EU"}) })
	b.Run("miss", func(b *testing.B) { benchDomains(b, l.IsRole, []string{"john.smith", "jane", "j.doe+news"}) })
}

func BenchmarkIsSpamtrap(b *testing.B) {
	l := Embedded()
	b.Run("hit", func(b *testing.B) {
		benchDomains(b, l.IsSpamtrap, []string{"spamtrap-test@example.invalid", "x@spamtrap.invalid"})
	})
	b.Run("miss", func(b *testing.B) {
		benchDomains(b, l.IsSpamtrap, []string{"john.smith@gmail.com", "jane+x@example.com"})
	})
}

func BenchmarkNormalize(b *testing.B) {
	var s string
	b.Run("unknown", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, _ = Normalize("John.Smith+news", "example.com")
		}
	})
	b.Run("gmail", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, _ = Normalize("John.Smith+news", "gmail.com")
		}
	})
	_ = s
}

// BenchmarkParseEmbedded is the one-time cost of Embedded.
func BenchmarkParseEmbedded(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseShipped(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad is the cost of a reload: copying the embedded lists and
// applying a small override directory.
func BenchmarkLoad(b *testing.B) {
	dir := b.TempDir()
	writeFiles(b, dir, map[string]string{
		"disposable.txt": "burner.example\n!mailinator.com\n",
		"role.txt":       "founder\n",
	})
	Embedded()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}
