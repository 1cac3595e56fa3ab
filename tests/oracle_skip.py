"""tests/oracle_skip.py — what a check does when its independent oracle is missing.

Every check that compares stretch with an outside implementation (PyTorch, Python's safetensors,
numpy, fairseq, mpirun) calls this module instead of exiting 77 itself, so that a missing oracle
can never pass CI unnoticed:

  CI is "true" or "1" (any case; .ci/run exports CI=true)
      prints  FAIL: <oracle> is missing under CI=true: <what to install>   and exits 1
  otherwise (a developer's machine)
      prints a banner  SKIPPED (no independent check ran): <oracle> missing — install with ...
      and exits 77, which CTest (SKIP_RETURN_CODE 77) reports as skipped, not passed

Usage in a check script (tests/<layer>/check_*.py):

    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import oracle_skip
    oracle_skip.require("torch")                      # or require("torch", "safetensors", ...)
    import torch

STRETCH_ORACLE_HIDE=torch,safetensors (comma-separated module or program names) makes require()
treat those as missing although they are installed: how tests/test_oracle_skip.py proves both
paths on a machine that has every oracle. tests/oracle_skip.sh is the shell equivalent.
"""
import importlib
import os
import subprocess
import sys
import tempfile

SKIP = 77  # CTest's SKIP_RETURN_CODE for every oracle-backed check

SETUP = "bash scripts/setup.sh (as root: Debian python3-torch python3-numpy, venv build/pyenv with PyPI safetensors)"

# What to install for each oracle, by the module or program name a check requires.
INSTALL = {
    "torch": "apt-get install python3-torch, i.e. " + SETUP + "; run the check with build/pyenv/bin/python "
             "or /usr/bin/python3",
    "numpy": "apt-get install python3-numpy, i.e. " + SETUP + "; run the check with /usr/bin/python3",
    "safetensors": SETUP + " (pip install safetensors into build/pyenv); run the check with build/pyenv/bin/python",
    "fairseq": "pip install fairseq==0.12.2, or --fairseq-src DIR with an unpacked fairseq 0.12.2 source tree",
    "mpirun": "apt-get install openmpi-bin, i.e. " + SETUP,
    "tensorboard": SETUP + " (pip install tensorboard into build/pyenv); run the check with build/pyenv/bin/python",
    "pytest": "apt-get install python3-pytest, i.e. " + SETUP,
    "stretch": "the Python module: apt-get install pybind11-dev python3-dev (bash scripts/setup.sh), configure with "
               "-DSTRETCH_PYTHON_MODULE=ON and build the _stretch target (PYTHONPATH=build/python)",
}


def under_ci(environ=None):
    """True when the CI variable says this is a CI run ("true" or "1", any case)."""
    value = (os.environ if environ is None else environ).get("CI", "")
    return value.strip().lower() in ("true", "1")


def hidden(environ=None):
    """Names listed in STRETCH_ORACLE_HIDE (treated as missing even when present)."""
    value = (os.environ if environ is None else environ).get("STRETCH_ORACLE_HIDE", "")
    return {n.strip() for n in value.split(",") if n.strip()}


def missing(oracle, install=None, detail="", check=None):
    """Reports a missing oracle and exits: 1 under CI, 77 (skip) otherwise. Never returns."""
    install = install or INSTALL.get(oracle, SETUP)
    check = check or os.path.basename(sys.argv[0] or "check")
    sys.stdout.flush()
    if under_ci():
        print(f"FAIL: {oracle} is missing under CI=true: {install}" + (f" [{check}: {detail}]" if detail else
                                                                      f" [{check}]"), file=sys.stderr, flush=True)
        sys.exit(1)
    bar = "!" * 100
    lines = [bar,
             f"SKIPPED (no independent check ran): {oracle} missing — install with {install}",
             f"  check: {check}" + (f" ({detail})" if detail else ""),
             "  stretch's numerics were NOT compared with the oracle; under CI=true this is a failure.",
             bar]
    print("\n".join(lines), file=sys.stderr, flush=True)
    sys.exit(SKIP)


def require(*modules, oracle=None, install=None):
    """Imports each module; on the first that cannot be imported (or is hidden), missing()."""
    hide = hidden()
    for name in modules:
        top = name.split(".")[0]
        if name in hide or top in hide:
            missing(oracle or top, install, f"{name} hidden by STRETCH_ORACLE_HIDE")
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing(oracle or top, install, f"{sys.executable}: {e}")


def fairseq_venv_main(doc, script, inner, imports, detail):
    """main() of a check run as `CHECK DRIVER VENV` whose work, inner(driver, venv), needs the
    fairseq venv's python: checks that `imports` (an import statement's list) import there, else
    missing("fairseq") (a failure under CI=true), then runs `VENV/bin/python CHECK DRIVER VENV --inner`,
    which lands in inner()."""
    if len(sys.argv) >= 4 and sys.argv[3] == "--inner":
        return inner(sys.argv[1], sys.argv[2])
    if len(sys.argv) != 3:
        print(doc)
        return 2
    driver, venv = sys.argv[1], sys.argv[2]
    py = os.path.join(venv, "bin", "python")
    ok = os.path.exists(py) and "fairseq" not in hidden() and subprocess.run(
        [py, "-c", "import " + imports], capture_output=True).returncode == 0
    if not ok:
        missing("fairseq", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")", detail=detail)
    return subprocess.run([py, os.path.abspath(script), driver, venv, "--inner"]).returncode


def fairseq_or_binary(doc, with_oracle, binary, detail):
    """The work of a check run as `CHECK STRETCH FAIRSEQ_VENV` (with_oracle(stretch, venv, tmp) against real
    fairseq-train; a venv without it is missing("fairseq")) or as `CHECK STRETCH --binary` (binary(stretch,
    tmp): the binary alone, no oracle), in a temporary directory. Returns 2 after printing doc on a wrong
    command line, else None: the caller reports its checks."""
    if len(sys.argv) != 3:
        print(doc)
        return 2
    stretch = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        if sys.argv[2] == "--binary":
            binary(stretch, tmp)
            return None
        venv = sys.argv[2]
        if not os.path.exists(os.path.join(venv, "bin", "fairseq-train")) or "fairseq" in hidden():
            missing("fairseq", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")", detail=detail)
        with_oracle(stretch, venv, tmp)
    return None


def main(argv):
    """Command-line form, for the self-test and shell callers:
    python3 tests/oracle_skip.py MODULE [MODULE...]  -> exit 0 when all import, else as missing()."""
    if not argv:
        print(main.__doc__, file=sys.stderr)
        return 2
    require(*argv)
    print("oracle present: " + ", ".join(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
