#!/usr/bin/env python3
"""Opens a sealed Countersign push with PyPI's pyhpke, for the tests: a
receiver no one here wrote.

    hpke-open.py KEY.pem SEALED AAD

KEY.pem is the device's P-256 private sealing key (PKCS#8 PEM); SEALED the
push's `sealed` member (base64url of enc || ciphertext); AAD what it is bound
to (the request's id, or "" for a notice). Prints the plaintext; exits 10
when it does not open (wrong key, info or aad, or altered bytes).
"""
import base64
import sys

from pyhpke import AEADId, CipherSuite, KDFId, KEMId, KEMKey

key_path, sealed, aad = sys.argv[1], sys.argv[2], sys.argv[3]
suite = CipherSuite.new(KEMId.DHKEM_P256_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.AES128_GCM)
with open(key_path) as f:
    key = KEMKey.from_pem(f.read())
blob = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
enc, ciphertext = blob[:65], blob[65:]
try:
    context = suite.create_recipient_context(enc, key, info=b"countersign push v1")
    plaintext = context.open(ciphertext, aad=aad.encode())
except Exception as error:  # pyhpke raises its own OpenError, among others
    print(f"not opened: {type(error).__name__}: {error}", file=sys.stderr)
    sys.exit(10)
sys.stdout.write(plaintext.decode())
