#!/usr/bin/env python3
"""Self-test of tests/oracle_skip.py and tests/oracle_skip.sh (CTest `oracle_skip_helper`).

Needs no oracle: a missing one is faked with STRETCH_ORACLE_HIDE (and a module name that does not
exist). For each form (the Python helper, the shell helper, and real checks that use them):
  CI=true / CI=1 / CI=TRUE     -> exit 1 and "FAIL: <oracle> is missing under CI=true: ..."
  CI unset / CI=false / CI=""  -> exit 77 and the "SKIPPED (no independent check ran)" banner
  oracle present               -> exit 0
Exit 0 when every case holds, 1 otherwise (the failing cases are listed).
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HELPER = os.path.join(HERE, "oracle_skip.py")
SHELL_HELPER = os.path.join(HERE, "oracle_skip.sh")
PY = sys.executable

CI_ON = ["true", "1", "TRUE", " true "]
CI_OFF = [None, "false", "", "0"]

failures = []
count = 0


def run(cmd, ci, hide=None):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "STRETCH_ORACLE_HIDE")}
    if ci is not None:
        env["CI"] = ci
    if hide:
        env["STRETCH_ORACLE_HIDE"] = hide
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return p.returncode, p.stdout


def expect(name, cmd, ci, hide, code, text):
    global count
    count += 1
    rc, out = run(cmd, ci, hide)
    ok = rc == code and (text is None or text in out)
    print(("ok   " if ok else "FAIL ") + f"{name} (CI={ci!r}): exit {rc}, want {code}" +
          (f" with {text!r}" if text else ""))
    if not ok:
        failures.append(name)
        print("     output: " + out.strip().replace("\n", "\n             "))


def missing_cases(name, cmd, oracle, hide=None):
    for ci in CI_ON:
        expect(name, cmd, ci, hide, 1, f"FAIL: {oracle} is missing under CI=true: ")
    for ci in CI_OFF:
        expect(name, cmd, ci, hide, 77, f"SKIPPED (no independent check ran): {oracle} missing — install with ")


def main():
    # The Python helper: a module that does not exist, one that exists but is hidden, one present.
    missing_cases("python helper, absent module", [PY, HELPER, "stretch_no_such_oracle_module"],
                  "stretch_no_such_oracle_module")
    missing_cases("python helper, hidden module", [PY, HELPER, "json"], "json", hide="json")
    missing_cases("python helper, torch hidden", [PY, HELPER, "json", "torch"], "torch", hide="torch")
    for ci in ("true", None):
        expect("python helper, module present", [PY, HELPER, "json"], ci, None, 0, "oracle present")

    # The shell helper: a program that does not exist, one hidden, one present.
    for prog, hide in (("stretch-no-such-oracle-program", None), ("sh", "sh"), ("mpirun", "mpirun")):
        script = f'. "{SHELL_HELPER}"; oracle_require_cmd {prog} "how to install {prog}"; echo reached'
        missing_cases(f"shell helper, {prog}" + (" hidden" if hide else " absent"), ["bash", "-c", script], prog,
                      hide=hide)
    for ci in ("true", None):
        expect("shell helper, program present", ["bash", "-c", f'. "{SHELL_HELPER}"; oracle_require_cmd sh x; echo reached'],
               ci, None, 0, "reached")

    # Real checks, oracle hidden: they stop before reading their arguments.
    with tempfile.TemporaryDirectory() as tmp:
        missing_cases("check_transformer_lm.py, torch hidden",
                      [PY, os.path.join(HERE, "parity", "check_transformer_lm.py"), "--checkpoint", "x", "--dump", "y"],
                      "torch", hide="torch")
        missing_cases("check_checkpoint_python.py, torch and safetensors hidden",
                      [PY, os.path.join(HERE, "train", "check_checkpoint_python.py"), "--stretch", "x"],
                      "torch", hide="torch,safetensors")
        missing_cases("check_safetensors_python.py, safetensors hidden",
                      [PY, os.path.join(HERE, "tensor", "check_safetensors_python.py"), os.path.join(tmp, "driver")],
                      "safetensors", hide="safetensors")
        missing_cases("mpi_equals_update_freq.sh, mpirun hidden",
                      ["bash", os.path.join(HERE, "dist", "mpi_equals_update_freq.sh"), os.path.join(tmp, "stretch"), tmp],
                      "mpirun", hide="mpirun")

    print(f"{count - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
