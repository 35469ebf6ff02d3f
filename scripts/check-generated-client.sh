#!/usr/bin/env bash
# A Swift client generated from docs/openapi.yaml by apple/swift-openapi-generator
# (clients/openapi-swift, a package of its own) builds, and drives one approval
# through the daemon BINARY: user, enrollment, device, approval, answer, completion.
# Usage: scripts/check-generated-client.sh BINARY
set -euo pipefail
binary=${1:?usage: scripts/check-generated-client.sh BINARY}
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
cd "$(dirname "$0")/.."
package=clients/openapi-swift
swift build --package-path "$package" --build-tests
COUNTERSIGN_BINARY="$binary" swift test --package-path "$package" --skip-build
