#!/usr/bin/env python3
"""Checks that every Swift snippet of a document is compiled code, word for word.

Usage: check-doc-snippets.py DOCUMENT SOURCE...

Each ```swift block of DOCUMENT must equal one region of the SOURCE files
between a `// snippet: NAME` line and an `// end snippet` line (as the test
target holds them), and each region must be shown in DOCUMENT. Blocks that are
not Swift code (a Package.swift fragment is marked with its comment
`// Package.swift of the app`) are exempt. Exit 1 with what differs.
"""
import re
import sys

document, sources = sys.argv[1], sys.argv[2:]
text = open(document, encoding="utf-8").read()
blocks = [b.rstrip("\n") for b in re.findall(r"^```swift\n(.*?)^```$", text, re.S | re.M)]
blocks = [b for b in blocks if not b.startswith("// Package.swift of the app")]
regions = {}
for source in sources:
    code = open(source, encoding="utf-8").read()
    for name, body in re.findall(r"^// snippet: (\S+)\n(.*?)^// end snippet$", code, re.S | re.M):
        regions[name] = body.rstrip("\n")

failures = []
for block in blocks:
    if block not in regions.values():
        failures.append("a snippet of %s is not compiled code:\n%s" % (document, block))
for name, body in regions.items():
    if body not in blocks:
        failures.append("the compiled snippet %r is not in %s as it is in the source" % (name, document))
if not regions:
    failures.append("no snippet regions in %s" % ", ".join(sources))
for failure in failures:
    print("check-doc-snippets: " + failure, file=sys.stderr)
if failures:
    sys.exit(1)
print("check-doc-snippets: %d snippets of %s are compiled code" % (len(blocks), document))
