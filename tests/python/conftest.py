"""Fixtures of the `import stretch` tests: the binary (STRETCH_BIN), and one tiny model trained with
it in a temporary directory (a synthetic corpus -> `stretch preprocess` -> `stretch train`, a few
updates), so that every comparison is module vs binary on the same trained weights."""
import os
import random
import subprocess

import pytest

import stretch

L_TRAIN = 16


def corpus(lines, seed):
    rng = random.Random(seed)
    return "".join(" ".join(f"w{rng.randrange(40)}" for _ in range(rng.randrange(3, 10))) + "\n"
                   for _ in range(lines))


def run(cmd, ok=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if ok and r.returncode != 0:
        raise AssertionError(" ".join(cmd) + f" exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


@pytest.fixture(scope="session")
def binary():
    path = os.environ.get("STRETCH_BIN", "")
    assert path and os.access(path, os.X_OK), "set STRETCH_BIN to build/bin/stretch (CTest does)"
    stretch.set_threads(1)  # the binary runs with --threads 1: the same sums in the same order
    return path


@pytest.fixture(scope="session")
def trained(binary, tmp_path_factory):
    """(data-bin dir, checkpoint, valid.txt path, work dir) of an ALiBi model trained for 12 updates."""
    work = tmp_path_factory.mktemp("stretch-py")
    for split, lines, seed in (("train", 200, 1), ("valid", 30, 2)):
        (work / f"{split}.txt").write_text(corpus(lines, seed))
    data = str(work / "bin")
    run([binary, "preprocess", "--only-source", "--trainpref", str(work / "train.txt"), "--validpref",
         str(work / "valid.txt"), "--destdir", data])
    save = str(work / "ckpt")
    run([binary, "train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "2", "--decoder-embed-dim", "32",
         "--decoder-ffn-embed-dim", "64", "--decoder-attention-heads", "4", "--tokens-per-sample", str(L_TRAIN),
         "--max-tokens", "128", "--max-update", "12", "--optimizer", "adam", "--lr", "0.005", "--save-dir", save,
         "--no-epoch-checkpoints", "--disable-validation", "--threads", "1", "--seed", "3", "--log-format", "none"])
    return {"data": data, "ckpt": os.path.join(save, "checkpoint_last.pt"), "valid": str(work / "valid.txt"),
            "work": str(work)}
