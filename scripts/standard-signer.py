#!/usr/bin/env python3
"""A device that signs as standard clients do: PyJWT (on cryptography's ECDSA),
which, like phones' keystores, leaves a signature's `s` as it comes, high or low.

Usage: standard-signer.py BASE_URL EMAIL PASSWORD ANSWERS PROOFS

Signs in with a fresh P-256 key, then answers ANSWERS phone resets of EMAIL
with signed approvals, then changes its key PROOFS times with proofs of
possession (the new key's and the old key's). Prints one JSON object:
{"answers": [[status, high_s], ...], "proofs": [[status, new_high_s, previous_high_s], ...]}
"""
import base64
import json
import sys
import time
import urllib.error
import urllib.request

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

# Half the order of P-256: an `s` above it is "high".
HALF_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551 // 2


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwk(key) -> dict:
    numbers = key.public_key().public_numbers()
    return {"kty": "EC", "crv": "P-256", "x": b64url(numbers.x.to_bytes(32, "big")), "y": b64url(numbers.y.to_bytes(32, "big"))}


def high_s(token: str) -> bool:
    signature = base64.urlsafe_b64decode(token.split(".")[2] + "==")
    return int.from_bytes(signature[32:], "big") > HALF_ORDER


def call(method: str, url: str, body=None, api_key=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if api_key:
        request.add_header("X-API-Key", api_key)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def main() -> None:
    base, email, password, answers, proofs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    key = ec.generate_private_key(ec.SECP256R1())
    status, login = call(
        "POST", f"{base}/api/mobile/auth/login",
        {"email": email, "password": password, "deviceName": "PyJWT phone", "platform": "android", "publicKey": jwk(key)})
    if status != 200:
        sys.exit(f"login: {status} {login}")
    api_key, device_id = login["apiKey"], login["device"]["id"]
    results = {"answers": [], "proofs": []}
    for _ in range(answers):
        status, started = call("POST", f"{base}/api/mobile/auth/reset/phone/initiate", {"email": email, "newPassword": "staple orbit lantern"})
        if status != 200:
            sys.exit(f"initiate: {status} {started}")
        claims = {"requestId": started["requestId"], "decision": "approve", "numberCode": started.get("numberCode"),
                  "iat": int(time.time()), "deviceId": device_id}
        token = jwt.encode(claims, key, algorithm="ES256", headers={"typ": "countersign-answer+jwt"})
        status, _ = call("POST", f"{base}/api/mobile/approvals/{started['requestId']}/respond",
                         {"decision": "approve", "numberCode": started.get("numberCode"), "signature": token}, api_key)
        results["answers"].append([status, high_s(token)])
    for index in range(proofs):
        new_key = ec.generate_private_key(ec.SECP256R1())
        # A proof is used once by (device, key, iat): each change gets an iat of its own, as
        # changes seconds apart would, so the old key's proof is not its own earlier one.
        claims = {"deviceId": device_id, "iat": int(time.time()) - proofs + index}
        proof = jwt.encode(claims, new_key, algorithm="ES256")
        previous = jwt.encode(claims, key, algorithm="ES256")
        status, _ = call("PUT", f"{base}/api/mobile/device/public-key",
                         {"publicKey": jwk(new_key), "proof": proof, "previousProof": previous}, api_key)
        results["proofs"].append([status, high_s(proof), high_s(previous)])
        if status == 200:
            key = new_key
    print(json.dumps(results))


if __name__ == "__main__":
    main()
