// eval/word_output.h — fairseq-eval-lm's word-level output: --output-word-probs,
// --output-word-stats and --post-process / --remove-bpe (fairseq_cli/eval_lm.py, 0.12.2).
// Contract, per fairseq *sample* (an evaluation block of L − c tokens, id = block index):
//   * post-process "@@ " or "subword_nmt": the BPE continuation marker is the value with
//     trailing spaces removed ("@@", resp. "subword_nmt" — fairseq 0.12.2's literal, which no
//     symbol ends with: --remove-bpe without a value then merges nothing, exactly as in fairseq).
//     Any other value is refused, as fairseq raises NotImplementedError.
//   * Merging: for each position i < n − 1 whose token ends with the marker, its log-prob is
//     added to position i + 1's (float32, as fairseq's tensor) and set to 0, and it is a
//     skipped token. The last token of a block is never merged. The loss then counts
//     (tokens with a finite score) − skipped, and sums the same scores (so loss is per word).
//   * Word-probs line: "<id> <w> [<lp>]\t<w> [<lp>]..." with lp = ln p printed "{:2f}" (6
//     decimals), w = the word with the marker removed from each piece; a trailing unmerged
//     piece is dropped from the line, as fairseq does.
//   * Word stats (after the evaluation, fairseq's WordStat): per distinct word in first-seen
//     order, stably sorted by count descending: "w\tcount\tΣlp\tis_bpe\tΣnext\tn_next" where
//     Σlp is a double sum printed as Python's repr, is_bpe True/False (whether its first
//     occurrence was merged from pieces), Σnext the float32 sum (a torch scalar in fairseq, which
//     formats as its item()) of the next scored word's lp, as repr, or 0 when none ever followed.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace stretch::data {
class Dictionary;
}

namespace stretch::eval {

struct TokenScore {
  int64_t offset = 0;    // position in the split's token stream
  int32_t target = 0;    // token id
  float log_prob = 0;    // ln p (−NLL), nats; ±inf kept
};

struct WordOutputOptions {
  bool word_probs = false;    // --output-word-probs
  bool word_stats = false;    // --output-word-stats
  std::string post_process;   // --post-process / --remove-bpe ("" = none)
};

// The BPE continuation marker for a --post-process value ("" for none). Usage error for values
// fairseq-eval-lm does not implement.
std::string bpe_marker(const std::string& post_process);

class WordOutput {
 public:
  WordOutput(const data::Dictionary& dict, WordOutputOptions options);

  // One sample (block) in evaluation order; returns its word-probs line ("" unless --output-word-probs).
  std::string add_block(int64_t id, const std::vector<TokenScore>& tokens);

  // The word-stats lines, most frequent first (empty unless --output-word-stats).
  std::vector<std::string> stats_lines() const;

  double score_sum() const { return score_sum_; }  // Σ ln p over finite (merged) scores, nats
  int64_t count() const { return count_; }         // fairseq's count: finite scores − skipped
  int64_t skipped() const { return skipped_; }     // merged BPE pieces
  const std::vector<double>& word_nll() const { return word_nll_; }  // −(merged score) of each counted word

 private:
  struct Stat {
    std::string word;
    bool is_bpe = false;
    double log_prob = 0;
    float next_word_prob = 0;
    bool has_next = false;
    int64_t count = 0;
    int64_t missing_next = 0;
  };
  const data::Dictionary& dict_;
  WordOutputOptions options_;
  std::string marker_;
  std::vector<char> is_piece_;  // [V] the symbol ends with the marker
  std::vector<Stat> stats_;
  std::unordered_map<std::string, size_t> stat_index_;
  double score_sum_ = 0;
  int64_t count_ = 0, skipped_ = 0;
  std::vector<double> word_nll_;
};

// Python's repr of a float (shortest round-trip digits, "1e-05", "inf").
std::string python_float_repr(double v);

}  // namespace stretch::eval
