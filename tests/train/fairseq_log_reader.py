"""tests/train/fairseq_log_reader.py — a reader of fairseq 0.12.2's training logs, written from
fairseq's source (fairseq/logging/progress_bar.py: SimpleProgressBar.log/print, JsonProgressBar,
format_stat; fairseq/logging/meters.py; fairseq_cli/train.py: logging.basicConfig, validate,
get_valid_stats; fairseq/checkpoint_utils.py: the "Saved checkpoint" line), not from stretch's.
No fairseq installation was available to this test, so the reader is checked first against log
lines real fairseq runs printed (quoted in fairseq's GitHub issues #2338 and #2201).

read_log(text) -> list of Record(time, level, logger, message, kind, fields, ...) where kind is
"train_inner", "print" (an end-of-epoch or validation summary), "json", "saved", or "info".
"""
import json
import re
from dataclasses import dataclass, field

# logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
#                     datefmt="%Y-%m-%d %H:%M:%S")
PREFIX = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \| (DEBUG|INFO|WARNING|ERROR|CRITICAL) \| ([^|]+?) \| (.*)$")
# SimpleProgressBar.log: "{}:  {:5d} / {:d} {}".format(prefix, i + 1, size, "k=v, k=v")
INNER = re.compile(r"^epoch (\d{3,}):  ([ \d]{5,}) / (\d+) (.*)$")
# SimpleProgressBar.print: "{} | {}".format(prefix, "k v | k v"); prefix "epoch 001[ | valid on 'x' subset]"
PRINT = re.compile(r"^epoch (\d{3,})(?: \| (valid on '[^']*' subset))? \| (\S+ \S+(?: \| \S+ \S+)*)$")
SAVED = re.compile(r"^Saved checkpoint (\S+) \(epoch (\d+) @ (\d+) updates, score (\S+)\) "
                   r"\(writing took (\S+) seconds\)$")


@dataclass
class Record:
    time: str
    level: str
    logger: str
    message: str
    kind: str = "info"
    epoch: int = 0
    step: int = 0      # train_inner: i + 1 (updates done in the epoch)
    size: int = 0      # train_inner: updates in the epoch
    prefix: str = ""   # print: "" or "valid on 'valid' subset"
    fields: dict = field(default_factory=dict)  # key -> the text fairseq printed (json: the value)


def parse_line(line):
    m = PREFIX.match(line)
    if not m:
        return None
    r = Record(*m.groups())
    msg = r.message
    if msg.startswith("{") and msg.endswith("}") and r.logger not in ("fairseq_cli.train",):
        r.kind = "json"
        r.fields = json.loads(msg)
        r.epoch = r.fields.get("epoch", 0)
        return r
    if r.logger == "train_inner":
        m = INNER.match(msg)
        if m:
            r.kind = "train_inner"
            r.epoch, r.step, r.size = int(m.group(1)), int(m.group(2)), int(m.group(3))
            r.fields = dict(kv.split("=", 1) for kv in m.group(4).split(", "))
            return r
    m = PRINT.match(msg)
    if m and r.logger not in ("fairseq_cli.train", "fairseq.trainer", "fairseq.checkpoint_utils"):
        r.kind = "print"
        r.epoch = int(m.group(1))
        r.prefix = m.group(2) or ""
        r.fields = dict(kv.split(" ", 1) for kv in m.group(3).split(" | "))
        return r
    m = SAVED.match(msg)
    if m and r.logger == "fairseq.checkpoint_utils":
        r.kind = "saved"
        r.fields = {"path": m.group(1), "epoch": m.group(2), "updates": m.group(3), "score": m.group(4),
                    "seconds": m.group(5)}
    return r


def read_log(text):
    """Every line of `text` must be a logging line; a stray line is an error naming it."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        r = parse_line(line)
        if r is None:
            raise ValueError(f"line {n} is not a fairseq log line: {line!r}")
        out.append(r)
    return out


def g(value):
    """fairseq's format_stat for a number: "{:g}".format(value)."""
    return "{:g}".format(value)


def decimals(text):
    """Digits after the decimal point of a "{:g}" text (0 for "94", 3 for "9.995")."""
    if "e" in text or "." not in text:
        return 0
    return len(text.split(".")[1])


# Lines real fairseq printed: github.com/facebookresearch/fairseq/issues/2338 (simple, 2020) and
# issues/2201 (json). The reader must read them before it is trusted with stretch's.
REAL_FAIRSEQ_LINES = [
    "2020-07-17 07:11:02 | INFO | train_inner | epoch 001:   2800 / 160368 loss=9.255, ppl=611.12, wps=57.3, "
    "ups=0.04, wpb=1613, bsz=80, num_updates=2800, lr=2.8e-05, gnorm=3.23, train_wall=13, wall=1236",
    "2020-07-17 07:12:00 | INFO | train_inner | epoch 001:   3000 / 160368 loss=9.376, ppl=664.29, wps=16.2, "
    "ups=0.03, wpb=469, bsz=8, num_updates=3000, lr=3e-05, gnorm=3.214, train_wall=14, wall=1294",
    '2020-06-01 10:00:00 | INFO | train_inner | {"epoch": 27, "update": 26.267, "loss": "8.206", "nll_loss": "7.049", '
    '"ppl": "132.47", "wps": "1195.4", "ups": "1.62", "wpb": "738.1", "bsz": "46.4", "num_updates": "33700", '
    '"lr": "0.00017226", "gnorm": "1.833", "clip": "1", "train_wall": "61", "wall": "30542"}',
]


def self_check():
    recs = read_log("\n".join(REAL_FAIRSEQ_LINES))
    a, b, j = recs
    assert a.kind == "train_inner" and a.epoch == 1 and a.step == 2800 and a.size == 160368, a
    assert list(a.fields) == ["loss", "ppl", "wps", "ups", "wpb", "bsz", "num_updates", "lr", "gnorm", "train_wall",
                              "wall"], a.fields
    assert b.fields["lr"] == "3e-05" and b.fields["train_wall"] == "14", b.fields
    assert j.kind == "json" and j.fields["epoch"] == 27 and j.fields["update"] == 26.267, j.fields
    assert all(isinstance(v, str) for k, v in j.fields.items() if k not in ("epoch", "update")), j.fields
    # The roundings the reader checks stretch for hold in real fairseq output.
    for r in (a, b):
        f = r.fields
        assert decimals(f["loss"]) <= 3 and decimals(f["ppl"]) <= 2 and decimals(f["wps"]) <= 1
        assert decimals(f["ups"]) <= 2 and decimals(f["gnorm"]) <= 3 and decimals(f["wall"]) == 0
        assert all(g(float(v)) == v for v in f.values()), f
    return True
