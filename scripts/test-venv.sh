#!/bin/sh
# Prints the path of the tests' Python: .build/test-venv/bin/python, a virtual
# environment made from requirements-test.txt on first use and made again when
# that file changes. Test processes running at once wait for one another (flock).
# Where it cannot be made (no `venv` module, PyPI not reachable), says so on one
# line and exits 1: a test that needs it fails with that line, never skips.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.build/test-venv"
requirements="$root/requirements-test.txt"
log="$root/.build/test-venv.log"
mkdir -p "$root/.build"
exec 9>"$root/.build/test-venv.lock"
flock 9
want=$(sha256sum "$requirements" | cut -d ' ' -f 1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/requirements.sha256" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
if ! python3 -m venv "$venv" >"$log" 2>&1; then
  echo "test-venv: 'python3 -m venv' failed (on Debian: apt-get install python3-venv); see $log" >&2
  exit 1
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --timeout 30 --retries 2 \
  -r "$requirements" >>"$log" 2>&1; then
  last=$(grep -v '^\s*$' "$log" | tail -n 1 | cut -c 1-300)
  rm -rf "$venv"
  echo "test-venv: could not install requirements-test.txt into .build/test-venv (is PyPI reachable?): $last; see $log" >&2
  exit 1
fi
echo "$want" >"$venv/requirements.sha256"
echo "$venv/bin/python"
