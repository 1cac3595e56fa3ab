"""tests/testlib.py — what the Python tests that drive the binary share.

- `check(cond, what)`: one line per check ("ok   …" / "FAIL …"), failures collected in `failures`;
  `finish()` prints the verdict and returns the exit status (1 if anything failed).
- `synthetic_text(lines, seed, vocab)`: a corpus of 4..12 words a line, each word mostly one of two
  successors of the previous one, so a tiny model learns something in a few updates.
- `run(cmd, **kw)`: subprocess.run with captured text output and a 300 s bound.
- `read_pty(master)`: everything a child wrote to a pseudo-terminal until it closed.
- `USAGE_ERRORS`: the texts of stretch's (and bash's) usage errors, for tests of pasted commands.

Import it from a test with `sys.path.insert(0, <tests/>)`; a test keeps its own failure list only
when it needs several (none does today).
"""
import os
import random
import subprocess

failures = []

# What stretch prints for a usage error about a command's flags (unknown flag, stray or blank
# argument, refused value, bash's syntax error): a pasted command must never show one.
USAGE_ERRORS = ("unknown flag", "stray argument", "unexpected argument", "a blank argument", "did you mean",
                "is not allowed", "not in {", "--help for more information", "syntax error", "a space before",
                "give --max-tokens or --batch-size", "command not found")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def finish(ok="all checks passed"):
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(ok)
    return 0


def synthetic_text(lines, seed, vocab=300):
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        w, words = rng.randrange(vocab), []
        for _ in range(rng.randrange(4, 13)):
            words.append(f"w{w}")
            w = (w * 7 + 3 + rng.randrange(2)) % vocab
        out.append(" ".join(words))
    return "\n".join(out) + "\n"


def run(cmd, **kw):
    kw.setdefault("timeout", 300)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def read_pty(master):
    data = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")
