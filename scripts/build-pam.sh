#!/usr/bin/env bash
# Builds pam_countersign.so (pam/pam_countersign.c) into the folder given
# (default .build/pam): C with libcurl (HTTP, TLS) and json-c (JSON), the
# hardening flags Debian's packages use, and only the PAM entry points
# exported; OpenSSL's libcrypto hashes the approval's log reference. Needs
# libpam0g-dev, libcurl4-openssl-dev, libjson-c-dev and libssl-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.build/pam}
mkdir -p "$out"
cc=${CC:-cc}
"$cc" -std=gnu11 -O2 -g -fPIC -shared -fvisibility=hidden \
  -Wall -Wextra -Werror -Wformat=2 -Wno-unused-parameter \
  -fstack-protector-strong -fstack-clash-protection -D_FORTIFY_SOURCE=2 \
  -Wl,-z,relro -Wl,-z,now -Wl,-z,defs -Wl,--as-needed \
  -o "$out/pam_countersign.so.tmp" pam/pam_countersign.c -lpam -lcurl -ljson-c -lcrypto
mv "$out/pam_countersign.so.tmp" "$out/pam_countersign.so"
echo "$out/pam_countersign.so"
