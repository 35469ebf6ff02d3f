#!/usr/bin/env bash
# Checks a package built by scripts/package-deb.sh the way an operator meets it:
# lintian reports no errors; unpacked into a scratch root (nothing installed on
# this machine), its binary loads no Swift runtime library and finds every
# library it needs, prints the package's version, and walks a whole reset with
# `countersign demo`; the unit, config file, man page and completions are where
# Debian looks for them.
#
#   scripts/test-deb.sh PACKAGE.deb
set -euo pipefail
deb=$1
fail() { echo "test-deb: $*" >&2; exit 1; }

root=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$root" "$work"' EXIT

echo "test-deb: lintian $(basename "$deb")"
lintian --fail-on error --tag-display-limit 0 "$deb" | tee "$work/lintian" || fail "lintian found errors (above)"
echo "test-deb: lintian: no errors ($(grep -c '^W:' "$work/lintian" || true) warnings)"

dpkg-deb -x "$deb" "$root"
binary="$root/usr/bin/countersign"

version=$(dpkg-deb -f "$deb" Version)
printed=$("$binary" --version)
[ "$printed" = "$version" ] || fail "the package is version $version, the binary says $printed"
echo "test-deb: countersign --version: $printed (the package's version)"

libraries=$(ldd "$binary")
if grep -q libswift <<<"$libraries"; then fail "the binary loads a Swift runtime library: $(grep libswift <<<"$libraries")"; fi
if grep -q "not found" <<<"$libraries"; then fail "a library the binary needs is missing: $(grep 'not found' <<<"$libraries")"; fi
depends=$(dpkg-deb -f "$deb" Depends)
for library in libsqlite3 libcurl; do
  case "$depends" in *"$library"*) ;; *) fail "Depends ($depends) does not name $library" ;; esac
done
case "$depends" in *"libsqlite3-0 (>= 3.35.0)"*) ;; *) fail "Depends ($depends) does not ask for SQLite 3.35, which the store needs" ;; esac
echo "test-deb: no libswift; Depends: $depends"

# The licence: Countersign's in DEP-5, the linked packages (and none only the tests use) with theirs, their notices.
copyright="$root/usr/share/doc/countersign/copyright"
grep -q '^License: Apache-2.0$' "$copyright" || fail "the copyright file grants no Apache-2.0 licence"
grep -q '^  swift-nio: Apache-2.0$' "$copyright" || fail "the copyright file does not list swift-nio, which the binary links"
if grep -q 'swift-property-based' "$copyright"; then fail "the copyright file lists swift-property-based, which only the tests use"; fi
grep -q '==== swift-nio (NOTICE.txt) ====' "$root/usr/share/doc/countersign/third-party-notices.txt" || fail "swift-nio's NOTICE is not shipped"
echo "test-deb: Apache-2.0; $(grep -c '^  [a-zA-Z]' "$copyright") linked packages with their licences; their notices"

# A whole phone-approved reset against a throw-away daemon, from the scratch root.
(cd "$root" && timeout 120 "$binary" demo) >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; fail "countersign demo failed"; }
grep -q '"success" *: *true' "$work/demo.log" || { cat "$work/demo.log"; fail "the demo's reset did not complete"; }
echo "test-deb: countersign demo: the reset completed"

# The PAM module where PAM looks for it, loading only what Depends names, exporting only PAM's entry points.
module="$root/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/security/pam_countersign.so"
[ -f "$module" ] || fail "no PAM module at $module"
if ldd "$module" | grep -q "not found"; then fail "a library the PAM module needs is missing: $(ldd "$module" | grep 'not found')"; fi
exported=$(nm -D --defined-only "$module" | awk '$2 == "T" { print $3 }' | sort | tr '\n' ' ')
[ "$exported" = "pam_sm_authenticate pam_sm_setcred " ] || fail "the PAM module exports more than PAM's entry points: $exported"
for library in libpam0g libjson-c5 libcurl4; do
  case "$depends" in *"$library"*) ;; *) fail "Depends ($depends) does not name $library, which the PAM module loads" ;; esac
done
zcat "$root/usr/share/man/man8/pam_countersign.8.gz" | grep -q '^\.TH PAM_COUNTERSIGN 8' || fail "no pam_countersign(8) man page"
for file in mods-available/countersign sites-available/countersign; do
  [ -f "$root/usr/share/countersign/freeradius/$file" ] || fail "no FreeRADIUS $file"
done
for page in pam.md freeradius.md; do [ -f "$root/usr/share/doc/countersign/$page" ] || fail "no $page in the docs"; done
echo "test-deb: pam_countersign.so at $module, its man page, the FreeRADIUS files and their docs"

[ "$(dpkg-deb -I "$deb" conffiles)" = "/etc/countersign/countersign.json" ] || fail "the config file is not a conffile"
unit="$root/usr/lib/systemd/system/countersign.service"
grep -q '^ExecStart=/usr/bin/countersign serve --config /etc/countersign/countersign.json$' "$unit" || fail "the unit does not start /usr/bin/countersign"
grep -q '^User=countersign$' "$unit" || fail "the unit does not run as the countersign user"
grep -q '^u countersign ' "$root/usr/lib/sysusers.d/countersign.conf" || fail "no sysusers.d entry for the countersign user"
sed "s#/usr/bin/countersign#$binary#" "$unit" >"$root/countersign.service"
MANPATH="$root/usr/share/man" systemd-analyze verify "$root/countersign.service" || fail "systemd-analyze verify: the packaged unit (and its man page)"
# The admin commands find the database through the packaged config file (none is there on this machine).
listing=$("$binary" user list --config "$root/etc/countersign/countersign.json" 2>&1 || true)
case "$listing" in *"no database at /var/lib/countersign/countersign.sqlite"*) ;;
  *) fail "the packaged config file does not lead to /var/lib/countersign/countersign.sqlite: $listing" ;;
esac
manual=$(zcat "$root/usr/share/man/man1/countersign.1.gz")
grep -q '^\.Dt COUNTERSIGN 1' <<<"$manual" || fail "no countersign(1) man page"
for command in serve user device integration backup migrate; do
  grep -q "^\.It Em $command\$" <<<"$manual" || fail "the man page does not describe $command"
done
bash -n "$root/usr/share/bash-completion/completions/countersign" || fail "the bash completion does not parse"
grep -q "serve" "$root/usr/share/zsh/vendor-completions/_countersign" || fail "no zsh completion"
grep -q "serve" "$root/usr/share/fish/vendor_completions.d/countersign.fish" || fail "no fish completion"
echo "test-deb: unit, conffile, man page and completions in place"
echo "test-deb: ok"
