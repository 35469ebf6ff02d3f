#!/usr/bin/env python3
"""Runs a command under a pseudo-terminal, as a person at a terminal would,
and types answers at its prompts.

    pty-answer.py TRANSCRIPT ANSWERS -- COMMAND [ARG ...]

Everything the command writes to its terminal is appended to TRANSCRIPT as it
comes. Each time the terminal shows a prompt (output ending in ": " that then
stays quiet for a moment), the next line of the file ANSWERS is typed,
followed by Enter, and a line is appended to TRANSCRIPT + ".typed" (what was
typed is not written anywhere); with no lines left, nothing is typed until
ANSWERS has another whole line: the file is read again at each prompt, so an
answer can be written once the prompt is shown (a time-based code is computed
then, as a person reads it off the phone then). Exits with the
command's status (128 + N when signal N ended it). For the SSH login tests:
OpenSSH's `ssh` reads keyboard-interactive answers from its terminal.
"""
import os
import pty
import select
import sys

if len(sys.argv) < 5 or sys.argv[3] != "--":
    sys.exit("usage: pty-answer.py TRANSCRIPT ANSWERS -- COMMAND [ARG ...]")
transcript_path, answers_path, command = sys.argv[1], sys.argv[2], sys.argv[4:]


def next_answer(typed):
    """The answer after the `typed` already typed: only a whole line (one ending in a line break)."""
    try:
        with open(answers_path) as f:
            lines = f.read().split("\n")[:-1]
    except FileNotFoundError:
        return None
    return lines[typed] if typed < len(lines) else None


typed_count = 0

pid, master = pty.fork()
if pid == 0:
    os.execvp(command[0], command)

transcript = open(transcript_path, "ab", buffering=0)
pending = b""  # what the terminal showed since the last answer
while True:
    ready, _, _ = select.select([master], [], [], 0.2)
    if ready:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the command closed its terminal
            break
        if not chunk:
            break
        transcript.write(chunk)
        pending += chunk
    elif pending.endswith(b": ") and (answer := next_answer(typed_count)) is not None:
        os.write(master, answer.encode() + b"\r")
        typed_count += 1
        pending = b""
        with open(transcript_path + ".typed", "a") as typed:
            typed.write("typed\n")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
