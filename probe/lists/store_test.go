package lists

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestStoreReload(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"disposable.txt": "burner.example\n"})
	s, err := NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := s.Get()
	if !first.IsDisposable("burner.example") {
		t.Fatal("override not loaded")
	}

	changes, err := s.Reload()
	if err != nil || changes != "no changes" {
		t.Errorf("Reload without edits = %q, %v; want no changes", changes, err)
	}

	writeFiles(t, dir, map[string]string{
		"disposable.txt": "burner.example\nburner2.example\n!mailinator.com\n",
		"role.txt":       "!admin\n",
		"spamtrap.txt":   "trap@x.example\n",
	})
	changes, err = s.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if want := "disposable +1 -1, role +0 -1, spamtrap +1 -0, exceptions +1 -0"; changes != want {
		t.Errorf("changes = %q, want %q", changes, want)
	}
	good := s.Get()
	if !good.IsDisposable("burner2.example") || good.IsDisposable("mailinator.com") || good.IsRole("admin") {
		t.Error("reloaded lists not in use")
	}
	if !first.IsDisposable("mailinator.com") || first.IsDisposable("burner2.example") {
		t.Error("reload changed an earlier snapshot")
	}

	// A bad file: the error names it, and the old lists stay.
	writeFiles(t, dir, map[string]string{"free.txt": "ok.example\nnot a domain\n"})
	changes, err = s.Reload()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "free.txt")+":2:") {
		t.Errorf("Reload with a bad line = %q, %v; want an error at free.txt:2", changes, err)
	}
	if s.Get() != good {
		t.Error("a failed reload replaced the lists")
	}

	// Fixed again, and files removed: back to the embedded data plus
	// what is left.
	if err := os.Remove(filepath.Join(dir, "free.txt")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"role.txt", "spamtrap.txt"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if !s.Get().IsRole("admin") {
		t.Error("removing role.txt did not restore the shipped entry")
	}
}

func TestNewStoreError(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"role.txt": "a+b\n"})
	if s, err := NewStore(dir); err == nil || s != nil {
		t.Errorf("NewStore with a bad file = %v, %v; want nil, error", s, err)
	}
}

// TestStoreConcurrent runs lookups while reloading; with -race it checks
// that readers never see a half-built snapshot.
func TestStoreConcurrent(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l := s.Get()
				if !l.IsFree("gmail.com") || !l.IsRole("postmaster") {
					t.Error("a snapshot lost shipped entries")
					return
				}
				l.IsDisposable("x.burner.example")
				runtime.Gosched() // leave the CPU to the reloads
			}
		}()
	}
	for i := range 4 {
		body := "burner.example\n"
		if i%2 == 1 {
			body = "!burner.example\n"
		}
		writeFiles(t, dir, map[string]string{"disposable.txt": body})
		if _, err := s.Reload(); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}
