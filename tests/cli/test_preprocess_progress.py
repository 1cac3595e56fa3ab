#!/usr/bin/env python3
"""preprocess's progress on a large file, through the binary (issue 16), on a generated 12.5 MB text:
  * stderr not a terminal: "stretch | progress | preprocess train: counting words: D/T MB (P%),
    R MB/s, ETA mm:ss" lines, then the same for "binarizing"; at most one per tenth, D increasing,
    the last at 100%; the dictionary and the binarized split are the same as without a display
    (the file under 10 MB, the threshold, prints none: the committed fixture);
  * on a terminal (a pseudo-terminal): a bar redrawn in place ("\\r", "MB/s]", an ETA after "<")
    and no progress lines.
Usage: test_preprocess_progress.py STRETCH_BINARY
"""
import os
import pty
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SMALL = os.path.join(HERE, "..", "fixtures", "fairseq", "train.txt")
failures = []
LINE = re.compile(r"^stretch \| progress \| preprocess train: (counting words|binarizing): (\d+)/(\d+) MB \((\d+)%\), "
                  r"[0-9.]+ MB/s, ETA \d\d:\d\d$")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def on_pty(args):
    """Runs args with stdin/stdout/stderr on a pseudo-terminal; returns (exit code, everything printed)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(args[0], args)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def main():
    b = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        big = os.path.join(tmp, "big.txt")
        r = random.Random(1)
        words = [f"w{i}" for i in range(5000)]
        with open(big, "w") as f:
            n = 0
            while n < 12_500_000:
                line = " ".join(r.choice(words) for _ in range(20)) + "\n"
                f.write(line)
                n += len(line)
        p = subprocess.run([b, "preprocess", "--only-source", "--trainpref", big, "--destdir", os.path.join(tmp, "a"),
                            "--workers", "2"], capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"preprocess of 12.5 MB runs ({p.stderr.strip()[-300:]!r})")
        lines = [x for x in p.stderr.splitlines() if x.startswith("stretch | progress")]
        parsed = [LINE.match(x) for x in lines]
        check(lines and all(parsed), f"every progress line has the form D/T MB (P%), R MB/s, ETA: {lines}")
        for phase in ("counting words", "binarizing"):
            ms = [m for m in parsed if m and m.group(1) == phase]
            done = [int(m.group(2)) for m in ms]
            check(2 <= len(ms) <= 11 and done == sorted(done) and ms[-1].group(4) == "100"
                  and all(m.group(3) == "13" for m in ms),
                  f"{phase}: 2..11 lines, increasing, the last at 100% of 13 MB ({done})")
        order = [m.group(1) for m in parsed if m]
        check(order and order.index("binarizing") > max(i for i, x in enumerate(order) if x == "counting words"),
              "counting first, then binarizing")
        check("\r" not in p.stderr, "no carriage returns when stderr is not a terminal")

        # The display changes nothing in the output; the committed fixture (under 10 MB) shows none.
        q = subprocess.run([b, "preprocess", "--only-source", "--trainpref", big, "--destdir", os.path.join(tmp, "b"),
                            "--workers", "1"], capture_output=True, text=True, timeout=300)
        same = all(open(os.path.join(tmp, "a", f), "rb").read() == open(os.path.join(tmp, "b", f), "rb").read()
                   for f in ("dict.txt", "train.bin", "train.idx"))
        check(q.returncode == 0 and same, "the output is the same for --workers 1 and 2 (the display changes nothing)")
        s = subprocess.run([b, "preprocess", "--only-source", "--trainpref", SMALL, "--destdir", os.path.join(tmp, "c")],
                           capture_output=True, text=True, timeout=300)
        check(s.returncode == 0 and "stretch | progress" not in s.stderr, "a file under 10 MB shows no progress")

        rc, out = on_pty([b, "preprocess", "--only-source", "--trainpref", big, "--destdir", os.path.join(tmp, "d"),
                          "--workers", "2"])
        check(rc == 0 and "\r" in out and re.search(r"preprocess train: binarizing: +\d+%\|.*MB/s\]", out)
              and re.search(r"<\d\d:\d\d, [0-9.]+ MB/s\]", out) and "stretch | progress" not in out,
              f"on a terminal: a bar with MB/s and an ETA, no lines ({out[-400:]!r})")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all preprocess progress checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
