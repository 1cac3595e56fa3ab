#!/usr/bin/env python3
"""Compare `stretch preprocess` with fairseq's own code (not registered with CTest: fairseq is
not installed on the development machines).

Runs fairseq's Dictionary.add_file_to_dictionary + finalize and FileBinarizer (what
fairseq-preprocess --only-source does) and stretch preprocess on the same files, with 1 and 2
workers, and requires dict.txt, .bin and .idx to be byte-identical; then reads stretch's files
with fairseq's MMapIndexedDataset and checks every item against Dictionary.encode_line.

fairseq comes from `import fairseq`, or with --fairseq-src DIR from an unpacked source tree
(e.g. `pip download fairseq==0.12.2 --no-deps --no-binary :all:` and untar), loading only
dictionary.py, binarizer.py and indexed_dataset.py with the heavy package imports stubbed.
Needs numpy and torch (Debian: python3-numpy python3-torch).

Usage: check_with_fairseq.py --stretch build/bin/stretch [--fairseq-src DIR] [--data-dir ../shared/data]
Exit status: 0 identical, 1 a difference, 77 fairseq/torch not available (1 under CI=true).
"""
import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import types

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: a missing oracle fails under CI=true, else exits 77)


def load_fairseq(src):
    if not src:
        from fairseq.binarizer import FileBinarizer, VocabularyDatasetBinarizer
        from fairseq.data import Dictionary, indexed_dataset
        from fairseq.tokenizer import tokenize_line
        return Dictionary, FileBinarizer, VocabularyDatasetBinarizer, indexed_dataset, tokenize_line
    import torch

    def pkg(name, path=None):
        m = types.ModuleType(name)
        if path:
            m.__path__ = [path]
        sys.modules[name] = m
        return m
    root = os.path.join(src, "fairseq")
    fs = pkg("fairseq", root)
    data = pkg("fairseq.data", os.path.join(root, "data"))
    fs.data = data
    fs.utils = pkg("fairseq.utils")
    pkg("fairseq.dataclass", os.path.join(root, "dataclass"))
    pkg("fairseq.dataclass.constants").DATASET_IMPL_CHOICES = ["raw", "lazy", "cached", "mmap", "fasta", "huffman"]
    pkg("fairseq.data.fasta_dataset").FastaDataset = object
    huff = pkg("fairseq.data.huffman")
    huff.HuffmanMMapIndexedDataset = huff.HuffmanMMapIndex = object
    data.FairseqDataset = type("FairseqDataset", (torch.utils.data.Dataset,), {})
    data.data_utils = pkg("fairseq.data.data_utils")
    dictionary = importlib.import_module("fairseq.data.dictionary")
    data.Dictionary = dictionary.Dictionary
    data.indexed_dataset = importlib.import_module("fairseq.data.indexed_dataset")
    binarizer = importlib.import_module("fairseq.binarizer")
    tokenizer = importlib.import_module("fairseq.tokenizer")
    return (dictionary.Dictionary, binarizer.FileBinarizer, binarizer.VocabularyDatasetBinarizer,
            data.indexed_dataset, tokenizer.tokenize_line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stretch", required=True)
    ap.add_argument("--fairseq-src", default="")
    ap.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), "../../../shared/data"))
    args = ap.parse_args()
    try:
        Dictionary, FileBinarizer, VocabBinarizer, indexed, tokenize_line = load_fairseq(args.fairseq_src)
    except ImportError as e:
        oracle_skip.missing("fairseq", detail=f"fairseq (or torch) not importable by {sys.executable}: {e}")
    failures = 0

    def check(cond, msg):
        nonlocal failures
        print(("ok   " if cond else "FAIL ") + msg)
        failures += not cond

    def fairseq_preprocess(train, splits, dest, workers):
        d = Dictionary()
        Dictionary.add_file_to_dictionary(train, d, tokenize_line, workers)
        d.finalize(threshold=0, nwords=-1, padding_factor=8)
        os.makedirs(dest, exist_ok=True)
        d.save(os.path.join(dest, "dict.txt"))
        for name, path in [("train", train)] + splits:
            FileBinarizer.multiprocess_dataset(path, "mmap", VocabBinarizer(d, append_eos=True),
                                               os.path.join(dest, name), vocab_size=len(d), num_workers=workers)

    def read(path):
        with open(path, "rb") as f:
            return f.read()

    d = args.data_dir
    cases = [("ptb", os.path.join(d, "ptb/ptb.train.txt"),
              [("valid", os.path.join(d, "ptb/ptb.valid.txt")), ("test", os.path.join(d, "ptb/ptb.test.txt"))]),
             ("wt103", os.path.join(d, "wikitext-103/wiki.valid.tokens"),
              [("test", os.path.join(d, "wikitext-103/wiki.test.tokens"))])]
    with tempfile.TemporaryDirectory() as tmp:
        for name, train, splits in cases:
            if not all(os.path.exists(p) for p in [train] + [s[1] for s in splits]):
                print("note: %s not found under %s; skipped" % (name, d))
                continue
            fdest, sdest = os.path.join(tmp, "f-" + name), os.path.join(tmp, "s-" + name)
            for workers in (1, 2):
                fairseq_preprocess(train, splits, fdest, workers)
                cmd = [args.stretch, "preprocess", "--only-source", "--trainpref", train, "--destdir", sdest,
                       "--workers", str(workers)]
                for n, p in splits:
                    cmd += ["--validpref" if n == "valid" else "--testpref", p]
                subprocess.run(cmd, check=True, capture_output=True)
                files = ["dict.txt"] + [n + e for n in ["train"] + [s[0] for s in splits] for e in (".bin", ".idx")]
                for f in files:
                    check(read(os.path.join(fdest, f)) == read(os.path.join(sdest, f)),
                          "%s, %d worker(s): %s byte-identical to fairseq's" % (name, workers, f))
            dic = Dictionary.load(os.path.join(sdest, "dict.txt"))
            ds = indexed.MMapIndexedDataset(os.path.join(sdest, "train"))
            with open(train, encoding="utf-8") as f:
                lines = f.readlines()
            check(len(ds) == len(lines), "%s: fairseq's MMapIndexedDataset reads %d items" % (name, len(ds)))
            check(all(ds[i].tolist() == dic.encode_line(lines[i], add_if_not_exist=False).tolist()
                      for i in range(len(ds))), "%s: every item equals fairseq's Dictionary.encode_line" % name)
    print("%d difference(s)" % failures if failures else "identical to fairseq")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
