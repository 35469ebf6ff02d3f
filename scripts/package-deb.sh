#!/usr/bin/env bash
# Builds countersign_<version>_<arch>.deb with dpkg-deb: the release binary
# with the Swift runtime linked in (--static-swift-stdlib), the systemd unit,
# the commented config file (a conffile), man pages from swift-argument-parser's
# generate-manual plugin, bash/zsh/fish completions, the PAM module
# pam_countersign.so with its man page, the FreeRADIUS files and the docs.
#
#   scripts/package-deb.sh [OUTPUT_DIRECTORY]     (default .build/deb)
#
# Progress goes to standard error; the package's path alone to standard output. The version is CountersignVersion.current,
# the one `countersign --version` prints. Needs dpkg-dev (dpkg-shlibdeps).
set -euo pipefail
exec 3>&1 1>&2
cd "$(dirname "$0")/.."
command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"

version=$(sed -n 's/.*static let current = "\([^"]*\)".*/\1/p' Sources/CountersignCore/Support/CountersignVersion.swift)
[ -n "$version" ] || { echo "package-deb: no version in CountersignVersion.swift" >&2; exit 1; }
arch=$(dpkg --print-architecture)
output=${1:-.build/deb}
mkdir -p "$output"
output=$(cd "$output" && pwd)
# Reproducible dates: the last commit's, unless the caller sets one.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
release_date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%F)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/countersign_${version}_${arch}"
doc="$root/usr/share/doc/countersign"

# The man page first: the plugin builds every product in the configuration it
# is given (debug, which `swift test` has built already) and runs each one's
# --experimental-dump-help.
echo "package-deb: man page (swift package generate-manual)"
find .build/plugins -path "*GenerateManual*" -name countersign.1 -delete 2>/dev/null || true
swift package generate-manual --configuration debug --date "$release_date" \
  --authors "the Countersign developers" >"$stage/manual.log" 2>&1 || { cat "$stage/manual.log"; exit 1; }
manual=$(find .build/plugins -path "*GenerateManual*" -name countersign.1 | head -1)
[ -n "$manual" ] && [ -s "$manual" ] || { echo "package-deb: generate-manual wrote no countersign.1" >&2; cat "$stage/manual.log"; exit 1; }

echo "package-deb: release build of countersign $version, the Swift runtime linked statically"
swift build -c release --static-swift-stdlib --product countersign
binary="$(swift build -c release --static-swift-stdlib --show-bin-path)/countersign"
libraries=$(ldd "$binary")
if grep -q libswift <<<"$libraries"; then
  echo "package-deb: $binary still loads a Swift runtime library:" >&2
  echo "$libraries" >&2
  exit 1
fi

install -D -m 0755 "$binary" "$root/usr/bin/countersign"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$root/usr/bin/countersign"
"$root/usr/bin/countersign" --version | grep -qx "$version" || { echo "package-deb: the binary is not version $version" >&2; exit 1; }

# The unit, from the repository's: the packaged binary, and its documentation.
install -d "$root/usr/lib/systemd/system"
sed -e 's#/usr/local/bin/countersign#/usr/bin/countersign#' systemd/countersign.service >"$root/usr/lib/systemd/system/countersign.service"
chmod 0644 "$root/usr/lib/systemd/system/countersign.service"
install -D -m 0644 systemd/countersign.json "$root/etc/countersign/countersign.json"
install -D -m 0644 packaging/deb/sysusers.conf "$root/usr/lib/sysusers.d/countersign.conf"

install -d "$root/usr/share/man/man1"
gzip -9n <"$manual" >"$root/usr/share/man/man1/countersign.1.gz"
chmod 0644 "$root/usr/share/man/man1/countersign.1.gz"

# Completion files are read by the shells, not run: no #! line.
"$root/usr/bin/countersign" --generate-completion-script bash | sed '1{/^#!/d}' >"$stage/bash"
"$root/usr/bin/countersign" --generate-completion-script zsh >"$stage/zsh"
"$root/usr/bin/countersign" --generate-completion-script fish >"$stage/fish"
install -D -m 0644 "$stage/bash" "$root/usr/share/bash-completion/completions/countersign"
install -D -m 0644 "$stage/zsh" "$root/usr/share/zsh/vendor-completions/_countersign"
install -D -m 0644 "$stage/fish" "$root/usr/share/fish/vendor_completions.d/countersign.fish"

# The PAM module, at Debian's multiarch PAM path, and its man page.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
module="$root/usr/lib/$multiarch/security/pam_countersign.so"
bash scripts/build-pam.sh "$stage/pam" >/dev/null
install -D -m 0644 "$stage/pam/pam_countersign.so" "$module"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$module"
install -d "$root/usr/share/man/man8"
gzip -9n <pam/pam_countersign.8 >"$root/usr/share/man/man8/pam_countersign.8.gz"
chmod 0644 "$root/usr/share/man/man8/pam_countersign.8.gz"

# The FreeRADIUS site and rest modules, for the operator to copy and fill in.
for file in mods-available/countersign sites-available/countersign; do
  install -D -m 0644 "packaging/freeradius/$file" "$root/usr/share/countersign/freeradius/$file"
done

install -d "$doc"
install -m 0644 README.md docs/operating.md docs/integrating.md docs/phone-app.md docs/security.md docs/pam.md docs/freeradius.md \
  docs/openapi.yaml docs/grafana-dashboard.json "$doc/"
maintainer="Countersign developers <countersign@example.org>"
{
  echo "countersign ($version) unstable; urgency=medium"
  echo
  echo "  * Countersign $version: see /usr/share/doc/countersign/README.md."
  echo
  echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.gz"
# The Swift packages linked into /usr/bin/countersign, and only those (not the ones only the tests use): the
# modules the linker was given, each found in its package's checkout.
linked=$(sed -nE 's#.*/([^/]+)\.build/.*#\1#p' "$(dirname "$binary")/countersign.product/Objects.LinkFileList" | sort -u |
  while read -r module; do find .build/checkouts -mindepth 2 -maxdepth 3 -type d -name "$module" | cut -d/ -f3; done |
  sort -u)
[ -n "$linked" ] || { echo "package-deb: no linked package found in the link file list" >&2; exit 1; }
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: countersign"
  echo "Upstream-Contact: $maintainer"
  echo "Comment: /usr/bin/countersign links the Swift runtime (Apache-2.0 with Runtime"
  echo " Library Exception) statically, and these Swift packages, each under the"
  echo " license its repository states (their NOTICE files are in"
  echo " /usr/share/doc/countersign/third-party-notices.txt). Some carry code of"
  echo " others under its own license: swift-crypto and swift-nio-ssl BoringSSL"
  echo " (OpenSSL and ISC licenses), swift-nio llhttp (MIT), swift-nio-extras zlib"
  echo " (zlib license), swift-crypto XKCP (CC0); each repository's LICENSE and"
  echo " NOTICE name them:"
  for name in $linked; do
    checkout=.build/checkouts/$name
    license=$(ls "$checkout" | grep -i -m1 '^licen[cs]e' || true)
    kind="see its repository"
    if [ -n "$license" ]; then
      if grep -q "Apache License" "$checkout/$license"; then kind="Apache-2.0"
      elif grep -qi "Permission is hereby granted, free of charge" "$checkout/$license"; then kind="MIT"
      elif grep -qi "Redistribution and use in source and binary forms" "$checkout/$license"; then kind="BSD"
      fi
    fi
    echo "  $name: $kind"
  done
  echo
  echo "Files: *"
  echo "Copyright: 2025-$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y) the Countersign developers"
  echo "License: Apache-2.0"
  echo
  echo "License: Apache-2.0"
  echo " Licensed under the Apache License, Version 2.0 (the \"License\"); you may not"
  echo " use this file except in compliance with the License. You may obtain a copy of"
  echo " the License at"
  echo " ."
  echo "     http://www.apache.org/licenses/LICENSE-2.0"
  echo " ."
  echo " Unless required by applicable law or agreed to in writing, software"
  echo " distributed under the License is distributed on an \"AS IS\" BASIS, WITHOUT"
  echo " WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the"
  echo " License for the specific language governing permissions and limitations under"
  echo " the License."
  echo " ."
  echo " On Debian systems, the complete text of the Apache License 2.0 is in"
  echo " /usr/share/common-licenses/Apache-2.0."
} >"$doc/copyright"
# Apache-2.0 asks that a work's NOTICE travel with what is built from it: Countersign's, then each linked package's.
{
  cat NOTICE
  for name in $linked; do
    notice=$(ls ".build/checkouts/$name" | grep -i -m1 '^notice' || true)
    [ -n "$notice" ] || continue
    printf '\n\n==== %s (%s) ====\n\n' "$name" "$notice"
    cat ".build/checkouts/$name/$notice"
  done
} >"$doc/third-party-notices.txt"
chmod 0644 "$doc/third-party-notices.txt"
chmod 0644 "$doc/changelog.gz" "$doc/copyright"

# swift-nio-extras compiles its own copy of zlib (CNIOExtrasZlib, for HTTP
# compression) into every program that uses it; it cannot be swapped for
# Debian's libz1g without patching that package, so lintian is told so.
install -D -m 0644 packaging/deb/lintian-overrides "$root/usr/share/lintian/overrides/countersign"

# Depends: the Debian libraries the binary really loads, as dpkg-shlibdeps finds them.
mkdir -p "$stage/shlibs/debian"
printf 'Source: countersign\n\nPackage: countersign\nArchitecture: any\n' >"$stage/shlibs/debian/control"
shlibs=$(cd "$stage/shlibs" && dpkg-shlibdeps -O "$root/usr/bin/countersign" "$module" 2>"$stage/shlibs.log") \
  || { echo "package-deb: dpkg-shlibdeps failed:" >&2; cat "$stage/shlibs.log" >&2; exit 1; }
depends=$(sed -n 's/^shlibs:Depends=//p' <<<"$shlibs")
[ -n "$depends" ] || { echo "package-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
# The symbols say 3.20; the statements need RETURNING (3.35): the store refuses an older SQLite at start.
depends=$(sed 's/libsqlite3-0 ([^)]*)/libsqlite3-0 (>= 3.35.0)/' <<<"$depends")

install -d "$root/DEBIAN"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
echo /etc/countersign/countersign.json >"$root/DEBIAN/conffiles"
cat >"$root/DEBIAN/control" <<CONTROL
Package: countersign
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Recommends: systemd
Section: admin
Priority: optional
Description: phone-approval broker for sensitive actions
 Countersign lets a user approve a sensitive action (resetting a forgotten
 password, or anything a relying service asks) from a phone they already
 trust: it creates a request that expires after 60 seconds, pushes a prompt
 (FCM, APNs or Web Push), lets the requester poll or long-poll its status and
 carries the action out exactly once after approval, with number matching
 against prompt-bombing.
 .
 This package holds the daemon, its hardened systemd unit (run as the
 system user countersign), the config file /etc/countersign/countersign.json,
 the admin commands, the PAM module pam_countersign.so (SSH and sudo logins
 approved on the phone) and a FreeRADIUS site for VPN logins.
CONTROL
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"

package="$output/countersign_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$package" >/dev/null
echo "package-deb: $(du -h "$package" | cut -f1) $package"
echo "$package" >&3
