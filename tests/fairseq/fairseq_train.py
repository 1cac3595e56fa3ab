#!/usr/bin/env python3
"""Runs REAL fairseq-train (fairseq_cli.train.cli_main, unchanged), with fairseq_normformer_patch.py applied
when STRETCH_FAIRSEQ_NORMFORMER=1. Usage (in the fairseq venv): fairseq_train.py DATA [fairseq-train flags]
"""
import os
import sys


def main():
    if os.environ.get("STRETCH_FAIRSEQ_NORMFORMER") == "1":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fairseq_normformer_patch
        fairseq_normformer_patch.apply()
    import fairseq_cli.train as m
    sys.argv = ["fairseq-train"] + sys.argv[1:]
    m.cli_main()


if __name__ == "__main__":
    main()
