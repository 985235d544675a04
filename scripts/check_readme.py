#!/usr/bin/env python3
"""Runs the README's ```sh blocks as written, so that the README cannot drift from what works.

    scripts/check_readme.py [--list] [--line N] [--timeout S] [-v] [README.md]

Each ```sh block runs on its own in a fresh `bash -e -o pipefail`, in the repository root (the README's
commands are written for it), in a process group of its own that is killed when the block ends, so a server a
block starts in the background never outlives it. A block fails the check on a non-zero exit or a timeout
(default 300 s per block); the report names the block's line in the README and shows its output. After every
block, `git status --porcelain` must be what it was before: a block must not leave files in the working tree.

A block that must not run here is marked on the line just before its fence, and says why:

    <!-- readme-check: skip (needs your own copy of the model) -->

Blocks of other languages (```go, plain ```) are not run. Needs the build (scripts/build.sh) and Go
(scripts/setup.sh); scripts/test.sh runs this after its other suites. Standard library only."""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_RE = re.compile(r"^\s*<!--\s*readme-check:\s*skip\s*\((?P<why>[^)]+)\)\s*-->\s*$")


def blocks(path):
    """[(line of the opening fence, 1-based; code; skip reason or None)] for every ```sh block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if fence.startswith("```"):
            lang = fence[3:].strip()
            start = i
            i += 1
            body = []
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                sys.exit(f"{path}:{start + 1}: unterminated code block")
            if lang in ("sh", "bash", "shell"):
                prev = lines[start - 1] if start > 0 else ""
                m = SKIP_RE.match(prev)
                if "readme-check" in prev and not m:
                    sys.exit(f"{path}:{start}: malformed marker; write <!-- readme-check: skip (reason) -->")
                out.append((start + 1, "\n".join(body) + "\n", m.group("why").strip() if m else None))
        i += 1
    return out


def git_status():
    r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                       text=True)
    return r.stdout if r.returncode == 0 else None


def port_taken(port):
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def run_block(code, timeout, rel, fence_line):
    """(exit status or None on timeout, seconds, output)."""
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        # Line 1 names the README line of a failing command; the block's own lines follow, unchanged.
        f.write(f"trap 'echo \"check_readme: {rel}:$((LINENO + {fence_line - 1})) failed (exit status $?)\" >&2' ERR\n")
        f.write(code)
        script = f.name
    with tempfile.TemporaryFile() as log:
        t0 = time.monotonic()
        p = subprocess.Popen(["bash", "-e", "-o", "pipefail", script], cwd=ROOT, stdin=subprocess.DEVNULL,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        dt = time.monotonic() - t0
        # Whatever the block left running in the background (a server), stop it: TERM, then KILL.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(0.5)
        p.wait()
        log.seek(0)
        output = log.read().decode("utf-8", "replace")
    os.unlink(script)
    return rc, dt, output


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("readme", nargs="?", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--list", action="store_true", help="list the blocks and whether they run")
    ap.add_argument("--line", type=int, action="append", help="run only the block at this line (repeatable)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per block")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the output of blocks that pass too")
    a = ap.parse_args()
    rel = os.path.relpath(a.readme, ROOT)
    found = blocks(a.readme)
    if a.list:
        for line, code, why in found:
            first = code.strip().split("\n")[0]
            print(f"{rel}:{line}: {'skip (' + why + ')' if why else 'run'}: {first}")
        return 0
    passed, failed, skipped = 0, [], 0
    before = git_status()
    for line, code, why in found:
        if a.line and line not in a.line:
            continue
        if why:
            print(f"SKIP {rel}:{line} ({why})")
            skipped += 1
            continue
        print(f"RUN  {rel}:{line}", flush=True)
        # A block that serves on :8080 would talk to whatever else listens there.
        if "localhost:8080" in code and port_taken(8080):
            print(f"FAIL {rel}:{line}: the block serves on 127.0.0.1:8080, which something else listens on", flush=True)
            failed.append(line)
            continue
        rc, dt, output = run_block(code, a.timeout, rel, line)
        after = git_status()
        if rc != 0:
            what = f"timed out after {a.timeout:.0f} s" if rc is None else f"exit status {rc}"
            print(f"FAIL {rel}:{line}: {what} ({dt:.1f} s)\n--- block\n{code}--- output\n{output}---", flush=True)
            failed.append(line)
        elif before is not None and after != before:
            print(f"FAIL {rel}:{line}: the block changed the working tree (git status):\n--- before\n{before}"
                  f"--- after\n{after}--- output\n{output}---", flush=True)
            failed.append(line)
        else:
            print(f"ok   {rel}:{line} ({dt:.1f} s)", flush=True)
            if a.verbose:
                print(output, end="", flush=True)
            passed += 1
        before = after
    print(f"{passed} passed, {len(failed)} failed, {skipped} skipped"
          + (f" (failed: {', '.join(f'{rel}:{n}' for n in failed)})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
