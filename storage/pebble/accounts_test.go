package pebble

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

func TestAccounts(t *testing.T) {
	db := openTest(t)
	a, err := db.CreateAccount(t.Context(), "Acme", storage.PlanStarter)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^acct_[a-z0-9]{20}$`).MatchString(a.ID) {
		t.Errorf("account id %q", a.ID)
	}
	checkSecret := func(s string) {
		t.Helper()
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if !strings.HasPrefix(s, "whsec_") || err != nil || len(raw) != 32 {
			t.Errorf("webhook secret %q", s)
		}
	}
	checkSecret(a.WebhookSecret)
	if !a.CreatedAt.Equal(db.clock.Now().Truncate(1e6)) {
		t.Errorf("created at %v", a.CreatedAt)
	}
	b, err := db.CreateAccount(t.Context(), "Beta", storage.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateAccount(t.Context(), "x", "platinum"); err == nil {
		t.Error("unknown plan accepted")
	}

	if _, err := db.SetPlan(t.Context(), a.ID, storage.PlanScale); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SetPlan(t.Context(), a.ID, "gold"); err == nil {
		t.Error("SetPlan accepted an unknown plan")
	}
	rot, err := db.RotateWebhookSecret(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkSecret(rot.WebhookSecret)
	if rot.WebhookSecret == a.WebhookSecret {
		t.Error("rotation kept the secret")
	}
	_, err = db.GetAccount(t.Context(), "acct_nope")
	wantErr(t, err, storage.ErrNotFound)
	_, err = db.SetPlan(t.Context(), "acct_nope", storage.PlanFree)
	wantErr(t, err, storage.ErrNotFound)

	db.reopen(t)
	got, err := db.GetAccount(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Plan != storage.PlanScale || got.WebhookSecret != rot.WebhookSecret || got.Name != "Acme" || got.SecretRotatedAt.IsZero() {
		t.Errorf("after reopen: %+v", got)
	}
	all, err := db.ListAccounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{all[0].ID, all[1].ID}
	want := []string{a.ID, b.ID}
	slices.Sort(want)
	if len(all) != 2 || !slices.Equal(ids, want) {
		t.Errorf("ListAccounts = %v", ids)
	}
}

func TestEgressState(t *testing.T) {
	db := openTest(t)
	got, err := db.LoadEgressState()
	if err != nil || got != nil {
		t.Fatalf("nothing saved: %q, %v", got, err)
	}
	if err := db.SaveEgressState([]byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveEgressState([]byte(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	db.reopen(t)
	got, err = db.LoadEgressState()
	if err != nil || string(got) != `{"v":2}` {
		t.Fatalf("after reopen: %q, %v", got, err)
	}
}

// A checkpoint is a database of its own with everything written before.
func TestCheckpoint(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 10)
	c := db.validate(t, acct, result("a@example.com", "valid"))
	dir := filepath.Join(t.TempDir(), "backup")
	if err := db.Checkpoint(dir); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(dir); err == nil {
		t.Error("checkpoint into an existing directory")
	}
	db.validate(t, acct, result("b@example.com", "valid")) // after the checkpoint
	cp, err := Open(dir, testOptions(db.clock))
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if cr, err := cp.Credits(t.Context(), acct); err != nil || cr.Balance != 9 {
		t.Errorf("checkpoint balance %d, %v", cr.Balance, err)
	}
	if _, err := cp.GetResult(t.Context(), c.Result.ID); err != nil {
		t.Error(err)
	}
	if m := db.Metrics(); m == nil || m.WAL.Files == 0 {
		t.Errorf("metrics %v", m)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, Options{CacheSize: -1, IdemTTL: -1}); err == nil || !strings.Contains(err.Error(), "CacheSize") || !strings.Contains(err.Error(), "IdemTTL") {
		t.Errorf("invalid options: %v", err)
	}
	// A database of a newer schema is refused, not misread.
	db := openTest(t)
	b := db.pdb.NewBatch()
	b.Set(keyMetaVersion, []byte("99"), nil)
	if err := db.commit(b, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(db.dir, testOptions(db.clock)); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("newer schema: %v", err)
	}
	_, err := db.GetAccount(t.Context(), "x")
	wantErr(t, err, storage.ErrClosed)
	wantErr(t, db.Close(), storage.ErrClosed)
}

// Nothing secret is stored: no API key secret appears in any file.
func TestNoSecretOnDisk(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	key, _, err := db.MintKey(t.Context(), acct, []string{storage.ScopeValidateRead}, "ci")
	if err != nil {
		t.Fatal(err)
	}
	_, secret, _ := storage.ParseKey(key)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	noFileHolds(t, db.dir, secret)
}

// noFileHolds fails the test if a file under dir holds one of secrets.
func noFileHolds(t *testing.T, dir string, secrets ...string) {
	t.Helper()
	files := 0
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, s := range secrets {
			if s == "" {
				t.Fatal("an empty secret")
			}
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds a secret", p)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("read %d files of %s: %v", files, dir, err)
	}
}
