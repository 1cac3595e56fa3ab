#!/usr/bin/env python3
"""tests/fuzz/make_corpus.py — writes the seed corpora in tests/fuzz/corpus/<target>/ (committed;
rerun only to change the seeds). Each seed is a small valid input, or a near miss of one, in the
format the target reads (tests/fuzz/fuzz_<target>.cpp). Python only, no stretch binary: the
formats are written from their specifications (docs/formats.md), not by the code under test.
"""
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def dictionaries():
    put("dictionary", "small", "the 120\n, 90\n. 80\nof 40\n")
    put("dictionary", "overwrite", "a 3\nb 2\na 1 #fairseq:overwrite\n")
    put("dictionary", "utf8_spaces", "caf\u00e9 5\nword with spaces 4\n\u4e2d 1\n<unk> 7\n")
    put("dictionary", "madeup", "x 1\nmadeupword0000 0\nmadeupword0001 0\n")
    put("dictionary", "bytes", "".join(f"{b} {256 - b}\n" for b in range(0, 256, 37)))
    put("dictionary", "bad_count", "a 1\nb x\n")
    put("dictionary", "crlf_trailing", "a 1\r\nb 2 \t\n\n")


def mmidx(dtype_code, width, items):
    sizes = [len(x) for x in items]
    ptrs, p = [], 0
    for s in sizes:
        ptrs.append(p)
        p += s * width
    idx = b"MMIDIDX\x00\x00" + struct.pack("<QBQ", 1, dtype_code, len(items))
    idx += struct.pack(f"<{len(items)}i", *sizes) + struct.pack(f"<{len(items)}q", *ptrs)
    fmt = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 6: "d", 7: "d", 8: "H", 9: "I", 10: "Q"}[dtype_code]
    binary = b"".join(struct.pack(f"<{len(x)}{fmt}", *x) for x in items)
    return struct.pack("<I", len(idx)) + idx + binary


def datasets():
    items = [[4, 5, 6, 2], [7, 2], [], [8, 9, 10, 11, 2]]
    put("mmidx", "u16", mmidx(8, 2, items))
    put("mmidx", "i32", mmidx(4, 4, items))
    put("mmidx", "u8", mmidx(1, 1, items))
    put("mmidx", "i64", mmidx(5, 8, items))
    put("mmidx", "f64", mmidx(6, 8, [[4.0, 2.0]]))
    put("mmidx", "empty", mmidx(8, 2, []))
    put("mmidx", "out_of_vocab", mmidx(8, 2, [[4, 60000, 2]]))


def safetensors(tensors, metadata=None):
    sizes = {"F32": 4, "I32": 4, "BF16": 2, "I64": 8, "U8": 1}
    header, data, off = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        n = sizes[dtype]
        for d in shape:
            n *= d
        assert len(raw) == n
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        data += raw
        off += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensor_files():
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    put("safetensors", "f32", safetensors([("decoder.embed_tokens.weight", "F32", [2, 3], f32)],
                                          {"format": "stretch", "config": '{"arch": "transformer_lm_tiny"}'}))
    put("safetensors", "mixed", safetensors([("a", "I64", [2], struct.pack("<2q", 1, -1)),
                                             ("b", "I32", [1, 1], struct.pack("<i", 7)),
                                             ("c", "BF16", [3], b"\x80\x3f" * 3),
                                             ("d", "U8", [5], b"hello"),
                                             ("e", "F32", [0, 4], b""),
                                             ("f", "F32", [], struct.pack("<f", 0.5))]))
    put("safetensors", "empty", safetensors([]))
    put("safetensors", "overlap", struct.pack("<Q", 80) +
        b'{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}'[:80] +
        b"abcd")
    put("safetensors", "zip_magic", b"PK\x03\x04" + b"\x00" * 60)


def overrides():
    for i, t in enumerate(["{'max_tokens':1024, 'tokens_per_sample':1024, 'max_target_positions':1024}",
                           "{mem_len:2100,same_length:True}", '{"dropout": 0.1, "arch": "transformer_lm"}',
                           "{'a': None, 'b': False, 'c': -1.5e-3, 'd': 'x\\'y'}", "", "[1, 2]",
                           "{'adaptive_softmax_cutoff': '20000,60000', 'x': [1, (2, 3)]}", "{'unterminated: 1}"]):
        put("model_overrides", f"seed{i}", t)


def configs():
    for i, j in enumerate([{"lr": 1.0, "max_update": 100}, {"optimizer": {"_name": "nag", "lr": [0.5]}},
                           {"no_progress_bar": True, "update_freq": [1, 2], "adam_betas": [0.9, 0.98]},
                           {"max-update": 5, "vocab_size": 10}, {"frobnicate": 1}, [1, 2],
                           {"task": {"_name": "language_modeling"}, "lr": None}]):
        put("config_json", f"seed{i}", json.dumps(j))
    put("config_json", "not_json", "{lr: 1")


if __name__ == "__main__":
    dictionaries()
    datasets()
    safetensor_files()
    overrides()
    configs()
