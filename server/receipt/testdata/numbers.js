// Generates numbers.txt: IEEE 754 doubles (as 16 hex digits of their bits)
// and how ECMAScript's Number.prototype.toString writes them, the
// RFC 8785 §3.2.2.3 oracle for TestAppendNumberECMAScript.
//
//   node numbers.js > numbers.txt
//
// Deterministic: a fixed xorshift64 seed.
'use strict';
const buf = new DataView(new ArrayBuffer(8));
function fromBits(big) { buf.setBigUint64(0, big); return buf.getFloat64(0); }
function bits(f) { buf.setFloat64(0, f); return buf.getBigUint64(0); }
let s = 0x9E3779B97F4A7C15n;
const M = (1n << 64n) - 1n;
function next() { s ^= (s << 13n) & M; s ^= s >> 7n; s ^= (s << 17n) & M; return s; }
const out = [];
function add(f) {
  if (!Number.isFinite(f)) return;
  out.push(bits(f).toString(16).padStart(16, '0') + ' ' + String(f));
}
// Random bit patterns: every exponent, every mantissa shape.
for (let i = 0; i < 1500; i++) add(fromBits(next()));
// Random values near the layout boundaries: 1e-7..1e-6 and 1e20..1e22.
for (let i = 0; i < 200; i++) {
  const u = Number(next() >> 11n) / 2 ** 53;
  add(1e-7 + u * 9e-7); add(1e20 + u * 2e21); add(-(1e-7 + u * 9e-7));
}
// Powers of ten, their neighbours and simple multiples.
for (let e = -325; e <= 308; e++) {
  const p = Number('1e' + e);
  add(p); add(-p); add(p / 3);
  const b = bits(p);
  if (b > 0n) add(fromBits(b - 1n));
  add(fromBits(b + 1n));
}
// Integers: small, around 2^53, long.
for (let i = 0; i < 150; i++) {
  add(Number(next() % 1000000n));
  add(Number(next() >> 11n));
  add(Number(next()) * 1000);
  add(2 ** 53 + i); add(-(2 ** 53) - i);
}
// Short decimals, as people write them.
for (let i = 0; i < 200; i++) {
  const d = Number(next() % 100000n) / 10 ** Number(next() % 10n);
  add(d); add(-d);
}
console.log(out.join('\n'));
