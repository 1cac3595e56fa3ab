#!/usr/bin/env python3
"""Prints the expected masks of tests/train/test_masked_lm.cpp with the real numpy (1.24) RNG and
fairseq 0.12.2's MaskTokensDataset draws (numpy_seed(seed, epoch, index), then rand, choice without
replacement, rand(sz) twice, choice(V, n, p)): the independent oracle of train::mask_block().
usage: /usr/bin/python3 tests/train/masked_lm_numpy_values.py
"""
import numpy as np


def mask_item(item, seed, epoch, index, V, mask_idx, pad=1, mask_prob=0.15, leave=0.1, rand_p=0.1):
    item = np.array(item)
    np.random.seed(int(hash((seed, epoch, index)) % 1e6))
    sz = len(item)
    mask = np.full(sz, False)
    num_mask = int(mask_prob * sz + np.random.rand())
    mask[np.random.choice(sz, num_mask, replace=False)] = True
    tgt = np.full(sz, pad)
    tgt[mask] = item[mask]
    either = rand_p + leave
    unmask = rand_mask = None
    if either > 0.0:
        pick = mask & (np.random.rand(sz) < either)
        if rand_p == 0.0:
            unmask = pick
        elif leave == 0.0:
            rand_mask = pick
        else:
            decision = np.random.rand(sz) < leave / either
            unmask = pick & decision
            rand_mask = pick & (~decision)
    if unmask is not None:
        mask = mask ^ unmask
    src = np.copy(item)
    src[mask] = mask_idx
    if rand_mask is not None and rand_mask.sum() > 0:
        w = np.ones(V)
        w[:4] = 0
        src[rand_mask] = np.random.choice(V, rand_mask.sum(), p=w / w.sum())
    return src.tolist(), tgt.tolist()


if __name__ == "__main__":
    item = [0] + list(range(4, 43))  # <s> + 39 tokens, V = 44 (mask 43)
    for (seed, epoch, index, mp, lv, rp) in [(1, 1, 0, 0.15, 0.1, 0.1), (1, 1, 7, 0.15, 0.1, 0.1),
                                             (1, 2, 7, 0.15, 0.1, 0.1), (3, 1, 123456, 0.5, 0.2, 0.3),
                                             (1, 1, 5, 0.4, 0.0, 0.5), (1, 1, 5, 0.4, 0.5, 0.0)]:
        src, tgt = mask_item(item, seed, epoch, index, 44, 43, 1, mp, lv, rp)
        print(f"{{{seed}, {epoch}, {index}, {mp}, {lv}, {rp},")
        print("  {" + ", ".join(map(str, src)) + "},")
        print("  {" + ", ".join(map(str, tgt)) + "}},")
