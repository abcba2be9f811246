package lists

import (
	"errors"
	"fmt"
	"strings"

	"github.com/verifyd/verifyd/probe/lists/internal/entry"
)

// File format, shared by the shipped files and the operator's files:
//
//   - UTF-8 text, one entry a line; CRLF line ends and a leading BOM are
//     accepted.
//   - Blank lines and lines starting with "#" are ignored; so is everything
//     from a "#" that follows a space or tab (an inline comment).
//   - "entry" adds the entry; "!entry" removes it. For the domain lists
//     (disposable, and "@domain" spamtrap entries) a removal is also an
//     exception: the walk from a domain to its parents stops there.
//   - One file must not both add and remove the same entry.
//
// Entries per list:
//
//	disposable, free   domain (U-labels are converted to A-labels)
//	role               local part without "+"; compared with ".", "-", "_" alike
//	spamtrap           local@domain, or @domain

// apply parses one file of the named list into l. path is only used in
// messages. It returns every bad line, joined.
func (l *Lists) apply(name, path, data string) error {
	data = strings.TrimPrefix(data, "\uFEFF")
	var errs []error
	type seen struct {
		line   int
		remove bool
	}
	lines := map[string]seen{}
	n := 0
	for len(data) > 0 {
		n++
		var line string
		if i := strings.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, ""
		}
		line = strings.TrimSpace(stripComment(line))
		if line == "" {
			continue
		}
		remove := false
		if line[0] == '!' {
			remove = true
			line = strings.TrimSpace(line[1:])
		}
		key, err := l.applyLine(name, line, remove)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", path, n, err))
			continue
		}
		if s, ok := lines[key]; ok && s.remove != remove {
			errs = append(errs, fmt.Errorf("%s:%d: %q is both added and removed (line %d)", path, n, line, s.line))
			continue
		}
		lines[key] = seen{n, remove}
	}
	return errors.Join(errs...)
}

// stripComment drops a whole-line comment and an inline comment: a "#" at the
// start or after a space or tab. A "#" inside an entry (legal in a local
// part, RFC 5322 atext) is kept.
func stripComment(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t') {
			return s[:i]
		}
	}
	return s
}

// applyLine adds or removes one entry and returns its normalised key.
func (l *Lists) applyLine(name, s string, remove bool) (string, error) {
	if s == "" {
		return "", errors.New("empty entry after \"!\"")
	}
	if strings.ContainsAny(s, " \t") {
		return "", fmt.Errorf("%q: one entry a line, no white space inside an entry", s)
	}
	switch name {
	case Disposable:
		d, err := entry.Domain(s)
		if err != nil {
			return "", fmt.Errorf("%q: %w", s, err)
		}
		l.disposable[d] = !remove
		return d, nil
	case Free:
		d, err := entry.Domain(s)
		if err != nil {
			return "", fmt.Errorf("%q: %w", s, err)
		}
		setOrDelete(l.free, d, remove)
		return d, nil
	case Role:
		if strings.ContainsAny(s, "+@") {
			return "", fmt.Errorf("%q: a role entry is a bare local part, without \"+\" or \"@\"", s)
		}
		loc, err := entry.Local(s)
		if err != nil {
			return "", fmt.Errorf("%q: %w", s, err)
		}
		var buf [entry.MaxLocal]byte
		k, _ := roleKey(&buf, loc)
		key := string(k)
		setOrDelete(l.role, key, remove)
		return key, nil
	case Spamtrap:
		at := strings.LastIndexByte(s, '@')
		if at < 0 {
			return "", fmt.Errorf("%q: a spamtrap entry is local@domain or @domain", s)
		}
		d, err := entry.Domain(s[at+1:])
		if err != nil {
			return "", fmt.Errorf("%q: %w", s, err)
		}
		if at == 0 {
			l.trapDomain[d] = !remove
			return "@" + d, nil
		}
		loc, err := entry.Local(s[:at])
		if err != nil {
			return "", fmt.Errorf("%q: %w", s, err)
		}
		key := loc + "@" + d
		setOrDelete(l.trapAddr, key, remove)
		return key, nil
	}
	return "", fmt.Errorf("unknown list %q", name)
}

func setOrDelete(m map[string]struct{}, k string, remove bool) {
	if remove {
		delete(m, k)
	} else {
		m[k] = struct{}{}
	}
}
