#!/usr/bin/env python3
"""Check `stretch preprocess` against fairseq-preprocess --only-source, independently.

This script re-implements, in a few lines of Python, what fairseq's dictionary.py
(add_symbol / finalize / pad_to_multiple_), tokenizer.py (tokenize_line), binarizer.py
(one item per line: ids then </s>) and the prep_enwik8.py byte preparation do, runs
`stretch preprocess` on the same inputs, reads stretch's .idx/.bin with numpy exactly as
fairseq's MMapIndexedDataset does (magic, version, dtype code, count, int32 sizes, int64
pointers, then np.frombuffer on the .bin), and compares dict.txt and every id.

Inputs: a crafted corpus (ties, literal <unk>/</s>/<pad>, Unicode whitespace, \\r and \\r\\n
line ends, empty and whitespace-only lines, no final newline, a word named madeupword0000),
and when present in --data-dir: PTB, WikiText-103 valid/test and the enwik6 prefix
(byte level). Exit status 0 = identical, 1 = a difference (printed), 77 = numpy missing (1 under CI=true).

Usage: check_fairseq_format.py --stretch build/bin/stretch [--data-dir ../shared/data]
"""
import argparse
import collections
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: a missing oracle fails under CI=true, else exits 77)

oracle_skip.require("numpy")
import numpy as np  # noqa: E402

# ---- fairseq semantics, re-implemented -------------------------------------------------

SPACE_NORMALIZER = re.compile(r"\s+")


def tokenize_line(line):
    return SPACE_NORMALIZER.sub(" ", line).strip().split()


class Dictionary:
    def __init__(self):
        self.symbols, self.count, self.indices = [], [], {}
        for s in ("<s>", "<pad>", "</s>", "<unk>"):
            self.add_symbol(s)
        self.nspecial = 4

    def add_symbol(self, word, n=1):
        if word in self.indices:
            self.count[self.indices[word]] += n
            return self.indices[word]
        self.indices[word] = len(self.symbols)
        self.symbols.append(word)
        self.count.append(n)
        return self.indices[word]

    def index(self, word):
        return self.indices.get(word, 3)

    def finalize(self, threshold=0, nwords=-1, padding_factor=8):
        if nwords <= 0:
            nwords = len(self.symbols)
        symbols = self.symbols[: self.nspecial]
        count = self.count[: self.nspecial]
        c = collections.Counter(dict(sorted(zip(self.symbols[self.nspecial:], self.count[self.nspecial:]))))
        for symbol, n in c.most_common(nwords - self.nspecial):
            if n >= threshold:
                symbols.append(symbol)
                count.append(n)
            else:
                break
        self.symbols, self.count = symbols, count
        self.indices = {s: i for i, s in enumerate(symbols)}
        i = 0
        while padding_factor > 1 and len(self.symbols) % padding_factor != 0:
            self.add_symbol("madeupword{:04d}".format(i), n=0)
            i += 1

    def text(self):
        return "".join("{} {}\n".format(s, c) for s, c in zip(self.symbols[4:], self.count[4:]))


def build_dictionary(path, **finalize):
    counter = collections.Counter()
    with open(path, "r", encoding="utf-8") as f:
        for line in f:
            counter.update(tokenize_line(line))
            counter.update(["</s>"])
    d = Dictionary()
    for w, n in sorted(counter.items()):
        d.add_symbol(w, n)
    d.finalize(**finalize)
    return d


def binarize(path, d):
    items = []
    with open(path, "r", encoding="utf-8") as f:
        for line in f:
            items.append([d.index(w) for w in tokenize_line(line)] + [2])
    return items


def prepare_bytes(raw_path, out_path):
    """The standard enwik8 preparation (prep_enwik8.py): each byte as its decimal value,
    separated by spaces, newline bytes kept as line breaks."""
    data = open(raw_path, "rb").read()
    text = " ".join(str(c) if c != ord("\n") else "\n" for c in data)
    with open(out_path, "w") as f:
        f.write(text)


# ---- fairseq's MMapIndexedDataset layout, read with numpy -------------------------------

CODE_TO_DTYPE = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
                 7: np.double, 8: np.uint16, 9: np.uint32, 10: np.uint64}


def read_mmidx(prefix):
    with open(prefix + ".idx", "rb") as stream:
        assert stream.read(9) == b"MMIDIDX\x00\x00", "bad magic"
        (version,) = struct.unpack("<Q", stream.read(8))
        assert version == 1, "bad version"
        (code,) = struct.unpack("<B", stream.read(1))
        (n,) = struct.unpack("<Q", stream.read(8))
        offset = stream.tell()
    dtype = CODE_TO_DTYPE[code]
    idx = np.memmap(prefix + ".idx", mode="r", order="C")
    sizes = np.frombuffer(idx, dtype=np.int32, count=n, offset=offset)
    pointers = np.frombuffer(idx, dtype=np.int64, count=n, offset=offset + sizes.nbytes)
    assert len(idx) == offset + sizes.nbytes + pointers.nbytes, "idx length"
    binf = np.memmap(prefix + ".bin", mode="r", order="C") if n and sizes.sum() else np.zeros(0, np.uint8)
    items = [np.frombuffer(binf, dtype=dtype, count=int(sizes[i]), offset=int(pointers[i])).tolist()
             for i in range(n)]
    return dtype, items


# ---- comparison -------------------------------------------------------------------------

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def compare(stretch, dest, train, splits, extra_args=(), byte_level=False, finalize=None, label=""):
    finalize = finalize or {}
    args = [stretch, "preprocess", "--only-source", "--trainpref", train, "--destdir", dest] + list(extra_args)
    for name, path in splits:
        if name.startswith("valid"):
            args += ["--validpref", path]
        elif name.startswith("test"):
            args += ["--testpref", path]
    r = subprocess.run(args, capture_output=True, text=True)
    check(r.returncode == 0, "%s: stretch preprocess failed: %s" % (label, r.stderr.strip()))
    if r.returncode != 0:
        return
    with tempfile.TemporaryDirectory() as tmp:
        def text_of(path):
            if not byte_level:
                return path
            out = os.path.join(tmp, os.path.basename(path) + ".prepared")
            prepare_bytes(path, out)
            return out
        d = build_dictionary(text_of(train), **finalize)
        got_dict = open(os.path.join(dest, "dict.txt"), encoding="utf-8", errors="surrogateescape").read()
        check(got_dict == d.text(), "%s: dict.txt differs from fairseq's (%d vs %d lines)"
              % (label, got_dict.count("\n"), d.text().count("\n")))
        want_dtype = np.uint16 if len(d.symbols) < 65500 else np.uint32
        for name, path in [("train", train)] + list(splits):
            dtype, items = read_mmidx(os.path.join(dest, name))
            check(dtype == want_dtype, "%s: %s dtype %s, fairseq writes %s" % (label, name, dtype, want_dtype))
            want = binarize(text_of(path), d)
            check(len(items) == len(want), "%s: %s has %d items, fairseq %d" % (label, name, len(items), len(want)))
            for i, (a, b) in enumerate(zip(items, want)):
                if a != b:
                    check(False, "%s: %s item %d: %s vs fairseq %s" % (label, name, i, a[:12], b[:12]))
                    break
            print("ok: %s %s: %d items, %d tokens" % (label, name, len(want), sum(map(len, want))))


CRAFTED_TRAIN = (
    "b a c\n"
    "c b a <unk> </s>\n"
    "\n"
    "   \t \n"
    "Zeta zeta \u00e9t\u00e9 \u4e2d\u6587 \u00e9t\u00e9\r\n"
    "x\u00a0y\u2003z\u3000w\x1cv\x85u\r"
    "<pad> <s> madeupword0000 tie2 tie1 tie3 tie1 tie2 tie3\n"
    "tab\tsep\x0bvt\x0cff last-line-no-newline"
)
CRAFTED_VALID = "a b oov1 <unk>\r\n\nzeta oov2 \u00e9t\u00e9\n  y  \n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stretch", required=True)
    ap.add_argument("--data-dir", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        train = os.path.join(tmp, "train.txt")
        valid = os.path.join(tmp, "valid.txt")
        with open(train, "w", encoding="utf-8", newline="") as f:
            f.write(CRAFTED_TRAIN)
        with open(valid, "w", encoding="utf-8", newline="") as f:
            f.write(CRAFTED_VALID)
        compare(args.stretch, os.path.join(tmp, "c1"), train, [("valid", valid)], label="crafted")
        compare(args.stretch, os.path.join(tmp, "c3"), train, [("valid", valid)], ["--workers", "3"], label="crafted w3")
        compare(args.stretch, os.path.join(tmp, "c4"), train, [("valid", valid)],
                ["--nwordssrc", "9", "--padding-factor", "4"], finalize={"nwords": 9, "padding_factor": 4},
                label="crafted nwords")
        compare(args.stretch, os.path.join(tmp, "c5"), train, [("valid", valid)],
                ["--thresholdsrc", "2", "--padding-factor", "1"], finalize={"threshold": 2, "padding_factor": 1},
                label="crafted threshold")
        raw = os.path.join(tmp, "raw.bin")
        with open(raw, "wb") as f:
            f.write(bytes(range(256)) + b"\n\nab\r\n\x00\xff\xfe" + bytes(range(200, 256)) + b"\n" + b"zz")
        compare(args.stretch, os.path.join(tmp, "b1"), raw, [("valid", raw)], ["--byte-level"], byte_level=True,
                label="crafted bytes")

        d = args.data_dir
        ptb = [os.path.join(d, "ptb", "ptb.%s.txt" % s) for s in ("train", "valid", "test")]
        if d and all(os.path.exists(p) for p in ptb):
            compare(args.stretch, os.path.join(tmp, "ptb"), ptb[0], [("valid", ptb[1]), ("test", ptb[2])],
                    ["--workers", "2"], label="ptb")
        else:
            print("note: PTB not found under --data-dir; skipped")
        wt = [os.path.join(d, "wikitext-103", "wiki.%s.tokens" % s) for s in ("valid", "test")]
        if d and all(os.path.exists(p) for p in wt):
            compare(args.stretch, os.path.join(tmp, "wt"), wt[0], [("test", wt[1])], ["--workers", "2"], label="wt103")
        else:
            print("note: WikiText-103 valid/test not found under --data-dir; skipped")
        e6 = os.path.join(d, "enwik8", "enwik6")
        if d and os.path.exists(e6):
            compare(args.stretch, os.path.join(tmp, "e6"), e6, [], ["--byte-level", "--workers", "2"], byte_level=True,
                    label="enwik6 bytes")
        else:
            print("note: enwik6 not found under --data-dir; skipped")
    if failures:
        print("%d difference(s) from fairseq" % len(failures))
        return 1
    print("all outputs match fairseq's semantics and MMIDIDX layout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
