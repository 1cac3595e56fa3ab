#!/usr/bin/env python3
"""Interop of stretch's safetensors files with Python's `safetensors` package, both ways.

Usage: check_safetensors_python.py SAFETENSORS_DRIVER [VENV_PYTHON]
  1. stretch writes a fixture; `safetensors.safe_open(path, "pt")` must read the same names,
     dtypes, shapes, values (the formulas in driver/safetensors_driver.cpp) and metadata.
  2. `safetensors.torch.save_file` writes tensors of every supported dtype plus metadata;
     stretch's reader must return them exactly.
Exit 0 on success, 1 on a mismatch, 77 (CTest SKIP_RETURN_CODE; 1 under CI=true) when safetensors/torch are
missing. When this interpreter lacks safetensors, the script re-runs itself with
VENV_PYTHON (or $STRETCH_PYENV/bin/python), the venv scripts/setup.sh creates.
Values are compared exactly: every value here is representable in its dtype.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: a missing oracle fails under CI=true, else exits 77)

try:
    if oracle_skip.hidden() & {"torch", "safetensors"}:
        raise ImportError("hidden by STRETCH_ORACLE_HIDE=" + os.environ["STRETCH_ORACLE_HIDE"])
    import torch
    import safetensors
    from safetensors import safe_open
    from safetensors.torch import save_file
except ImportError as e:
    candidates = [a for a in sys.argv[2:3]]
    if os.environ.get("STRETCH_PYENV"):
        candidates.append(os.path.join(os.environ["STRETCH_PYENV"], "bin", "python"))
    if not os.environ.get("STRETCH_SAFETENSORS_REEXEC"):
        for py in candidates:
            if os.path.exists(py) and os.path.abspath(py) != os.path.abspath(sys.executable):
                os.environ["STRETCH_SAFETENSORS_REEXEC"] = "1"
                os.execv(py, [py] + sys.argv)
    oracle_skip.missing("safetensors" if "safetensors" in str(e) else "torch",
                        detail=f"{sys.executable} (and the venv {candidates or 'none given'}): {e}")

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def stretch_reads_python_file(driver, workdir):
    path = os.path.join(workdir, "from_python.safetensors")
    tensors = {
        "decoder.embed_tokens.weight": torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.25 - 1,
        "ids": torch.tensor([-7, 0, 2**31 - 1], dtype=torch.int32),
        "bf": torch.tensor([0.5, -1.75, 3.0], dtype=torch.bfloat16),
        "counter": torch.tensor([2**40 + 3, -1], dtype=torch.int64),
        "bytes": torch.tensor([0, 128, 255], dtype=torch.uint8),
        "scalar": torch.tensor(2.5, dtype=torch.float32),
        "empty": torch.zeros((0, 2), dtype=torch.float32),
    }
    meta = {"config": json.dumps({"lr": 1.0, "arch": "transformer_lm"}), "update": "7"}
    save_file(tensors, path, metadata=meta)
    res = subprocess.run([driver, "read", path], capture_output=True, text=True)
    check(res.returncode == 0, f"stretch reads a file written by safetensors {safetensors.__version__} "
                               f"{res.stderr.strip()}")
    if res.returncode != 0:
        return
    got = json.loads(res.stdout)
    check(got["metadata"] == meta, "metadata read back by stretch")
    names = {"decoder.embed_tokens.weight": "F32", "ids": "I32", "bf": "BF16", "counter": "I64",
             "bytes": "U8", "scalar": "F32", "empty": "F32"}
    check(set(got["tensors"]) == set(names), f"tensor names {sorted(got['tensors'])}")
    for name, dtype in names.items():
        t = got["tensors"].get(name, {})
        ref = tensors[name]
        check(t.get("dtype") == dtype and t.get("shape") == list(ref.shape), f"{name}: dtype {dtype}, shape {list(ref.shape)}")
        want = ref.float().reshape(-1).tolist() if ref.is_floating_point() else ref.reshape(-1).tolist()
        check(t.get("values") == want, f"{name}: values")


def python_reads_stretch_file(driver, workdir):
    path = os.path.join(workdir, "from_stretch.safetensors")
    subprocess.run([driver, "write", path], check=True)
    expected = {
        "f32": (torch.float32, [2, 3], [0.5 * i - 1 for i in range(6)]),
        "i32": (torch.int32, [4], [1000 * i - 7 for i in range(4)]),
        "bf16": (torch.bfloat16, [3], [1.25 * i for i in range(3)]),
        "i64": (torch.int64, [2], [2**40 * (i + 1) for i in range(2)]),
        "u8": (torch.uint8, [5], [250 + i for i in range(5)]),
        "scalar": (torch.float32, [], [3.5]),
        "empty": (torch.float32, [0, 3], []),
    }
    with safe_open(path, framework="pt") as f:
        check(f.metadata() == {"format": "stretch-test", "update": "42"}, f"safe_open metadata {f.metadata()}")
        check(set(f.keys()) == set(expected), f"safe_open keys {sorted(f.keys())}")
        for name, (dtype, shape, values) in expected.items():
            if name not in f.keys():
                continue
            t = f.get_tensor(name)
            check(t.dtype == dtype and list(t.shape) == shape, f"{name}: {t.dtype} {list(t.shape)}")
            got = t.float().reshape(-1).tolist() if t.is_floating_point() else t.reshape(-1).tolist()
            check(got == values, f"{name}: values")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    driver = sys.argv[1]
    with tempfile.TemporaryDirectory() as workdir:
        python_reads_stretch_file(driver, workdir)
        stretch_reads_python_file(driver, workdir)
    print(f"{'FAILED' if failures else 'all checks passed'} ({len(failures)} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
