package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The binary value encoding of the hot records (ledger entries, holds,
// results, history rows, cache entries, idempotency records): a version
// byte, then fields in a fixed order, integers as (zig-zag) varints and
// strings and byte slices as a uvarint length and the bytes. A new field is
// appended at the end, where a decoder of an older value finds no more
// bytes. JSON is kept for the cold records (accounts, API keys, jobs,
// events), which an operator may want to read with a hex dump.

// valueVersion is the first byte of every binary value.
const valueVersion = 1

// errCorrupt reports a value that does not decode.
var errCorrupt = errors.New("storage: corrupt value")

type enc struct{ b []byte }

func newEnc(n int) *enc { return &enc{b: append(make([]byte, 0, n+1), valueVersion)} }

func (e *enc) uvarint(v uint64) *enc { e.b = binary.AppendUvarint(e.b, v); return e }
func (e *enc) varint(v int64) *enc   { e.b = binary.AppendVarint(e.b, v); return e }
func (e *enc) byte1(c byte) *enc     { e.b = append(e.b, c); return e }

func (e *enc) str(s string) *enc {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
	return e
}

func (e *enc) bytes(p []byte) *enc {
	e.b = binary.AppendUvarint(e.b, uint64(len(p)))
	e.b = append(e.b, p...)
	return e
}

// dec reads what enc wrote; the first error sticks and later reads return
// zero values, so a decoder checks d.err once at the end.
type dec struct {
	b   []byte
	err error
}

func newDec(b []byte, what string) *dec {
	d := &dec{b: b}
	if len(b) == 0 || b[0] != valueVersion {
		d.err = fmt.Errorf("%w: %s: unknown version", errCorrupt, what)
		d.b = nil
		return d
	}
	d.b = b[1:]
	return d
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated %s", errCorrupt, what)
	}
	d.b = nil
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) byte1() byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// raw returns the next length-prefixed field without copying.
func (d *dec) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if uint64(len(d.b)) < n {
		d.fail("field")
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *dec) str() string { return string(d.raw()) }

// bytes returns a copy of the next length-prefixed field (nil when empty):
// values read from Pebble must not outlive their iterator or closer.
func (d *dec) bytes() []byte {
	p := d.raw()
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}
