#!/usr/bin/env python3
"""Verify a verifyd receipt against the published key set, with nothing but
the Python 3 standard library (3.8 or later).

    python3 verify_receipt.py JWKS < receipt.json

JWKS is a file or an http(s) URL, such as
https://verifyd.example/.well-known/jwks.json. Exit status: 0 when the
receipt verifies, 1 when it does not (changed, or signed by another key),
2 when the receipt or the key set is malformed. `--self-test` checks the
Ed25519 code against RFC 8032 §7.1.

This shares no code with verifyd, which is written in Go: it is the second
implementation the project's tests check the signer against. The steps:

 1. parse the receipt (I-JSON, RFC 7493: UTF-8, no duplicate names);
 2. take out "sig", 64 bytes in base64url without padding (RFC 4648 §5);
 3. write the rest in the JSON Canonicalization Scheme (RFC 8785);
 4. find the key named by "kid" in the JWKS (RFC 7517, RFC 8037);
 5. check the Ed25519 signature over the canonical bytes (RFC 8032 §5.1.7).
"""

import base64
import decimal
import hashlib
import json
import re
import sys
import urllib.request


class Malformed(Exception):
    """The receipt or the key set is not of the expected form."""


# ---------------------------------------------------------------- RFC 8785


def canonical(v):
    """RFC 8785 text of a value parsed by load()."""
    if v is None or v is True or v is False:
        return {None: "null", True: "true", False: "false"}[v]
    if isinstance(v, str):
        # ensure_ascii=False escapes exactly what §3.2.2.2 escapes: the
        # quote, the backslash and U+0000-U+001F (\b \f \n \r \t, else \u00xx).
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, float):
        return es_number(v)
    if isinstance(v, list):
        return "[" + ",".join(canonical(x) for x in v) + "]"
    # §3.2.3: names in the order of their UTF-16 code units; comparing the
    # UTF-16BE bytes compares the code units.
    names = sorted(v, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    return "{" + ",".join(canonical(k) + ":" + canonical(v[k]) for k in names) + "}"


def es_number(f):
    """ECMAScript Number::toString of a double (§3.2.2.3)."""
    if f != f or f in (float("inf"), float("-inf")):
        raise Malformed("number out of range")
    if f == 0:
        return "0"
    if f < 0:
        return "-" + es_number(-f)
    # repr() gives the shortest digits that read back as f; as 0.DIGITS x 10^n:
    _, digits, exp = decimal.Decimal(repr(f)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    k, n = len(ds), exp + len(ds)
    if k <= n <= 21:
        return ds + "0" * (n - k)
    if 0 < n <= 21:
        return ds[:n] + "." + ds[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + ds
    e = "e" + ("+" if n > 0 else "-") + str(abs(n - 1))
    return ds[0] + ("." + ds[1:] if k > 1 else "") + e


def load(data):
    """Parse I-JSON: strict UTF-8, no duplicate names, numbers as doubles."""

    def no_dups(pairs):
        obj = dict(pairs)
        if len(obj) != len(pairs):
            raise Malformed("duplicate member name")
        return obj

    def no_constant(name):
        raise Malformed(name + " is not JSON")

    try:
        text = data.decode("utf-8")
        return json.loads(text, object_pairs_hook=no_dups, parse_int=float,
                          parse_constant=no_constant)
    except (UnicodeDecodeError, ValueError) as e:
        raise Malformed(str(e)) from None


def b64url(s, size):
    """Strict base64url without padding of exactly size bytes."""
    if not isinstance(s, str) or not re.fullmatch(r"[A-Za-z0-9_-]*", s):
        raise Malformed("not base64url without padding")
    b = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(b) != size or base64.urlsafe_b64encode(b).rstrip(b"=").decode() != s:
        raise Malformed("not base64url of %d bytes" % size)
    return b


# ---------------------------------------------------------------- RFC 8032

P = 2**255 - 19  # the field
L = 2**252 + 27742317777372353535851937790883648493  # the group order
D = -121665 * pow(121666, P - 2, P) % P  # the curve's d
SQRT_M1 = pow(2, (P - 1) // 4, P)  # a square root of -1

# Points are extended homogeneous coordinates (X, Y, Z, T):
# x = X/Z, y = Y/Z, x*y = T/Z (RFC 8032 §5.1.4).
IDENTITY = (0, 1, 1, 0)


def point_add(p, q):
    """The unified addition of §5.1.4; it doubles too."""
    a = (p[1] - p[0]) * (q[1] - q[0]) % P
    b = (p[1] + p[0]) * (q[1] + q[0]) % P
    c = 2 * p[3] * q[3] * D % P
    d = 2 * p[2] * q[2] % P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def scalar_mult(s, p):
    q = IDENTITY
    while s:
        if s & 1:
            q = point_add(q, p)
        p = point_add(p, p)
        s >>= 1
    return q


def encode_point(p):
    zinv = pow(p[2], P - 2, P)
    x, y = p[0] * zinv % P, p[1] * zinv % P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def decode_point(b):
    """§5.1.3: y and the sign of x; x from x^2 = (y^2-1)/(d y^2+1)."""
    y = int.from_bytes(b, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    if y >= P:
        return None
    u, v = (y * y - 1) % P, (D * y * y + 1) % P
    x = u * pow(v, 3, P) * pow(u * pow(v, 7, P), (P - 5) // 8, P) % P
    if v * x * x % P == -u % P:
        x = x * SQRT_M1 % P
    elif v * x * x % P != u:
        return None  # not on the curve
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = P - x
    return (x, y, 1, x * y % P)


BASE = decode_point((4 * pow(5, P - 2, P) % P).to_bytes(32, "little"))


def ed25519_verify(public, message, signature):
    """§5.1.7, checking [S]B - [k]A encodes to R (as Go and libsodium do)."""
    a = decode_point(public)
    if a is None or len(signature) != 64:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % L
    minus_a = (P - a[0], a[1], a[2], P - a[3])
    return encode_point(point_add(scalar_mult(s, BASE), scalar_mult(k, minus_a))) == signature[:32]


# ---------------------------------------------------------------- receipts


def public_keys(jwks_bytes):
    """kid -> 32-byte key, for the Ed25519 signing keys of a JWK Set."""
    jwks = load(jwks_bytes)
    keys = {}
    for k in jwks.get("keys", []) if isinstance(jwks, dict) else []:
        if (isinstance(k, dict) and k.get("kty") == "OKP" and k.get("crv") == "Ed25519"
                and k.get("alg", "Ed25519") in ("Ed25519", "EdDSA") and k.get("use", "sig") == "sig"):
            keys[k.get("kid")] = b64url(k.get("x"), 32)
    if not keys:
        raise Malformed("the key set has no Ed25519 key")
    return keys


class Invalid(Exception):
    """The receipt does not verify."""


def verify(receipt_bytes, jwks_bytes):
    """Return the kid that signed the receipt; raise Invalid or Malformed."""
    receipt = load(receipt_bytes)
    if not isinstance(receipt, dict):
        raise Malformed("a receipt is a JSON object")
    sig = b64url(receipt.pop("sig", None), 64)
    kid = receipt.get("kid")
    if not isinstance(kid, str):
        raise Malformed("no kid")
    key = public_keys(jwks_bytes).get(kid)
    if key is None:
        raise Invalid("unknown kid %r" % kid)
    try:
        message = canonical(receipt).encode("utf-8")
    except UnicodeEncodeError:
        raise Malformed("lone surrogate in a string") from None
    if not ed25519_verify(key, message, sig):
        raise Invalid("signature does not verify with key %r" % kid)
    return kid


def self_test():
    """RFC 8032 §7.1, tests 1-3, and a changed message."""
    vectors = [
        ("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
         "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        ("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
         "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
        ("fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
         "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
         "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    ]
    for pub, msg, sig in vectors:
        pub, msg, sig = bytes.fromhex(pub), bytes.fromhex(msg), bytes.fromhex(sig)
        assert ed25519_verify(pub, msg, sig), "RFC 8032 vector rejected"
        assert not ed25519_verify(pub, msg + b"x", sig), "changed message accepted"
    assert es_number(1e21) == "1e+21" and es_number(1e-7) == "1e-7"
    assert es_number(333333333.33333329) == "333333333.3333333" and es_number(0.002) == "0.002"
    print("self-test passed")


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        self_test()
        return 0
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        if re.match(r"https?://", argv[1]):
            with urllib.request.urlopen(argv[1], timeout=30) as r:
                jwks = r.read()
        else:
            with open(argv[1], "rb") as f:
                jwks = f.read()
        kid = verify(sys.stdin.buffer.read(), jwks)
    except Invalid as e:
        print("invalid:", e)
        return 1
    except (Malformed, OSError) as e:
        print("malformed:", e)
        return 2
    print("valid: signed with key %s" % kid)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
