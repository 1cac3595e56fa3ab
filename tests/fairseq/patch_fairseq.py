#!/usr/bin/env python3
"""Small programmatic edits that let PyPI's fairseq 0.12.2 and hydra-core 1.0.7 run on
Python 3.11 over Debian's torch 1.13 (no torch C++ headers). No third-party source is kept
in stretch's repository: tests/fairseq/setup_fairseq.sh runs this on the unpacked sources.

  patch_fairseq.py setup   FAIRSEQ_SRC_DIR     (before pip install)
  patch_fairseq.py hydra   SITE_PACKAGES_DIR   (after hydra-core is installed)

Each edit is idempotent and fails loudly when the text it expects is not there.
"""
import pathlib
import re
import sys


def edit(path, fn):
    path = pathlib.Path(path)
    text = path.read_text()
    new = fn(text)
    if new != text:
        path.write_text(new)
        print(f"patch_fairseq: edited {path}")


def default_factory(text, path):
    # `name: SomeConfig = SomeConfig()` and `field(default=SomeConfig())`: Python 3.11
    # rejects a mutable (unhashable dataclass) default; a default_factory builds the same.
    new = re.sub(r"^(\s+\w+: (\w+) = )\2\(\)[ \t]*$", r"\1field(default_factory=\2)", text,
                 flags=re.M)
    new = re.sub(r"field\(default=(\w+)\(\)\)", r"field(default_factory=\1)", new)
    if new == text and "default_factory" not in text:
        sys.exit(f"patch_fairseq: no dataclass-instance default found in {path}")
    return new


def patch_setup(src):
    src = pathlib.Path(src)

    def setup_py(text):
        if "stretch: no torch C++ headers" in text:
            return text
        old = "    from torch.utils import cpp_extension\n"
        if old not in text:
            sys.exit(f"patch_fairseq: {src}/setup.py has no torch cpp_extension import")
        # The except ImportError branch then skips libbase/libnat (BASE layers, translation).
        return text.replace(old, "    raise ImportError  # stretch: no torch C++ headers in Debian\n", 1)

    edit(src / "setup.py", setup_py)
    for rel in ("fairseq/dataclass/configs.py", "fairseq/models/transformer/transformer_config.py"):
        edit(src / rel, lambda t, p=rel: default_factory(t, p))

    def initialize_py(text):
        old = "        v = FairseqConfig.__dataclass_fields__[k].default\n"
        if old not in text:
            if "default_factory()" in text:
                return text
            sys.exit("patch_fairseq: fairseq/dataclass/initialize.py changed")
        return text.replace(old, (
            "        f = FairseqConfig.__dataclass_fields__[k]\n"
            "        import dataclasses\n"
            "        v = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default\n"))

    edit(src / "fairseq/dataclass/initialize.py", initialize_py)


def patch_hydra(site):
    edit(pathlib.Path(site) / "hydra/conf/__init__.py",
         lambda t: default_factory(t, "hydra/conf/__init__.py"))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("setup", "hydra"):
        sys.exit(__doc__)
    (patch_setup if sys.argv[1] == "setup" else patch_hydra)(sys.argv[2])
