#!/usr/bin/env python3
"""Draws docs/images/alibi_variants_sweep.svg from docs/images/alibi_variants_sweep.csv (the
numbers of docs/RESULTS.md's ALiBi-variant table) with gnuplot: three panels that share one y
axis, each with at most six lines and its legend below the plot, the training length marked.
  (a) position methods: sinusoidal, rope, t5, alibi, alibi +interp
  (b) ALiBi slope variants: alibi, blog slopes, learnable, groups, layer scale, warm-up, no-bias head
  (c) ALiBi shapes and the hybrid stack: alibi, log, clipped, alibi+rope-upper
The y axis is the change in perplexity from the training length (L = 64), in percent ((a) and (c)
on one scale, (b) zoomed); the absolute values are in the table next to the plot.
Usage: scripts/plot_alibi_variants.py [CSV] [OUT.svg|OUT.png]   (needs gnuplot, installed by scripts/setup.sh)
       scripts/plot_alibi_variants.py --check [CSV] [RESULTS.md]
  --check: exit 1 unless the CSV's numbers are the table's in docs/RESULTS.md (the transcription
  cannot drift from the table the plot stands next to); nothing is drawn.
"""
import csv
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = os.path.join(HERE, "..", "docs", "images", "alibi_variants_sweep.csv")
SVG = os.path.join(HERE, "..", "docs", "images", "alibi_variants_sweep.svg")
TRAIN_LEN = 64
# (title, models, own y range?) — panel (b)'s lines all lie within 0.6% of each other, so it gets
# its own (zoomed) y range; (a) and (c) share one.
PANELS = [
    ("(a) position methods", ["sinusoidal", "rope", "t5", "alibi", "alibi +interp"], False),
    ("(b) ALiBi slopes (y zoomed)", ["alibi", "alibi-blog-slopes", "alibi-learnable", "alibi-groups",
                          "alibi-layer-scale", "alibi-warmup", "alibi-no-bias-head"], True),
    ("(c) ALiBi bias shapes, hybrid", ["alibi", "alibi-log", "alibi-clipped", "alibi+rope-upper"], False),
]
# One colour and point type per model across panels; plain alibi is the same black line in each.
STYLE = {
    "alibi": ("#000000", 7), "sinusoidal": ("#d62728", 5), "rope": ("#1f77b4", 9), "t5": ("#2ca02c", 11),
    "alibi +interp": ("#9467bd", 13), "alibi-blog-slopes": ("#1f77b4", 5), "alibi-learnable": ("#ff7f0e", 9),
    "alibi-groups": ("#2ca02c", 11), "alibi-layer-scale": ("#9467bd", 13), "alibi-warmup": ("#8c564b", 3),
    "alibi-no-bias-head": ("#e377c2", 1), "alibi-log": ("#d62728", 5), "alibi-clipped": ("#1f77b4", 9),
    "alibi+rope-upper": ("#2ca02c", 11),
}


def fail(msg):
    print("plot_alibi_variants.py: " + msg, file=sys.stderr)
    sys.exit(1)


def read(path):
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(line for line in f if not line.startswith("#"))]
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror}); pass the CSV as the first argument")
    head, body = rows[0], rows[1:]
    if head[0] != "model" or len(head) < 2:
        fail(f"{path}: the header must be 'model,<length>,...' (got {','.join(head)})")
    try:
        lengths = [int(x) for x in head[1:]]
        data = {r[0]: [float(x) for x in r[1:]] for r in body}
    except ValueError as e:
        fail(f"{path}: {e}; every value after the model name must be a number")
    for name, vals in data.items():
        if len(vals) != len(lengths):
            fail(f"{path}: row '{name}' has {len(vals)} values for {len(lengths)} lengths")
    if TRAIN_LEN not in lengths:
        fail(f"{path}: no column for the training length {TRAIN_LEN}")
    return lengths, data


RESULTS = os.path.join(HERE, "..", "docs", "RESULTS.md")
SECTION = "## ALiBi variants at L = 64 on PTB"


def results_table(path):
    """{model: [ppl per length]} and the lengths from the first table of SECTION in RESULTS.md."""
    try:
        text = open(path).read()
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    if SECTION not in text:
        fail(f"{path}: no section '{SECTION}'")
    rows = []  # the first contiguous block of table lines after the heading
    for line in text.split(SECTION, 1)[1].splitlines():
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    if len(rows) < 3:
        fail(f"{path}: no table under '{SECTION}'")
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    lengths = [int(c) for c in head[1:] if c.isdigit()]
    table = {}
    for line in rows[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        try:
            table[cells[0]] = [float(c) for c in cells[1:1 + len(lengths)]]
        except ValueError:
            fail(f"{path}: row '{cells[0]}' of the table under '{SECTION}' has a cell that is not a number")
    return lengths, table


def check(csv_path, results_path):
    lengths, data = read(csv_path)
    t_lengths, table = results_table(results_path)
    if lengths != t_lengths:
        fail(f"{csv_path}: lengths {lengths}, {results_path}: {t_lengths}")
    if set(data) != set(table):
        fail(f"{csv_path} and {results_path} list different models: {sorted(set(data) ^ set(table))}")
    for name in table:
        if data[name] != table[name]:
            fail(f"{csv_path}: '{name}' is {data[name]}, {results_path} says {table[name]}")
    print(f"{csv_path}: {len(data)} models x {len(lengths)} lengths, the numbers of {results_path}")


def script(lengths, data, out):
    i0 = lengths.index(TRAIN_LEN)
    term = ("pngcairo size 1200,520 font 'Helvetica,10'" if out.endswith(".png")
            else "svg size 1200,520 dynamic font 'Helvetica,12' background '#ffffff'")
    g = [f"set terminal {term}",
         f"set output '{out}'",
         "set datafile separator ','",
         "set multiplot layout 1,3 title 'PTB valid, transformer\\_lm\\_tiny trained at L = 64 "
         "(150 updates): perplexity change from L = 64' font ',14'",
         "set logscale x 2", f"set xrange [{lengths[0] / 1.25}:{lengths[-1] * 1.25}]",
         "set xtics (" + ", ".join(f"'{x}' {x}" for x in lengths) + ")",
         "set xlabel 'evaluation length (tokens)'",
         "set format y '%+.0f%%'", "set grid ytics lc rgb '#dddddd'",
         "set key outside below left Left reverse vertical maxrows 4 samplen 2 spacing 1.1 width -2",
         "set bmargin 9", "set tmargin 3", "set lmargin 12", "set rmargin 2"]
    def change(names):
        return [100 * (data[n][i] / data[n][i0] - 1) for n in names for i in range(len(lengths))]

    shared = change([n for _, names, own in PANELS if not own for n in names if n in data])
    g.append(f"set arrow 1 from {TRAIN_LEN},graph 0 to {TRAIN_LEN},graph 1 nohead dt 2 lc rgb '#777777'")
    g.append(f"set label 1 'training length' at {TRAIN_LEN},graph 0.97 offset 0.6,0 left tc rgb '#555555' font ',10'")
    for title, names, own in PANELS:
        missing = [n for n in names if n not in data]
        if missing:
            fail(f"the CSV has no row for {', '.join(missing)}")
        ys, pad = (change(names), 0.15) if own else (shared, 0.5)
        g.append(f"set yrange [{min(ys) - pad:.2f}:{max(ys) + pad:.2f}]")
        g.append("set format y '%+.1f%%'" if own else "set format y '%+.0f%%'")
        g.append(f"set title '{title}'")
        g.append("set ylabel 'change from L = 64' offset -1,0")
        plots = []
        for n in names:
            colour, pt = STYLE[n]
            width = 2.5 if n == "alibi" else 1.5
            plots.append(f"'-' using 1:2 with linespoints lw {width} pt {pt} ps 0.8 lc rgb '{colour}' "
                         f"title '{n.replace('_', chr(92) + '_')}'")
        g.append("plot " + ", ".join(plots))
        for n in names:
            v = data[n]
            g.extend(f"{x},{100 * (v[i] / v[i0] - 1):.4f}" for i, x in enumerate(lengths))
            g.append("e")
    g.append("unset multiplot")
    return "\n".join(g) + "\n"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        check(sys.argv[2] if len(sys.argv) > 2 else CSV, sys.argv[3] if len(sys.argv) > 3 else RESULTS)
        return
    src = sys.argv[1] if len(sys.argv) > 1 else CSV
    dst = sys.argv[2] if len(sys.argv) > 2 else SVG
    lengths, data = read(src)
    fd, tmp = tempfile.mkstemp(suffix=os.path.splitext(dst)[1], dir=os.path.dirname(os.path.abspath(dst)))
    os.close(fd)
    try:
        r = subprocess.run(["gnuplot"], input=script(lengths, data, tmp), text=True, capture_output=True)
        written = open(tmp, "rb").read()
        if r.returncode != 0 or not (b"</svg>" in written or written.startswith(b"\x89PNG")):
            fail(f"gnuplot failed (exit {r.returncode}): {r.stderr.strip()}; {dst} was not written")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    except FileNotFoundError:
        fail("gnuplot not found; run scripts/setup.sh")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(dst)


if __name__ == "__main__":
    main()
