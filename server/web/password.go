package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Argon2Params are the cost of a password hash (RFC 9106 §3.1). The
// defaults follow its second recommended option (t=3, m=64 MiB) with one
// lane, since the appliance hashes on a shared CPU: about 100 ms on one
// core of a current server.
type Argon2Params struct {
	MemoryKiB   uint32
	Iterations  uint32
	Parallelism uint8
}

// DefaultArgon2 is RFC 9106's second recommended option, one lane.
var DefaultArgon2 = Argon2Params{MemoryKiB: 64 << 10, Iterations: 3, Parallelism: 1}

const (
	saltLen = 16
	hashLen = 32
	// MinPassword and MaxPassword bound a password's length in
	// characters. No composition rules (NIST SP 800-63B §3.1.1.2).
	MinPassword = 12
	MaxPassword = 256
)

var b64 = base64.RawStdEncoding

// hasher makes and checks Argon2id hashes, at most slots at once: each
// takes MemoryKiB of memory, so a burst of logins cannot take the box's.
type hasher struct {
	params Argon2Params
	slots  chan struct{}
	// dummy is a hash of nothing anyone can type, checked for unknown
	// emails so that a login takes as long whether or not the user
	// exists. New makes it (makeDummy), before the first login: made at
	// the first unknown email, it made that login take twice as long as
	// any other, which told that the email has no user.
	dummy string
}

func newHasher(p Argon2Params, slots int) (*hasher, error) {
	if p.MemoryKiB < 8*uint32(p.Parallelism) || p.Iterations < 1 || p.Parallelism < 1 {
		return nil, fmt.Errorf("argon2 parameters %+v out of range", p)
	}
	return &hasher{params: p, slots: make(chan struct{}, max(slots, 1))}, nil
}

// makeDummy makes the dummy hash: a random salt and a random sum at the
// current cost. No Argon2id is run to make it: checking a password
// against it runs one at the cost its string names, as against any user's
// hash, and no password has a random sum as its hash (finding one is
// Argon2id's preimage problem). Making it from a hash of random bytes
// cost the process a hash's memory (64 MiB by default) at every start,
// which doubled the heap's first goal and the resident size.
func (h *hasher) makeDummy() {
	salt := make([]byte, saltLen)
	sum := make([]byte, hashLen)
	rand.Read(salt)
	rand.Read(sum)
	h.dummy = phc(h.params, salt, sum)
}

// phc is the PHC string of an Argon2id hash:
// $argon2id$v=19$m=<KiB>,t=<iterations>,p=<lanes>$<salt>$<hash>.
func phc(p Argon2Params, salt, sum []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Iterations, p.Parallelism,
		b64.EncodeToString(salt), b64.EncodeToString(sum))
}

// hashNew checks a new password and hashes it; the error is worded for
// the person who chose it.
func (h *hasher) hashNew(ctx context.Context, pw string) (string, error) {
	if msg := checkPassword(pw); msg != "" {
		return "", errors.New("password " + msg)
	}
	return h.hash(ctx, pw)
}

// checkPassword says what is wrong with a new password, or "".
func checkPassword(pw string) string {
	switch n := utf8.RuneCountInString(pw); {
	case !utf8.ValidString(pw):
		return "must be valid UTF-8"
	case n < MinPassword:
		return fmt.Sprintf("must be at least %d characters", MinPassword)
	case n > MaxPassword:
		return fmt.Sprintf("must be at most %d characters", MaxPassword)
	}
	return ""
}

func (h *hasher) acquire(ctx context.Context) error {
	select {
	case h.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hasher) release() { <-h.slots }

// hash returns the PHC string of pw's Argon2id hash with a new salt.
func (h *hasher) hash(ctx context.Context, pw string) (string, error) {
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer h.release()
	salt := make([]byte, saltLen)
	rand.Read(salt)
	p := h.params
	return phc(p, salt, argon2.IDKey([]byte(pw), salt, p.Iterations, p.MemoryKiB, p.Parallelism, hashLen)), nil
}

var errBadHash = errors.New("web: malformed password hash")

// verify reports whether pw matches the PHC string, with the parameters
// the string names (so raising the defaults leaves old hashes valid), and
// whether the hash should be remade with the current parameters.
func (h *hasher) verify(ctx context.Context, phc, pw string) (ok, stale bool, err error) {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false, false, errBadHash
	}
	var p Argon2Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Iterations, &p.Parallelism); err != nil ||
		p.Iterations < 1 || p.Parallelism < 1 || p.MemoryKiB > 4<<20 || p.Iterations > 64 {
		return false, false, errBadHash
	}
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(want) < 16 {
		return false, false, errBadHash
	}
	if err := h.acquire(ctx); err != nil {
		return false, false, err
	}
	defer h.release()
	got := argon2.IDKey([]byte(pw), salt, p.Iterations, p.MemoryKiB, p.Parallelism, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, p != h.params, nil
}

// PasswordHasher returns what HashPassword does, without the rest of
// Web: for tests and tools that add users.
func PasswordHasher(p Argon2Params) (func(string) (string, error), error) {
	h, err := newHasher(p, runtime.NumCPU())
	if err != nil {
		return nil, err
	}
	return func(pw string) (string, error) { return h.hashNew(context.Background(), pw) }, nil
}
