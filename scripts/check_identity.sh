#!/usr/bin/env bash
# scripts/check_identity.sh — proves that two builds of stretch compute the same numbers
# (issue 11, "How it is judged": the model refactor must change no number). docs/identity.md.
#
#   scripts/check_identity.sh [--ref COMMIT|BUILD_DIR] [--new COMMIT|BUILD_DIR] [--quick] [--keep]
#
# --ref   the reference: a commit (default e369cbe, the last commit before the refactor) or an
#         existing build directory (one holding bin/stretch).
# --new   what is checked: a commit or a build directory; default the working tree (its HEAD
#         commit when clean; when it has changes, its files are built as "worktree", every run).
# --quick alibi, sinusoidal and rope (+ one adam run), 10 updates each: a smoke run.
# --keep  keep the work folder (logs, checkpoints, canonical texts) and print where it is.
# --build-only  build (or find) both binaries and stop.
#
# Builds: target `stretch` only, Release, tests and benchmarks off (cmake -G Ninja), in one
# build tree under ${STRETCH_IDENTITY_CACHE:-${XDG_CACHE_HOME:-~/.cache}/stretch-identity}/tree
# that each commit's files are copied into (only files whose content differs), so a second
# commit rebuilds only what changed; each commit's binary is kept as <cache>/<full hash>/stretch
# and found there next time. STRETCH_IDENTITY_JOBS: build jobs (default nproc).
# Data: the first lines of PTB train/valid/test from $STRETCH_DATA_DIR (default ../shared/data
# next to the repository).
#
# What runs, every command with --threads 1 and OMP_NUM_THREADS=1, two at a time:
#  1. preprocess the slice with both binaries: the data-bin files must be byte-identical; every
#     later run reads the reference's data-bin.
#  2. for each --pos (alibi sinusoidal learned rope t5 none): transformer_lm_tiny, L = 64,
#     30 updates, dropout/attention-dropout/activation-dropout 0.1, --update-freq 2, nag with
#     --clip-norm 0.1, validation every 10 updates (and at the epoch end, which the slice
#     reaches); plus alibi and t5 with adam, weight decay, a cosine schedule with warmup,
#     --update-freq 1. The --log-format json --log-interval 1 lines are compared as text
#     (loss, ppl, gnorm, clip, lr, wpb, bsz, num_updates, valid_loss, ...) without the timing
#     fields (wps, ups, wall, train_wall, valid_wps).
#  3. eval-lm of each checkpoint_last.pt on valid: non-overlapping at L, at 2L, sliding window
#     (--context-window L/2), and --kv-cache for alibi, t5, rope, none; alibi also at 32L (where
#     the attention skips negligible far key tiles). Compared: the printed
#     lines (without the timing), --results-json (without seconds, tokens/s, peak RSS, the path)
#     and every token's NLL (--dump-nll). Each eval also runs the NEW binary on the
#     REF binary's checkpoint: old checkpoints must load and give the same numbers.
#  4. generate from the first position method's checkpoint: greedy, and sampled twice (top-k,
#     top-p) with a fixed --seed: the same text, also from the REF checkpoint.
# Prints one row per check (pos, check, identical yes/NO, first differing line) and a line on
# whether --threads 2 changes the reference's training log (information only). Exits 0 when
# every check is identical, 1 at a difference (the first one is printed last, on stderr),
# 2 when a build or a reference run fails.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${STRETCH_IDENTITY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stretch-identity}"
say() { echo "check_identity: $*" >&2; }
die() { echo "check_identity: error: $*" >&2; exit 2; }

ref_arg="e369cbe"
new_arg=""
quick=0
build_only=0
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --ref) ref_arg="${2:?--ref needs a commit or a build directory}"; shift ;;
    --new) new_arg="${2:?--new needs a commit or a build directory}"; shift ;;
    --quick) quick=1 ;;
    --build-only) build_only=1 ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see scripts/check_identity.sh --help)" ;;
  esac
  shift
done

# ---------------------------------------------------------------------------------------------
# Builds. One persistent build tree ($cache_root/tree) is re-pointed at each commit by copying
# in only the files whose content differs, so ninja recompiles just what changed between two
# commits; the binary of each commit is then kept under $cache_root/<full hash>/stretch.
# ---------------------------------------------------------------------------------------------
sync_tree() {  # sync_tree SRC DST: make DST's files equal SRC's, touching only those that differ
  python3 - "$1" "$2" <<'PY'
import filecmp, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
want = set()
for root, _, files in os.walk(src):
    for f in files:
        r = os.path.normpath(os.path.relpath(os.path.join(root, f), src)); want.add(r)
        s, d = os.path.join(src, r), os.path.join(dst, r)
        if os.path.isfile(d) and not os.path.islink(d) and filecmp.cmp(s, d, shallow=False):
            continue
        os.makedirs(os.path.dirname(d), exist_ok=True)
        if os.path.lexists(d): os.remove(d)
        shutil.copyfile(s, d); shutil.copymode(s, d)   # a fresh mtime: ninja rebuilds its users
for root, _, files in os.walk(dst):
    for f in files:
        r = os.path.normpath(os.path.relpath(os.path.join(root, f), dst))
        if r not in want: os.remove(os.path.join(root, f))
PY
}

data_dir="$(cd "${STRETCH_DATA_DIR:-$repo/../shared/data}" 2>/dev/null && pwd)" ||
  die "data directory ${STRETCH_DATA_DIR:-$repo/../shared/data} not found (set STRETCH_DATA_DIR)"

build_sources() {  # build_sources SRCDIR OUTBIN LOG: build target stretch from SRCDIR, copy to OUTBIN
  local srcdir="$1" outbin="$2" log="$3" tree="$cache_root/tree"
  mkdir -p "$tree/src" "$tree/build" "$(dirname "$log")"
  sync_tree "$srcdir" "$tree/src"
  if [ ! -f "$tree/build/build.ninja" ]; then
    cmake -S "$tree/src" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DSTRETCH_BUILD_TESTS=OFF -DSTRETCH_BUILD_BENCH=OFF -DSTRETCH_DATA_DIR="$data_dir" >"$log" 2>&1 ||
      { tail -30 "$log" >&2; die "cmake failed (log: $log)"; }
  fi
  local jobs="${STRETCH_IDENTITY_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}"
  ninja -C "$tree/build" -j "$jobs" stretch >>"$log" 2>&1 || { tail -30 "$log" >&2; die "build failed (log: $log)"; }
  mkdir -p "$(dirname "$outbin")"
  cp "$tree/build/bin/stretch" "$outbin.tmp" && mv "$outbin.tmp" "$outbin"
}

resolve_binary() {  # resolve_binary ARG ROLE -> sets $bin and $label
  local arg="$1" role="$2"
  if [ -z "$arg" ]; then  # the working tree
    if [ -z "$(git -C "$repo" status --porcelain --untracked-files=normal)" ]; then
      arg="$(git -C "$repo" rev-parse HEAD)"
    else
      local out="$cache_root/worktree/stretch" tmp
      say "$role: the working tree has changes; building it (into $cache_root/worktree)"
      tmp="$(mktemp -d)"
      (cd "$repo" && git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
        [ -f "$f" ] && { mkdir -p "$tmp/$(dirname "$f")"; cp -p "$f" "$tmp/$f"; }; done)
      build_sources "$tmp" "$out" "$cache_root/worktree/build.log"
      rm -rf "$tmp"
      bin="$out"; label="worktree"; return
    fi
  fi
  if [ -d "$arg" ] || [ -f "$arg" ]; then  # a build directory (or a binary) given
    if [ -x "$arg/bin/stretch" ]; then bin="$(cd "$arg/bin" && pwd)/stretch"
    elif [ -f "$arg" ] && [ -x "$arg" ]; then bin="$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg")"
    else die "$role: $arg holds no bin/stretch"; fi
    label="$arg"; return
  fi
  local hash
  hash="$(git -C "$repo" rev-parse --verify --quiet "$arg^{commit}")" || die "$role: '$arg' is neither a commit nor a directory"
  bin="$cache_root/$hash/stretch"; label="$(git -C "$repo" rev-parse --short "$hash")"
  if [ -x "$bin" ]; then say "$role: $label (cached build $bin)"; return; fi
  say "$role: building $label (target stretch only; log $cache_root/$hash/build.log)"
  mkdir -p "$cache_root/$hash"
  local tmp; tmp="$(mktemp -d)"
  git -C "$repo" archive "$hash" | tar -x -C "$tmp"
  build_sources "$tmp" "$bin" "$cache_root/$hash/build.log"
  rm -rf "$tmp"
}

mkdir -p "$cache_root"
exec 9>"$cache_root/lock"
flock 9   # one build (and one tree) at a time
t_build=$SECONDS
resolve_binary "$ref_arg" ref; ref_bin="$bin"; ref_label="$label"
resolve_binary "$new_arg" new; new_bin="$bin"; new_label="${label}"
flock -u 9
say "ref = $ref_label ($ref_bin), new = $new_label ($new_bin), builds took $((SECONDS - t_build)) s"
[ "$build_only" = 1 ] && exit 0
"$ref_bin" --help >/dev/null 2>&1 || die "the reference binary $ref_bin does not run"
"$new_bin" --help >/dev/null 2>&1 || die "the new binary $new_bin does not run"

# ---------------------------------------------------------------------------------------------
# Runs. Every command runs with --threads 1 (and OMP_NUM_THREADS=1) in a folder of its own,
# with the same relative paths for both binaries, so logs and results can be compared as text.
# Two jobs at a time (a ref and a new one side by side).
# ---------------------------------------------------------------------------------------------
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
jobs_max="${STRETCH_IDENTITY_PARALLEL:-2}"
t_run=$SECONDS
if [ "$keep" = 1 ]; then work="$(mktemp -d "${TMPDIR:-/tmp}/stretch-identity.XXXXXX")"
else work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT; fi
say "work folder $work"

if [ "$quick" = 1 ]; then
  positions=(alibi sinusoidal rope); updates=10; train_lines=600
else
  positions=(alibi sinusoidal learned rope t5 none); updates=30; train_lines=1200
fi
L=64                          # training length; eval at L, 2L, sliding (context L/2), kv-cache
valid_lines=300 test_lines=300

# The corpus slice (the same bytes for both binaries).
ptb="$data_dir/ptb"
for f in ptb.train.txt ptb.valid.txt ptb.test.txt; do [ -f "$ptb/$f" ] || die "$ptb/$f not found"; done
mkdir -p "$work/raw"
head -n "$train_lines" "$ptb/ptb.train.txt" >"$work/raw/train.txt"
head -n "$valid_lines" "$ptb/ptb.valid.txt" >"$work/raw/valid.txt"
head -n "$test_lines" "$ptb/ptb.test.txt" >"$work/raw/test.txt"

# run_job DIR BIN ARGS...: runs BIN ARGS in DIR (created), stdout/stderr/rc into DIR.
run_job() {
  local dir="$1" b="$2"; shift 2
  mkdir -p "$dir"
  ( cd "$dir" && { "$b" "$@" </dev/null >stdout 2>stderr; echo $? >rc; } ) || true
}
# spawn DIR BIN ARGS...: run_job in the background, at most $jobs_max at a time.
spawn() {
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  run_job "$@" &
}
drain() { wait || true; }
need_ok() {  # need_ok DIR WHAT: a reference run must succeed, else the check itself is broken
  if [ "$(cat "$1/rc" 2>/dev/null)" != 0 ]; then
    echo "check_identity: error: $2 failed (rc $(cat "$1/rc" 2>/dev/null || echo ?)); its stderr:" >&2
    tail -20 "$1/stderr" >&2; exit 2
  fi
}

# The text helpers: canonical forms (timing fields and paths removed, numbers kept as printed)
# and the first differing line of two files.
cat >"$work/canon.py" <<'PY'
import json, re, sys
TIMING = {"wps", "ups", "wall", "train_wall", "valid_wps", "seconds", "tokens_per_second", "peak_rss_mb",
          "checkpoint"}
# --results-json fields added after e369cbe (issue 17), with the value that means "nothing
# happened": left out only at that value, so a real change still shows as a difference.
ADDED = {"dropped_inf": "0"}
def timing(k):
    return k in TIMING or any(w in k for w in ("seconds", "time", "wall", "rss"))
def obj(pairs):
    return [(k, v) for k, v in pairs if not timing(k)]
def text(v):
    if isinstance(v, list):
        if all(isinstance(x, tuple) and len(x) == 2 for x in v) and v:
            return "{" + ", ".join(f"{k}={text(x)}" for k, x in v) + "}"
        return "[" + ", ".join(text(x) for x in v) + "]"
    return json.dumps(v) if not isinstance(v, str) or v.startswith('"') else v
def load(s):  # numbers stay the exact text the binary printed
    return json.loads(s, object_pairs_hook=obj, parse_float=lambda x: x, parse_int=lambda x: x,
                      parse_constant=lambda x: x)
mode, d = sys.argv[1], sys.argv[2]
out = [f"exit status {open(d + '/rc').read().strip()}"]
if mode == "train":
    # Since issue 16 the log is fairseq's (a logging prefix, fairseq's other lines, the epoch line
    # after the end-of-epoch validation with more fields, valid_wpb/bsz per batch); the new binary
    # runs with --log-full-precision (so does a reference that has the flag), and the fields both
    # binaries mean the same way are compared.
    KEEP = {"epoch", "loss", "ppl", "wpb", "bsz", "num_updates", "lr", "gnorm", "clip", "valid_loss", "valid_ppl",
            "valid_num_updates"}
    for line in open(d + "/stdout"):
        line = line.rstrip("\n")
        i = line.find("{")
        if i < 0:
            continue
        try:
            rec = load(line[i:])
        except ValueError:
            out.append(line)
            continue
        if any(k == "train_loss" for k, _ in rec):
            continue
        # An integral count printed as 1017.0 (old) or 1017 (new, fairseq's {:g}) is the same number.
        kept = [(k, v[:-2] if isinstance(v, str) and re.fullmatch(r"-?[0-9]+[.]0", v) else v)
                for k, v in rec if k in KEEP]
        if kept:  # the configuration printed at start (a JSON object too) has none of these keys
            out.append(text(kept))
elif mode == "eval":
    for line in open(d + "/stdout"):
        out.append(re.sub(r" in [0-9.]+s \([0-9.]+ tokens/s\)", "", line.rstrip("\n")))
    for f, what in (("results.json", "results-json"), ("nll.tsv", "dump-nll")):
        try:
            body = open(d + "/" + f).read()
        except FileNotFoundError:
            out.append(f"[no {what}]"); continue
        if f.endswith(".json"):
            out += [f"{what}: {k} = {text(v)}" for k, v in load(body) if ADDED.get(k) != text(v)]
        else:
            out += [f"{what}: {l}" for l in body.splitlines()]
elif mode == "fail":  # a refusal: the exit status and the message
    out += open(d + "/stdout").read().splitlines() + open(d + "/stderr").read().splitlines()
else:  # plain: stdout as it is
    out += open(d + "/stdout").read().splitlines()
print("\n".join(out))
PY
cat >"$work/firstdiff.py" <<'PY'
import sys
a, b = (open(p, errors="replace").read().splitlines() for p in sys.argv[1:3])
cut = lambda s: s if len(s) <= 110 else s[:107] + "..."
def fields(s):  # a canonical JSON line "{k=v, k=v}" as pairs, else None
    if not (s.startswith("{") and s.endswith("}")): return None
    return [tuple(f.split("=", 1)) if "=" in f else (f, "") for f in s[1:-1].split(", ")]
for i in range(max(len(a), len(b))):
    x = a[i] if i < len(a) else "<end>"; y = b[i] if i < len(b) else "<end>"
    if x == y: continue
    fx, fy = fields(x), fields(y)
    if fx and fy and [k for k, _ in fx] == [k for k, _ in fy]:
        where = dict(fx).get("num_updates") or dict(fx).get("valid_num_updates")
        k, u, v = next((k, u, v) for (k, u), (_, v) in zip(fx, fy) if u != v)
        print(f"line {i + 1}{f' (update {where})' if where else ''}: {k} ref {u} new {v}")
    else:
        print(f"line {i + 1}: ref «{cut(x)}» new «{cut(y)}»")
    break
PY
canon() { python3 "$work/canon.py" "$1" "$2" >"$2/canon.txt"; }

rows=()       # "pos|what|yes/NO|first difference"
ndiff=0
first_diff=""
# compare POS WHAT FILE_REF FILE_NEW
compare() {
  local pos="$1" what="$2" a="$3" b="$4" d=""
  if cmp -s "$a" "$b"; then rows+=("$pos|$what|yes|")
  else
    d="$(python3 "$work/firstdiff.py" "$a" "$b")"
    rows+=("$pos|$what|NO|$d"); ndiff=$((ndiff + 1))
    [ -n "$first_diff" ] || first_diff="$pos, $what: $d"
    [ "$keep" = 0 ] || first_diff_files="${first_diff_files:-$a $b}"
  fi
}

# ---- 1. preprocess: the reference's data-bin is the one every run reads ----------------------
prep_args=(preprocess --only-source --trainpref ../raw/train.txt --validpref ../raw/valid.txt
           --testpref ../raw/test.txt --destdir data-bin --workers 1)
spawn "$work/prep-ref" "$ref_bin" "${prep_args[@]}"
spawn "$work/prep-new" "$new_bin" "${prep_args[@]}"
drain
need_ok "$work/prep-ref" "reference preprocess"
for s in ref new; do
  (cd "$work/prep-$s" && { echo "exit status $(cat rc)"; [ -d data-bin ] && find data-bin -type f | LC_ALL=C sort |
    while read -r f; do
      # preprocess.json: keys added since e369cbe are left out at their neutral value (issue 16's
      # "dict_only": false), the rest re-serialised the same way for both binaries.
      case "$f" in
        */preprocess.json) echo "$f (neutral new keys dropped) $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
if d.get("dict_only") is False: del d["dict_only"]
sys.stdout.write(json.dumps(d, sort_keys=True))' "$f" | sha256sum | cut -c1-64)" ;;
        *) echo "$f $(sha256sum <"$f" | cut -c1-64)" ;;
      esac
    done; }) >"$work/prep-$s/canon.txt"
done
compare "-" "preprocess (data-bin files, sha256)" "$work/prep-ref/canon.txt" "$work/prep-new/canon.txt"
data="$work/prep-ref/data-bin"

# ---- 2. trainings ---------------------------------------------------------------------------
common=(train "$data" --arch transformer_lm_tiny --tokens-per-sample "$L" --max-tokens 512
        --required-batch-size-multiple 1 --dropout 0.1 --attention-dropout 0.1 --activation-dropout 0.1
        --max-update "$updates" --validate-interval-updates 10 --log-format json --log-interval 1
        --no-progress-bar --seed 1 --save-dir ckpt --no-epoch-checkpoints)
nag=(--optimizer nag --lr 0.5 --momentum 0.99 --clip-norm 0.1 --update-freq 2)
adam=(--optimizer adam --adam-betas "(0.9, 0.98)" --lr 0.002 --weight-decay 0.01 --lr-scheduler cosine
      --warmup-updates 5 --warmup-init-lr 1e-07 --clip-norm 1.0 --update-freq 1)
configs=()    # "name|pos"
for pos in "${positions[@]}"; do configs+=("$pos|$pos"); done
configs+=("alibi+adam|alibi")
if [ "$quick" = 0 ]; then configs+=("t5+adam|t5"); fi
# A reference from issue 16 on prints fairseq's rounded log unless asked: both then log in full.
ref_full=()
if "$ref_bin" train --help 2>/dev/null | grep -q -- '--log-full-precision'; then ref_full=(--log-full-precision); fi
for cfg in "${configs[@]}"; do
  name="${cfg%%|*}" pos="${cfg##*|}"
  opt=("${nag[@]}"); [ "$name" != "$pos" ] && opt=("${adam[@]}")
  spawn "$work/ref/$name/train" "$ref_bin" "${common[@]}" --threads 1 --pos "$pos" "${opt[@]}" "${ref_full[@]}"
  spawn "$work/new/$name/train" "$new_bin" "${common[@]}" --threads 1 --pos "$pos" "${opt[@]}" --log-full-precision
done
# Not a ref/new comparison: does the result depend on the thread count? (informational)
if [ "$quick" = 0 ] && [ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ]; then
  spawn "$work/threads2/alibi/train" "$ref_bin" "${common[@]}" --threads 2 --pos alibi "${nag[@]}" "${ref_full[@]}"
fi
drain
for cfg in "${configs[@]}"; do
  name="${cfg%%|*}"
  need_ok "$work/ref/$name/train" "reference training $name"
  canon train "$work/ref/$name/train"; canon train "$work/new/$name/train"
done
t_train=$((SECONDS - t_run))

# ---- 3. eval-lm and 4. generate --------------------------------------------------------------
protocols() {  # the eval-lm protocols for a position method: "name|flags"
  echo "eval L=$L|--tokens-per-sample $L"
  if [ "$1" = learned ]; then  # the table has L + 2 rows: both must refuse, with the same message
    echo "eval 2L=$((2 * L)) (refused: same error)|--tokens-per-sample $((2 * L))|fail"
  else
    echo "eval 2L=$((2 * L))|--tokens-per-sample $((2 * L))"
  fi
  echo "eval sliding L=$L ctx=$((L / 2))|--tokens-per-sample $L --context-window $((L / 2))"
  case "$1" in alibi|t5|rope|none) echo "eval kv-cache L=$L|--tokens-per-sample $L --kv-cache" ;; esac
  # ALiBi at 32L: the steep heads' far key tiles are negligible and skipped (ops/attention_skip.h)
  if [ "$1" = alibi ]; then echo "eval 32L=$((32 * L)) (far key tiles skipped)|--tokens-per-sample $((32 * L))"; fi
}
gen_pos="${positions[0]}"
gens=("generate greedy|--temperature 0"
      "generate sampled (T=1, top-k 20, 3 samples)|--temperature 1 --top-k 20 --nbest 3"
      "generate sampled (top-p 0.9)|--temperature 0.8 --top-p 0.9")
for cfg in "${configs[@]}"; do
  name="${cfg%%|*}" pos="${cfg##*|}"
  i=0
  while IFS='|' read -r what flags _; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    ev=(eval-lm "$data" --gen-subset valid --threads 1 $flags --results-json results.json --dump-nll nll.tsv)
    spawn "$work/ref/$name/eval$i" "$ref_bin" "${ev[@]}" --path ../train/ckpt/checkpoint_last.pt
    spawn "$work/new/$name/eval$i" "$new_bin" "${ev[@]}" --path ../train/ckpt/checkpoint_last.pt
    # cross: the reference's checkpoint, evaluated by the new binary
    spawn "$work/cross/$name/eval$i" "$new_bin" "${ev[@]}" --path "$work/ref/$name/train/ckpt/checkpoint_last.pt"
  done < <(protocols "$pos")
  if [ "$name" = "$gen_pos" ]; then
    i=0
    for g in "${gens[@]}"; do
      i=$((i + 1))
      # shellcheck disable=SC2086
      gn=(generate "$data" --threads 1 --prompt "the company said" --max-len 24 --seed 7 ${g#*|})
      spawn "$work/ref/$name/gen$i" "$ref_bin" "${gn[@]}" --path ../train/ckpt/checkpoint_last.pt
      spawn "$work/new/$name/gen$i" "$new_bin" "${gn[@]}" --path ../train/ckpt/checkpoint_last.pt
      spawn "$work/cross/$name/gen$i" "$new_bin" "${gn[@]}" --path "$work/ref/$name/train/ckpt/checkpoint_last.pt"
    done
  fi
done
drain

# ---- the table --------------------------------------------------------------------------------
for cfg in "${configs[@]}"; do
  name="${cfg%%|*}" pos="${cfg##*|}"
  ru=$(grep -c '"num_updates"' "$work/ref/$name/train/stdout" || true)
  rv=$(grep -c '"valid_loss"' "$work/ref/$name/train/stdout" || true)
  compare "$name" "train log ($ru updates, $rv validations)" "$work/ref/$name/train/canon.txt" "$work/new/$name/train/canon.txt"
  i=0
  while IFS='|' read -r what flags kind; do
    i=$((i + 1))
    if [ "$kind" = fail ]; then
      for s in ref new cross; do canon fail "$work/$s/$name/eval$i"; done
    else
      need_ok "$work/ref/$name/eval$i" "reference $what of $name"
      for s in ref new cross; do canon eval "$work/$s/$name/eval$i"; done
    fi
    compare "$name" "$what" "$work/ref/$name/eval$i/canon.txt" "$work/new/$name/eval$i/canon.txt"
    compare "$name" "$what (ref checkpoint, new binary)" "$work/ref/$name/eval$i/canon.txt" "$work/cross/$name/eval$i/canon.txt"
  done < <(protocols "$pos")
  if [ "$name" = "$gen_pos" ]; then
    i=0
    for g in "${gens[@]}"; do
      i=$((i + 1))
      need_ok "$work/ref/$name/gen$i" "reference ${g%%|*}"
      for s in ref new cross; do canon plain "$work/$s/$name/gen$i"; done
      compare "$name" "${g%%|*}" "$work/ref/$name/gen$i/canon.txt" "$work/new/$name/gen$i/canon.txt"
      compare "$name" "${g%%|*} (ref checkpoint, new binary)" "$work/ref/$name/gen$i/canon.txt" "$work/cross/$name/gen$i/canon.txt"
    done
  fi
done
t_total=$((SECONDS - t_run))

echo
echo "stretch identity check: ref $ref_label vs new $new_label ($updates updates per training, L = $L, --threads 1)"
printf '%-11s  %-62s  %-9s  %s\n' "pos" "check" "identical" "first difference"
printf '%-11s  %-62s  %-9s  %s\n' "-----------" "--------------------------------------------------------------" "---------" "----------------"
for r in "${rows[@]}"; do
  IFS='|' read -r c1 c2 c3 c4 <<<"$r"
  printf '%-11s  %-62s  %-9s  %s\n' "$c1" "$c2" "$c3" "$c4"
done
if [ -d "$work/threads2/alibi/train" ]; then
  canon train "$work/threads2/alibi/train"
  if cmp -s "$work/ref/alibi/train/canon.txt" "$work/threads2/alibi/train/canon.txt"; then t2="the same"
  else t2="NOT the same ($(python3 "$work/firstdiff.py" "$work/ref/alibi/train/canon.txt" "$work/threads2/alibi/train/canon.txt" | sed 's/ref «/1 thread «/; s/new «/2 threads «/'))"; fi
  echo "(info, not a check: the alibi training log of the ref binary with --threads 2 is $t2 as with --threads 1)"
fi
echo "${#rows[@]} checks, $ndiff different; runs took $t_total s (trainings $t_train s), builds $((t_run - t_build)) s"
[ "$keep" = 1 ] && echo "outputs kept in $work"
if [ "$ndiff" -gt 0 ]; then
  echo "FIRST DIFFERENCE: $first_diff" >&2
  if [ "$keep" = 1 ]; then echo "  (the compared texts: $first_diff_files)" >&2
  else echo "  (rerun with --keep to keep the logs and the compared texts)" >&2; fi
  exit 1
fi
echo "all identical"
