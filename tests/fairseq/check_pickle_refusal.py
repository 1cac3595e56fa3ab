#!/usr/bin/env python3
"""A .pt whose pickle calls os.system (made here with Python's own pickle, wrapped as torch.save
would: a zip with <prefix>/data.pkl, and as a bare legacy-style pickle) is refused by
`stretch import-fairseq` and `stretch eval-lm --path` with an error naming the global, and the
command inside never runs (its marker file is not created, nothing is written to --out).
Needs only Python's standard library. Usage: check_pickle_refusal.py STRETCH_BINARY
"""
import os
import pickle
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "fixtures", "fairseq", "data-bin")


def main():
    stretch = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        marker = os.path.join(tmp, "pwned")

        class Evil:
            def __reduce__(self):
                return (os.system, ("touch " + marker,))

        payload = pickle.dumps({"model": Evil(), "cfg": None}, protocol=2)
        assert b"system" in payload
        zpath = os.path.join(tmp, "evil.pt")
        with zipfile.ZipFile(zpath, "w", zipfile.ZIP_STORED) as z:
            z.writestr("evil/data.pkl", payload)
            z.writestr("evil/version", "3\n")
        lpath = os.path.join(tmp, "evil_legacy.pt")
        with open(lpath, "wb") as f:
            f.write(payload)
        for path in (zpath, lpath):
            out = os.path.join(tmp, "out.stretch")
            for cmd in ([stretch, "import-fairseq", path, "--out", out],
                        [stretch, "eval-lm", DATA, "--path", path, "--gen-subset", "valid"]):
                p = subprocess.run(cmd, capture_output=True, text=True)
                what = " ".join(os.path.basename(c) for c in cmd[:3])
                if p.returncode == 0:
                    failures.append(f"{what}: exit 0 on a malicious pickle")
                if "posix.system" not in p.stderr or "allowlist" not in p.stderr:
                    if not (path == lpath and "magic number" in p.stderr):
                        failures.append(f"{what}: error does not name the refused global: {p.stderr.strip()}")
                if os.path.exists(marker):
                    failures.append(f"{what}: THE PICKLE'S COMMAND RAN")
                    os.remove(marker)
                if os.path.exists(out):
                    failures.append(f"{what}: wrote {out}")
        # The legacy container parses the magic number first: a malicious pickle placed after a
        # valid header must be refused by the allowlist as well.
        hpath = os.path.join(tmp, "evil_after_header.pt")
        with open(hpath, "wb") as f:
            f.write(pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2))
            f.write(pickle.dumps(1001, protocol=2))
            f.write(pickle.dumps({"protocol_version": 1001}, protocol=2))
            f.write(payload)
        p = subprocess.run([stretch, "import-fairseq", hpath, "--out", os.path.join(tmp, "o")],
                           capture_output=True, text=True)
        if p.returncode == 0 or "posix.system" not in p.stderr or os.path.exists(marker):
            failures.append(f"legacy header + os.system: rc {p.returncode}, {p.stderr.strip()}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("OK: pickles calling os.system are refused, nothing ran, nothing was written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
