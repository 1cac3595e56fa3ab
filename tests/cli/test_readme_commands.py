#!/usr/bin/env python3
"""The README's commands, and those of docs/*.md, paste cleanly and still match the program (issue 16):
  * no code block has a comment after a line continuation (bash would end the command there) or
    a continuation into a blank line;
  * every `stretch ...` command of a code block (continuations joined, shell variables set as the
    block sets them) runs through bash with this build's binary as `stretch`, in an empty folder
    without the data: it must fail only for the missing data or checkpoint, never with a usage
    error about its flags (unknown flag, stray or blank argument, a value refused, a missing
    --max-tokens). A synopsis line (`[--flag ...]`, `[DATA]`, `sweep / generate`) is
    not a command and is left out.
Usage: test_readme_commands.py STRETCH_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from testlib import USAGE_ERRORS as USAGE  # noqa: E402

README = os.path.join(HERE, "..", "..", "README.md")
DOCS = os.path.join(HERE, "..", "..", "docs")


def blocks(text):
    out, cur, inside = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            if inside:
                out.append(cur)
            cur, inside = [], not inside
            continue
        if inside:
            cur.append(line)
    return out


def main():
    b = os.path.abspath(sys.argv[1])
    failures = []
    commands = []
    readme_commands = 0
    docs = sorted(os.path.join(DOCS, f) for f in os.listdir(DOCS) if f.endswith(".md"))
    for path in [README] + docs:
        name = os.path.relpath(path, os.path.join(HERE, "..", ".."))
        for blk in blocks(open(path).read()):
            for i, line in enumerate(blk):
                if line.rstrip().endswith("\\"):
                    if re.search(r"\s#", line):
                        failures.append(f"{name}: a comment before a line continuation: {line!r}")
                    if i + 1 >= len(blk) or not blk[i + 1].strip():
                        failures.append(f"{name}: a continuation into nothing: {line!r}")
            joined = "\n".join(blk).replace("\\\n", " ")
            for cmd in joined.splitlines():
                # (the overview table "stretch train        decoder-only LMs ..." is not a command)
                c = re.sub(r"^build/bin/stretch ", "stretch ", cmd.strip())
                if re.match(r"^(\w+=\S+;\s*)?stretch (preprocess|train|eval-lm|sweep|generate|import-fairseq|"
                            r"export-fairseq) \S", c) and "..." not in c and "…" not in c \
                        and not re.search(r"\[--|\[[A-Z]| / ", c):
                    commands.append(c)
                    if path == README:
                        readme_commands += 1
    if readme_commands < 3:
        failures.append(f"expected the quick start's preprocess, train and eval-lm commands, found {commands}")
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(b, os.path.join(tmp, "stretch"))
        env = dict(os.environ, PATH=tmp + os.pathsep + os.environ["PATH"], TEXT=os.path.join(tmp, "no-such-text"))
        for cmd in commands:
            p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=tmp, env=env, timeout=120)
            bad = [u for u in USAGE if u in p.stderr]
            ok = p.returncode != 0 and not bad and ("no-such-text" in p.stderr or "data-bin" in p.stderr
                                                     or "wt103" in p.stderr
                                                     or ": checkpoint not found" in p.stderr
                                                     or ": no such file or directory" in p.stderr
                                                     or re.search(r": no such file \(from --\w+pref\)", p.stderr))
            print(("ok   " if ok else "FAIL ") + cmd[:90] + f"... -> exit {p.returncode}: {p.stderr.strip()[-160:]!r}")
            if not ok:
                failures.append(f"{cmd[:60]}...: exit {p.returncode}, {bad or 'not the missing data'}: {p.stderr[-400:]}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
