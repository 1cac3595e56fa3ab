#!/usr/bin/env python3
"""Runs REAL fairseq-eval-lm (fairseq_cli.eval_lm.cli_main, unchanged) and prints, as one JSON
list, every message its logger "fairseq_cli.eval_lm" logged after loading the data (the word
lines of --output-word-probs / --output-word-stats, "Evaluated ...", "Loss ..."), without the
"date | INFO | name |" prefix. Usage (in the fairseq venv):
  fairseq_eval_lines.py DATA --path CKPT [more fairseq-eval-lm flags]
"""
import json
import logging
import sys


def main():
    import fairseq_cli.eval_lm as m

    lines = []

    class Grab(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logging.getLogger("fairseq_cli.eval_lm").addHandler(Grab())
    sys.argv = ["fairseq-eval-lm"] + sys.argv[1:]
    m.cli_main()
    start = next((i for i, x in enumerate(lines) if " examples" in x), -1) + 1  # after "DATA SPLIT N examples"
    print(json.dumps(lines[start:]))


if __name__ == "__main__":
    main()
