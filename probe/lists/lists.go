package lists

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/verifyd/verifyd/internal/dnsname"
	"github.com/verifyd/verifyd/probe/lists/internal/entry"
)

//go:embed data/disposable.txt data/free.txt data/role.txt data/spamtrap.txt data/LICENSES/*.txt
var shipped embed.FS

// Notices returns the licence texts of the third-party data compiled into
// the binary, one after another, for a "show licences" command: the MIT
// licences of the sources ask that their notices travel with every copy.
func Notices() string {
	ents, err := shipped.ReadDir("data/LICENSES")
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range ents {
		t, err := shipped.ReadFile("data/LICENSES/" + e.Name())
		if err != nil {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("==> " + e.Name() + " <==\n")
		b.Write(t)
		b.WriteString("\n")
	}
	return b.String()
}

// The names of the lists, as used by [Lists.Counts], the data files
// ("<name>.txt") and the override files.
const (
	Disposable = "disposable"
	Free       = "free"
	Role       = "role"
	Spamtrap   = "spamtrap"
)

// names is the order in which files are read and changes are reported.
var names = [...]string{Disposable, Free, Role, Spamtrap}

// Lists is one immutable snapshot of the four lists. Its methods are safe for
// concurrent use; the lookups (IsDisposable, IsFree, IsRole, IsSpamtrap) do
// not allocate.
type Lists struct {
	disposable domainSet
	free       map[string]struct{}
	role       map[string]struct{} // keys in roleKey form
	roleMax    int                 // longest role key, to skip lookups
	trapAddr   map[string]struct{} // "local@domain"
	trapDomain domainSet
	counts     [len(names)]int
}

// domainSet maps a domain to true when it is listed and to false when it is
// an exception. A lookup walks from the domain towards its parents and the
// first domain present decides.
type domainSet map[string]bool

// match reports whether d (lower case, no trailing dot) or one of its parent
// domains is listed, stopping at an exception. Single labels are never
// looked up: no entry is a single label.
func (s domainSet) match(d []byte) bool {
	for {
		i := indexDot(d)
		if i < 0 {
			return false
		}
		if v, ok := s[string(d)]; ok {
			return v
		}
		d = d[i+1:]
	}
}

func (s domainSet) count() int {
	n := 0
	for _, v := range s {
		if v {
			n++
		}
	}
	return n
}

func indexDot(b []byte) int {
	for i, c := range b {
		if c == '.' {
			return i
		}
	}
	return -1
}

// foldDomain copies d into buf folded (dnsname.FoldInto: ASCII case),
// without one trailing dot. It returns false when d cannot be a domain of
// the lists. It does not allocate.
func foldDomain(buf *[entry.MaxDomain]byte, d string) ([]byte, bool) {
	if n := len(d); n > 0 && d[n-1] == '.' {
		d = d[:n-1]
	}
	if d == "" {
		return nil, false
	}
	return dnsname.FoldInto(buf[:], d)
}

// IsDisposable reports whether asciiDomain (IDNA A-labels; case and one
// trailing dot do not matter) belongs to a disposable-mail service: the
// domain or one of its parent domains is listed, and no exception stops the
// walk before it.
func (l *Lists) IsDisposable(asciiDomain string) bool {
	var buf [entry.MaxDomain]byte
	d, ok := foldDomain(&buf, asciiDomain)
	return ok && l.disposable.match(d)
}

// IsFree reports whether asciiDomain is a free mailbox provider. The match
// is exact: subdomains of a provider are not providers.
func (l *Lists) IsFree(asciiDomain string) bool {
	var buf [entry.MaxDomain]byte
	d, ok := foldDomain(&buf, asciiDomain)
	if !ok {
		return false
	}
	_, hit := l.free[string(d)]
	return hit
}

// IsRole reports whether the local part names a role (sales, no-reply,
// postmaster) rather than a person. The local part is lower-cased (ASCII),
// cut at the first "+", and ".", "-" and "_" compare equal.
func (l *Lists) IsRole(local string) bool {
	var buf [entry.MaxLocal]byte
	k, ok := roleKey(&buf, local)
	if !ok || len(k) > l.roleMax {
		return false
	}
	_, hit := l.role[string(k)]
	return hit
}

// roleKey writes the lookup form of a role local part into buf.
func roleKey(buf *[entry.MaxLocal]byte, local string) ([]byte, bool) {
	n := 0
	for i := 0; i < len(local); i++ {
		c := local[i]
		switch {
		case c == '+':
			return buf[:n], n > 0
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c == '.' || c == '_':
			c = '-'
		}
		if n == len(buf) {
			return nil, false
		}
		buf[n] = c
		n++
	}
	return buf[:n], n > 0
}

// IsSpamtrap reports whether address ("local@domain", domain in A-labels) is
// a known spamtrap: the whole address is listed, or the address without its
// "+tag", or its domain or a parent domain is listed as "@domain". Local
// parts compare case-insensitively (ASCII).
func (l *Lists) IsSpamtrap(address string) bool {
	at := strings.LastIndexByte(address, '@')
	if at <= 0 {
		return false
	}
	local, domain := address[:at], address[at+1:]
	var dbuf [entry.MaxDomain]byte
	d, ok := foldDomain(&dbuf, domain)
	if !ok {
		return false
	}
	if l.trapDomain.match(d) {
		return true
	}
	if len(l.trapAddr) == 0 || len(local) > entry.MaxLocal {
		return false
	}
	var buf [entry.MaxLocal + 1 + entry.MaxDomain]byte
	n, plus := 0, -1
	for i := 0; i < len(local); i++ {
		c := local[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c == '+' && plus < 0 {
			plus = i
		}
		buf[n] = c
		n++
	}
	buf[n] = '@'
	n++
	n += copy(buf[n:], d)
	if _, hit := l.trapAddr[string(buf[:n])]; hit {
		return true
	}
	if plus > 0 {
		m := plus
		buf[m] = '@'
		m++
		m += copy(buf[m:], d)
		_, hit := l.trapAddr[string(buf[:m])]
		return hit
	}
	return false
}

// Counts returns the number of entries in each list, keyed by [Disposable],
// [Free], [Role] and [Spamtrap]. Exceptions are not counted; role entries
// that differ only in separators count once; the spamtrap count adds
// addresses and domains.
func (l *Lists) Counts() map[string]int {
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = l.counts[i]
	}
	return m
}

func (l *Lists) recount() {
	l.counts = [len(names)]int{
		l.disposable.count(),
		len(l.free),
		len(l.role),
		len(l.trapAddr) + l.trapDomain.count(),
	}
	l.roleMax = 0
	for k := range l.role {
		l.roleMax = max(l.roleMax, len(k))
	}
}

func newLists() *Lists {
	return &Lists{
		disposable: domainSet{},
		free:       map[string]struct{}{},
		role:       map[string]struct{}{},
		trapAddr:   map[string]struct{}{},
		trapDomain: domainSet{},
	}
}

func (l *Lists) clone() *Lists {
	return &Lists{
		disposable: maps.Clone(l.disposable),
		free:       maps.Clone(l.free),
		role:       maps.Clone(l.role),
		trapAddr:   maps.Clone(l.trapAddr),
		trapDomain: maps.Clone(l.trapDomain),
	}
}

var embedded = sync.OnceValue(func() *Lists {
	l, err := parseShipped()
	if err != nil {
		// The shipped files are part of the source; TestEmbedded keeps
		// them valid. A failure here is a broken build, like a bad
		// regexp.MustCompile.
		panic("lists: shipped data does not parse: " + err.Error())
	}
	return l
})

// Embedded returns the lists shipped in the binary. They are parsed on the
// first call and shared afterwards.
func Embedded() *Lists { return embedded() }

func parseShipped() (*Lists, error) {
	l := newLists()
	var errs []error
	for _, name := range names {
		path := "data/" + name + ".txt"
		b, err := shipped.ReadFile(path)
		if err != nil {
			return nil, err
		}
		errs = append(errs, l.apply(name, path, string(b)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	l.recount()
	return l, nil
}

// Load returns the embedded lists merged with the operator's files in dir:
// disposable.txt, free.txt, role.txt and spamtrap.txt, in the format of the
// shipped files. A line adds an entry; "!entry" removes a shipped entry
// (and, for domain lists, is an exception that stops the parent walk). A
// missing dir or file is fine, and an empty dir means the embedded lists
// alone. Every bad line is reported as "file:line: reason", all at once.
func Load(dir string) (*Lists, error) {
	base := Embedded()
	if dir == "" {
		return base, nil
	}
	if fi, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return base, nil
	} else if err != nil {
		return nil, fmt.Errorf("lists: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("lists: override path %s is not a directory", dir)
	}
	l := base.clone()
	var errs []error
	for _, name := range names {
		path := filepath.Join(dir, name+".txt")
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("lists: %w", err))
			continue
		}
		errs = append(errs, l.apply(name, path, string(b)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	l.recount()
	return l, nil
}
