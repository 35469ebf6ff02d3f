#!/usr/bin/env bash
# What a daemon that stopped answering was doing: the end of its log, its
# state and, when lldb or gdb is at hand, every thread's stack. The CI scripts
# call it before they give up on a daemon, so that a hang leaves evidence
# instead of a run that waits out its time limit.
#
#   scripts/hang-report.sh PID [LOG]
set -uo pipefail
pid=${1:?usage: scripts/hang-report.sh PID [LOG]}
log=${2:-}

echo "hang-report: process $pid"
if [ -n "$log" ] && [ -f "$log" ]; then
  echo "hang-report: the last 40 lines of $log"
  tail -40 "$log"
fi
if ! kill -0 "$pid" 2>/dev/null; then
  echo "hang-report: the process is gone"
  exit 0
fi
grep -E '^(State|Threads|VmRSS)' "/proc/$pid/status" 2>/dev/null
echo "hang-report: open sockets: $(ls -l "/proc/$pid/fd" 2>/dev/null | grep -c socket)"
# Swift's symbols in readable form when the toolchain's demangler is at hand.
demangle() { if command -v swift-demangle >/dev/null; then swift-demangle --simplified; else cat; fi; }
# A stuck process's threads, bounded so that the report cannot hang in turn.
if command -v gdb >/dev/null; then
  timeout 120 gdb --batch -nx -iex "set complaints 0" -p "$pid" -ex "thread apply all bt" 2>&1 | grep -E "^(Thread|#)" | demangle | head -400
elif command -v lldb >/dev/null && lldb --version >/dev/null 2>&1; then
  timeout 120 lldb --batch -p "$pid" -o "thread backtrace all" 2>&1 | demangle | head -400
else
  for task in /proc/"$pid"/task/*; do echo "$(basename "$task") $(cat "$task/comm") $(cat "$task/wchan" 2>/dev/null)"; done
fi
