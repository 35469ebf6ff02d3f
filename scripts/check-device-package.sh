#!/usr/bin/env bash
# The device library as an app gets it (countersign-device/, a package of its
# own): its dependency graph holds swift-crypto (and what swift-crypto needs)
# and nothing server-side, it builds, its tests and the snippets of
# docs/phone-app.md pass, and those snippets are the compiled code.
set -euo pipefail
cd "$(dirname "$0")/.."
package=countersign-device

swift package --package-path "$package" resolve
graph_file=$(mktemp)
swift package --package-path "$package" show-dependencies --format json --output-path "$graph_file"
python3 - "$graph_file" <<'PYCHECK'
import json, sys
graph = json.load(open(sys.argv[1]))
names = set()
def walk(node):
    for dependency in node.get("dependencies", []):
        names.add(dependency["identity"])
        walk(dependency)
walk(graph)
allowed = {"swift-crypto", "swift-asn1"}
server = sorted(n for n in names if n.startswith("swift-nio") or n in {"async-http-client", "hummingbird", "grdb.swift", "postgres-nio", "jwt-kit"})
extra = sorted(names - allowed)
print("device package: depends on " + (", ".join(sorted(names)) or "nothing"))
if server or extra:
    sys.exit("device package: depends on more than swift-crypto: " + ", ".join(extra))
PYCHECK
rm -f "$graph_file"

# The built targets too: no module of SwiftNIO (or any server library) is compiled for it.
swift build --package-path "$package" --build-tests
modules=$(ls "$package/.build/debug/Modules" 2>/dev/null || ls "$package/.build/debug")
if echo "$modules" | grep -E '^(NIO|AsyncHTTPClient|Hummingbird|GRDB|PostgresNIO|JWTKit)' ; then
  echo "device package: a server module was built for it" >&2
  exit 1
fi
swift test --package-path "$package" --skip-build
python3 scripts/check-doc-snippets.py docs/phone-app.md "$package"/Tests/PhoneAppSnippets/Snippets.swift
