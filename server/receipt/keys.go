package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// KeyStore persists the key set: one opaque document (the keys.json format
// of README.md) that [KeySet] reads once and rewrites on every rotation.
// LoadKeys answers (nil, nil), or an error matching [fs.ErrNotExist], when
// nothing was saved yet. SaveKeys must replace the document atomically and
// durably: after it returns, a crash leaves either the old or the new
// document, never a mix, and never loses the new one. The document holds a
// private key: store it readable by verifyd only.
type KeyStore interface {
	LoadKeys() ([]byte, error)
	SaveKeys([]byte) error
}

// KeysFileName is the file [FileStore] keeps the key set in.
const KeysFileName = "keys.json"

// FileStore is a [KeyStore] on the file system: Dir/keys.json, mode 0600,
// in a directory created with mode 0700.
type FileStore struct {
	Dir string
}

// NewFileStore returns a FileStore for dir.
func NewFileStore(dir string) *FileStore { return &FileStore{Dir: dir} }

// Path is the key file's path.
func (s *FileStore) Path() string { return filepath.Join(s.Dir, KeysFileName) }

// LoadKeys reads the key file; a missing file is (nil, nil).
func (s *FileStore) LoadKeys() ([]byte, error) {
	b, err := os.ReadFile(s.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("receipt: cannot read key file: %w", err)
	}
	return b, nil
}

// SaveKeys replaces the key file atomically: it writes a temporary file of
// mode 0600 in the same directory, syncs it, renames it over keys.json and
// syncs the directory, so that the rename itself is durable. An error
// before the rename leaves the old file as it was; an error syncing the
// directory after it leaves the new file in place, durable or not.
func (s *FileStore) SaveKeys(data []byte) (err error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("receipt: cannot create key directory: %w", err)
	}
	f, err := os.CreateTemp(s.Dir, "."+KeysFileName+".*.tmp")
	if err != nil {
		return fmt.Errorf("receipt: cannot save keys: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// CreateTemp already uses 0600; say it anyway, whatever the umask did.
	if err = f.Chmod(0o600); err != nil {
		return fmt.Errorf("receipt: cannot save keys: %w", err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("receipt: cannot save keys: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("receipt: cannot save keys: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("receipt: cannot save keys: %w", err)
	}
	if err = os.Rename(tmp, s.Path()); err != nil {
		return fmt.Errorf("receipt: cannot save keys: %w", err)
	}
	d, err := os.Open(s.Dir)
	if err != nil {
		return fmt.Errorf("receipt: cannot sync key directory: %w", err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("receipt: cannot sync key directory: %w", err)
	}
	return nil
}

// keyFileVersion is the version of the keys.json format.
const keyFileVersion = 1

// keyFile is the document a KeyStore keeps.
type keyFile struct {
	Version int         `json:"version"`
	Active  string      `json:"active"`
	Keys    []storedKey `json:"keys"`
}

// storedKey is one key of keyFile. Only the active key keeps its private
// half: Rotate drops the seed of the key it retires, so a leaked key file
// cannot forge receipts under old kids.
type storedKey struct {
	Kid     string     `json:"kid"`
	Created time.Time  `json:"created"`
	Retired *time.Time `json:"retired,omitempty"`
	// X is the public key, base64url without padding (RFC 8037 §2).
	X string `json:"x"`
	// Seed is the 32-byte private seed (RFC 8032 §5.1.5), base64url without
	// padding; the active key only.
	Seed string `json:"seed,omitempty"`
}

// Options tunes a KeySet; the zero value is for production.
type Options struct {
	// Rand supplies key seeds; nil is crypto/rand.
	Rand io.Reader
	// Now stamps created and retired times; nil is time.Now.
	Now func() time.Time
}

// KeySet holds the signing keys: the active private key, which signs every
// new receipt, and the public half of every key it ever had, published in
// the JWKS so that old receipts keep verifying. Signing and reading are
// lock-free; Rotate is serialised. A KeySet is safe for concurrent use.
type KeySet struct {
	store KeyStore
	rand  io.Reader
	now   func() time.Time

	mu  sync.Mutex // held by Rotate
	cur atomic.Pointer[keyState]
}

// keyState is one immutable generation of the key set.
type keyState struct {
	file    keyFile
	kid     string
	kidJSON []byte // kid, for the canonicalizer
	kidStr  []byte // kid as a canonical JSON string, for resign
	priv    ed25519.PrivateKey
	signer  *signer // priv, ready to sign
	pub     *PublicKeys
	jwks    []byte
	legacy  []byte
}

// NewKeySet loads the key set from store, or creates key v1 and saves it
// when the store holds none.
func NewKeySet(store KeyStore) (*KeySet, error) {
	return OpenKeySet(store, Options{})
}

// OpenKeySet is NewKeySet with options.
func OpenKeySet(store KeyStore, opts Options) (*KeySet, error) {
	ks := &KeySet{store: store, rand: opts.Rand, now: opts.Now}
	if ks.rand == nil {
		ks.rand = rand.Reader
	}
	if ks.now == nil {
		ks.now = time.Now
	}
	data, err := store.LoadKeys()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		f, err := ks.addKey(keyFile{Version: keyFileVersion})
		if err != nil {
			return nil, err
		}
		st, err := newKeyState(f)
		if err != nil {
			return nil, err
		}
		if err := ks.save(f); err != nil {
			return nil, err
		}
		ks.cur.Store(st)
		return ks, nil
	}
	st, err := parseKeyFile(data)
	if err != nil {
		return nil, err
	}
	ks.cur.Store(st)
	return ks, nil
}

func parseKeyFile(data []byte) (*keyState, error) {
	var f keyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("receipt: bad key file: %w", err)
	}
	return newKeyState(f)
}

// Reload reads the store again and, when another process changed the
// set (a fleet's boxes share one store: one rotated it), takes the new
// set: new receipts are signed with its active key. It reports whether
// the active key changed.
func (ks *KeySet) Reload() (bool, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.reloadLocked()
}

func (ks *KeySet) reloadLocked() (bool, error) {
	data, err := ks.store.LoadKeys()
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return false, err
	}
	st, err := parseKeyFile(data)
	if err != nil {
		return false, err
	}
	old := ks.cur.Load()
	if st.kid == old.kid && len(st.file.Keys) == len(old.file.Keys) {
		return false, nil
	}
	ks.cur.Store(st)
	return st.kid != old.kid, nil
}

// Rotate makes a new key the active one and returns its kid, one version
// above the highest so far (v1, v2, …). The retired key loses its private
// half and stays in the JWKS. The new set is saved before it is used: when
// saving fails, nothing changes.
func (ks *KeySet) Rotate() (string, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	// Another box of a fleet may have rotated: start from the stored set.
	if _, err := ks.reloadLocked(); err != nil {
		return "", err
	}
	old := ks.cur.Load()
	f := old.file
	f.Keys = slices.Clone(f.Keys)
	now := ks.now().UTC()
	for i := range f.Keys {
		if f.Keys[i].Kid == f.Active {
			f.Keys[i].Seed = ""
			f.Keys[i].Retired = &now
		}
	}
	f, err := ks.addKey(f)
	if err != nil {
		return "", err
	}
	st, err := newKeyState(f)
	if err != nil {
		return "", err
	}
	if err := ks.save(f); err != nil {
		return "", err
	}
	ks.cur.Store(st)
	return st.kid, nil
}

// ActiveKid is the kid new receipts are signed with.
func (ks *KeySet) ActiveKid() string { return ks.cur.Load().kid }

// PublicKeys is the published key set, for verifying.
func (ks *KeySet) PublicKeys() *PublicKeys { return ks.cur.Load().pub }

// Verify checks a receipt against the set's own public keys; see
// [PublicKeys.Verify].
func (ks *KeySet) Verify(receiptJSON []byte) (kid string, err error) {
	return ks.cur.Load().pub.Verify(receiptJSON)
}

func (ks *KeySet) save(f keyFile) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("receipt: cannot encode keys: %w", err)
	}
	if err := ks.store.SaveKeys(append(data, '\n')); err != nil {
		return fmt.Errorf("receipt: cannot save keys: %w", err)
	}
	return nil
}

// addKey returns f with a new active key, one version above the highest.
func (ks *KeySet) addKey(f keyFile) (keyFile, error) {
	next := 1
	for _, k := range f.Keys {
		if v, ok := kidVersion(k.Kid); ok && v >= next {
			next = v + 1
		}
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(ks.rand, seed); err != nil {
		return f, fmt.Errorf("receipt: cannot generate key: %w", err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	kid := "v" + strconv.Itoa(next)
	f.Keys = append(f.Keys, storedKey{
		Kid:     kid,
		Created: ks.now().UTC(),
		X:       b64.EncodeToString(priv.Public().(ed25519.PublicKey)),
		Seed:    b64.EncodeToString(seed),
	})
	f.Active = kid
	return f, nil
}

// xLen is the length of a public key in base64url without padding.
const xLen = 43

// b64 is base64url without padding (RFC 4648 §5), strict about the
// unused bits of the last character so that every value has one spelling.
var b64 = base64.RawURLEncoding.Strict()

// kidVersion parses a kid of the form v<N>, N ≥ 1 without leading zeros.
func kidVersion(kid string) (int, bool) {
	s, ok := strings.CutPrefix(kid, "v")
	if !ok || s == "" || s[0] == '0' || len(s) > 9 {
		return 0, false
	}
	n := 0
	for _, b := range []byte(s) {
		if b < '0' || b > '9' {
			return 0, false
		}
		n = n*10 + int(b-'0')
	}
	return n, true
}

// newKeyState checks a key file and derives everything Sign, JWKS and
// Verify need from it.
func newKeyState(f keyFile) (*keyState, error) {
	if f.Version != keyFileVersion {
		return nil, fmt.Errorf("receipt: key file version %d, want %d", f.Version, keyFileVersion)
	}
	var errs []error
	st := &keyState{file: f, kid: f.Active}
	pub := &PublicKeys{keys: make(map[string]ed25519.PublicKey, len(f.Keys))}
	for i, k := range f.Keys {
		if _, ok := kidVersion(k.Kid); !ok {
			errs = append(errs, fmt.Errorf("key %d: kid %q is not of the form v1, v2, …", i, k.Kid))
			continue
		}
		if _, dup := pub.keys[k.Kid]; dup {
			errs = append(errs, fmt.Errorf("key %s: listed twice", k.Kid))
			continue
		}
		x, err := b64.DecodeString(k.X)
		if err != nil || len(k.X) != xLen || len(x) != ed25519.PublicKeySize {
			errs = append(errs, fmt.Errorf("key %s: x is not a base64url Ed25519 public key", k.Kid))
			continue
		}
		pub.keys[k.Kid] = ed25519.PublicKey(x)
		pub.kids = append(pub.kids, k.Kid)
		if k.Seed == "" {
			if k.Kid == f.Active {
				errs = append(errs, fmt.Errorf("key %s: the active key has no seed", k.Kid))
			}
			continue
		}
		seed, err := b64.DecodeString(k.Seed)
		if err != nil || len(k.Seed) != xLen || len(seed) != ed25519.SeedSize {
			errs = append(errs, fmt.Errorf("key %s: seed is not a base64url 32-byte Ed25519 seed", k.Kid))
			continue
		}
		priv := ed25519.NewKeyFromSeed(seed)
		if !bytes.Equal(priv.Public().(ed25519.PublicKey), x) {
			errs = append(errs, fmt.Errorf("key %s: seed and x do not match", k.Kid))
			continue
		}
		if k.Kid == f.Active {
			st.priv = priv
			if st.signer, err = newSigner(priv); err != nil {
				errs = append(errs, fmt.Errorf("key %s: %w", k.Kid, err))
			}
		}
	}
	if _, ok := pub.keys[f.Active]; !ok && f.Active != "" {
		errs = append(errs, fmt.Errorf("active key %q is not in the file", f.Active))
	}
	if f.Active == "" {
		errs = append(errs, errors.New("no active key"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("receipt: bad key file: %w", errors.Join(errs...))
	}
	// Newest first.
	slices.SortFunc(pub.kids, func(a, b string) int {
		va, _ := kidVersion(a)
		vb, _ := kidVersion(b)
		return vb - va
	})
	st.pub = pub
	st.kidJSON = []byte(st.kid)
	st.kidStr = appendString(nil, st.kidJSON)
	st.jwks = buildJWKS(pub, AlgEd25519)
	st.legacy = buildJWKS(pub, AlgEdDSA)
	return st, nil
}
