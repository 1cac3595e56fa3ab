#!/usr/bin/env python3
"""CTest's entry to the `import stretch` tests: pytest on tests/python with the module built in
BUILD/python and the binary for the comparisons.

usage: run_pytest.py --stretch build/bin/stretch --pythonpath build/python [--no-module] [pytest args]

Exit: pytest's (0 all passed); 1 also when pytest collected no test (its exit 5); pytest, numpy or
the module missing: 77 (skipped, loudly), 1 under CI=true (tests/oracle_skip.py). --no-module: CMake
found no pybind11, so the module was not built: reported as missing.
"""
import argparse
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stretch", required=True)
    ap.add_argument("--pythonpath", required=True)
    ap.add_argument("--no-module", action="store_true")
    args, rest = ap.parse_known_args()
    if args.no_module:
        oracle_skip.missing("stretch", detail="CMake found no pybind11 / Python headers")
    oracle_skip.require("pytest", "numpy")
    sys.path.insert(0, args.pythonpath)
    oracle_skip.require("stretch")
    os.environ["STRETCH_BIN"] = args.stretch
    os.environ["PYTHONPATH"] = args.pythonpath + os.pathsep + os.environ.get("PYTHONPATH", "")
    import pytest
    here = os.path.dirname(os.path.abspath(__file__))
    rc = pytest.main(["-q", "-p", "no:cacheprovider", here] + rest)
    return 1 if rc == 5 else int(rc)


if __name__ == "__main__":
    sys.exit(main())
