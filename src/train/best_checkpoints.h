// train/best_checkpoints.h — fairseq's --keep-best-checkpoints N (checkpoint_utils.save_checkpoint,
// 0.12.2). Contract:
//   * The metric value v is the logged one (loss rounded to 3 decimals, ppl to 2, as fairseq's
//     meters give it to save_checkpoint).
//   * Name: "checkpoint.best_<metric>_{v:.3f}{r}.pt" where r = np.random.randint(0, N) under
//     data_utils.numpy_seed(epoch, updates, v), i.e. np.random.seed(int(hash((epoch, updates, v))
//     % 1e6)) with CPython's tuple/int/float hash — fairseq's tie-breaking digit, glued to the
//     decimals (so "checkpoint.best_loss_4.1232.pt" holds v = 4.123, r = 2).
//   * Written when no such file exists yet and v <= the running best (>= with
//     --maximize-best-checkpoint-metric), else when v is at least as good as the worst file's
//     value — read back from the file name with the digit glued on (float("4.1232")), as fairseq does.
//   * Pruning after each save: the files sorted by that value, best first; all but the first N
//     removed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stretch::train {

// CPython's hash() of an int, a float, and a tuple of already-hashed items (64-bit builds).
int64_t python_hash_int(int64_t v);
int64_t python_hash_float(double v);
int64_t python_hash_tuple(const std::vector<int64_t>& item_hashes);

// fairseq's tie-breaking digit r in [0, keep).
int64_t best_checkpoint_suffix(int64_t epoch, int64_t updates, double value, int64_t keep);

struct KeepBestParams {
  std::string save_dir;
  std::string metric = "loss";  // --best-checkpoint-metric
  bool maximize = false;        // --maximize-best-checkpoint-metric
  int64_t keep = 0;             // --keep-best-checkpoints (<= 0: off)
  std::string suffix;           // --checkpoint-suffix: only files ending in suffix + ".pt" are counted
};

// The file name to write for this validation, before the --checkpoint-suffix the trainer inserts into
// every name ("" when fairseq would not write one). `best` is
// save_checkpoint.best after this validation (the running best, this value included).
std::string keep_best_name(const KeepBestParams& p, int64_t epoch, int64_t updates, double value, double best);
// Removes all but the best `keep` checkpoint.best_<metric>_*<suffix>.pt files of save_dir.
void prune_best(const KeepBestParams& p);

}  // namespace stretch::train
