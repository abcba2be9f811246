package storage

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// NewUUIDv4 returns a random UUID (RFC 9562 §5.4) in the canonical
// lower-case 8-4-4-4-12 form. Job ids are v4: nothing about them should be
// guessable or ordered.
func NewUUIDv4() string {
	var u [16]byte
	rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return formatUUID(u)
}

// NewUUIDv7 returns a time-ordered UUID (RFC 9562 §5.7): 48 bits of Unix
// milliseconds, then random bits. Result and event ids are v7, so the
// records written together sit together in the key space.
func NewUUIDv7(t time.Time) string {
	var u [16]byte
	rand.Read(u[:])
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	return formatUUID(u)
}

func formatUUID(u [16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}

// ValidUUID reports whether s is a UUID in canonical lower-case form (any
// version), the only form job ids take.
func ValidUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// randomString returns n characters drawn uniformly from alphabet (at most
// 256 characters) with crypto/rand, by rejection sampling so that no
// character is more likely than another.
func randomString(n int, alphabet string) string {
	limit := 256 - 256%len(alphabet)
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		rand.Read(buf[:])
		for _, c := range buf {
			if int(c) < limit {
				out = append(out, alphabet[int(c)%len(alphabet)])
				if len(out) == n {
					break
				}
			}
		}
	}
	return string(out)
}

const (
	alphaLowerDigits = "abcdefghijklmnopqrstuvwxyz0123456789"
	alphaBase62      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
)
