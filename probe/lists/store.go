package lists

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// Store holds the current lists for the engine and swaps them on reload
// (SIGHUP). Get is one atomic load; a reload never blocks lookups.
type Store struct {
	dir string
	cur atomic.Pointer[Lists]
	mu  sync.Mutex // serialises Reload
}

// NewStore loads the lists with the operator's files in dir (see [Load]).
func NewStore(dir string) (*Store, error) {
	l, err := Load(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir}
	s.cur.Store(l)
	setEntryGauges(l)
	return s, nil
}

// Get returns the current lists. Callers keep the returned snapshot for the
// whole of one probe, so a reload in between cannot mix two versions.
func (s *Store) Get() *Lists { return s.cur.Load() }

// Reload reads the operator's files again. On success it swaps in the new
// lists and describes what changed ("no changes", or e.g.
// "disposable +2 -1, spamtrap +1"); on error it keeps the old lists and
// returns every bad line.
func (s *Store) Reload() (changes string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := Load(s.dir)
	if err != nil {
		reloadErrors.Inc()
		return "", err
	}
	old := s.cur.Swap(l)
	reloadsOK.Inc()
	setEntryGauges(l)
	return describeChanges(old, l), nil
}

// describeChanges lists, per list, how many entries were added and removed.
func describeChanges(old, cur *Lists) string {
	var parts []string
	add := func(name string, plus, minus int) {
		if plus != 0 || minus != 0 {
			parts = append(parts, fmt.Sprintf("%s +%d -%d", name, plus, minus))
		}
	}
	p, m := diffDomains(old.disposable, cur.disposable)
	add(Disposable, p, m)
	p, m = diffSets(old.free, cur.free)
	add(Free, p, m)
	p, m = diffSets(old.role, cur.role)
	add(Role, p, m)
	p, m = diffSets(old.trapAddr, cur.trapAddr)
	p2, m2 := diffDomains(old.trapDomain, cur.trapDomain)
	add(Spamtrap, p+p2, m+m2)
	p, m = diffExceptions(old.disposable, cur.disposable)
	p2, m2 = diffExceptions(old.trapDomain, cur.trapDomain)
	add("exceptions", p+p2, m+m2)
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, ", ")
}

func diffSets(old, cur map[string]struct{}) (added, removed int) {
	for k := range cur {
		if _, ok := old[k]; !ok {
			added++
		}
	}
	for k := range old {
		if _, ok := cur[k]; !ok {
			removed++
		}
	}
	return added, removed
}

// diffDomains counts listed (true) entries only.
func diffDomains(old, cur domainSet) (added, removed int) {
	for k, v := range cur {
		if v && !old[k] {
			added++
		}
	}
	for k, v := range old {
		if v && !cur[k] {
			removed++
		}
	}
	return added, removed
}

// diffExceptions counts exception (false) entries only.
func diffExceptions(old, cur domainSet) (added, removed int) {
	isExc := func(s domainSet, k string) bool { v, ok := s[k]; return ok && !v }
	for k, v := range cur {
		if !v && !isExc(old, k) {
			added++
		}
	}
	for k, v := range old {
		if !v && !isExc(cur, k) {
			removed++
		}
	}
	return added, removed
}
