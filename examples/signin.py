#!/usr/bin/env python3
"""Sign-in with a second factor through Countersign: the relying service's side.

    COUNTERSIGN_URL=http://127.0.0.1:8080 COUNTERSIGN_API_KEY=csk_... \
        python3 examples/signin.py ana@example.com

Creates an approval for the user (who has enrolled a device), shows the number
code to type on the phone, long-polls until the phone answers, and completes
the approval, exactly once. Exit status 0 when signed in, 1 otherwise.
Python standard library only.
"""
import json
import os
import sys
import urllib.error
import urllib.request
import uuid

BASE = os.environ.get("COUNTERSIGN_URL", "http://127.0.0.1:8080").rstrip("/")
API_KEY = os.environ["COUNTERSIGN_API_KEY"]


def call(method, path, body=None, headers=None):
    """One request to the approvals API; returns (status, JSON answer)."""
    request = urllib.request.Request(
        BASE + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + API_KEY, "Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=40) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def main():
    user = sys.argv[1]
    # The same key on a retry (a timeout, a crash) returns the same approval instead of prompting twice.
    status, created = call(
        "POST",
        "/v1/approvals",
        {
            "user": user,
            "action": "login",
            "title": "Sign in to Example Admin",
            "body": "Python on this machine wants to sign in as you.",
            "context": {"ip": "203.0.113.7", "location": "Berlin, DE"},
        },
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    if status != 201:
        print(f"cannot ask for approval: {status} {created.get('error')}: {created.get('message')}", flush=True)
        return 1
    approval = created["approvalId"]
    if created.get("numberCode"):
        print(f"Approve on your phone and enter the number {created['numberCode']}", flush=True)
    else:
        print("Approve on your phone", flush=True)
    print(f"approval {approval}, expires {created['expiresAt']}", flush=True)

    while True:
        status, answer = call("GET", f"/v1/approvals/{approval}?wait=25")
        if status != 200:
            print(f"cannot read the approval: {status} {answer.get('error')}", flush=True)
            return 1
        if answer["status"] != "pending":
            break
        print("still waiting for the phone...", flush=True)

    if answer["status"] != "approved":
        print(f"not signed in: the approval is {answer['status']}", flush=True)
        return 1
    status, done = call("POST", f"/v1/approvals/{approval}/complete")
    if status != 200:
        print(f"not signed in: completing answered {status} {done.get('error')}", flush=True)
        return 1
    device = (answer.get("device") or {}).get("name", "a trusted device")
    print(f"signed in, approved on {device}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
