// eval/generate.cpp — see generate.h.
#include "eval/generate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>

#include "autograd/tape.h"
#include "core/error.h"
#include "data/dictionary.h"
#include "eval/eval_lm.h"
#include "eval/require_decoder.h"

namespace stretch::eval {

namespace {
// The first id whose score is NaN or +inf (no distribution can be formed), or -1. -inf is a
// legitimate score (probability 0).
int64_t first_nan(const float* logits, int64_t vocab) {
  for (int64_t v = 0; v < vocab; ++v)
    if (std::isnan(logits[v]) || logits[v] == INFINITY) return v;
  return -1;
}

// log softmax(scores)[id] in double: the model's log-probability of `id`.
double log_softmax_at(const float* scores, int64_t vocab, int32_t id) {
  const double mx = *std::max_element(scores, scores + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(scores[v]) - mx);
  return static_cast<double>(scores[id]) - mx - std::log(sum);
}

const char* kNanHint =
    "the model's weights (or --model-overrides) produce NaN; check the model file (`stretch info`), or use an "
    "earlier checkpoint";
}  // namespace

void check_sampling_params(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.f)
    fail_usage("--temperature " + std::to_string(p.temperature) + " must be a finite number >= 0",
               "0 is greedy; 1 samples from the model's distribution");
  if (!(p.top_p > 0.f && p.top_p <= 1.f))
    fail_usage("--top-p " + std::to_string(p.top_p) + " must be in (0, 1]", "1 turns nucleus sampling off");
  if (p.top_k < 0) fail_usage("--top-k " + std::to_string(p.top_k) + " must be >= 0", "0 keeps all tokens");
  if (p.max_len < 0) fail_usage("--max-len " + std::to_string(p.max_len) + " must be >= 0");
}

int32_t sample_from_logits(const float* logits, int64_t vocab, const SamplingParams& p, Rng& rng,
                           const std::vector<int32_t>& banned) {
  // NaN breaks every comparison below (the sort's ordering included): never sample from it.
  if (const int64_t v = first_nan(logits, vocab); v >= 0)
    throw Error(ErrorKind::Numeric,
                "generate: the score of token id " + std::to_string(v) + " is " +
                    (std::isnan(logits[v]) ? "NaN" : "+inf"),
                kNanHint);
  std::vector<float> l(logits, logits + vocab);
  for (int32_t b : banned)
    if (b >= 0 && b < vocab) l[b] = -INFINITY;
  if (p.temperature <= 0.f) return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  int64_t keep = p.top_k > 0 ? std::min<int64_t>(p.top_k, vocab) : vocab;
  const float mx = l[order[0]];
  std::vector<double> prob(keep);
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += prob[i] = std::exp((l[order[i]] - mx) / p.temperature);
  if (p.top_p < 1.f) {  // smallest prefix whose mass reaches top_p
    double acc = 0;
    int64_t n = 0;
    while (n < keep && acc < p.top_p * total) acc += prob[n++];
    keep = std::max<int64_t>(n, 1);
    total = acc;
  }
  double u = rng.uniform() * total, acc = 0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += prob[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

std::vector<int32_t> banned_ids(const data::Dictionary& dict) {
  std::vector<int32_t> banned = {dict.bos(), dict.pad(), dict.unk()};
  for (int32_t id = data::Dictionary::kNumSpecial; id < dict.size(); ++id)
    if (dict.symbol(id).rfind("madeupword", 0) == 0) banned.push_back(id);
  return banned;
}

std::vector<int32_t> generate_tokens(models::LanguageModel& model, const std::vector<int32_t>& context,
                                     const SamplingParams& p, Rng& rng, const std::vector<int32_t>& banned,
                                     std::vector<double>* log_probs) {
  autograd::NoGradGuard no_grad;
  const int64_t V = model.head().vocab_size();
  if (context.empty()) fail_usage("generate: the context is empty", "start it with </s> as training streams do");
  check_sampling_params(p);
  std::unique_ptr<models::SegmentState> state = model.new_segment_state(models::SegmentUse::Decode);
  Tensor src = Tensor::empty({1, static_cast<int64_t>(context.size())}, DType::I32);
  std::copy(context.begin(), context.end(), src.i32());
  std::vector<int32_t> out;
  for (int64_t step = 0; step < p.max_len; ++step) {
    Tensor hidden = model.features(src, {.state = state.get()}).value();  // [1, T, C]
    const int64_t T = hidden.dim(1), C = hidden.dim(2);
    Tensor last = Tensor::empty({1, C});
    std::copy_n(hidden.f32() + (T - 1) * C, C, last.f32());
    Tensor logits = model.head().log_scores(last);  // [1, V]
    if (const int64_t v = first_nan(logits.f32(), V); v >= 0)
      throw Error(ErrorKind::Numeric,
                  "generate: the model's scores are NaN (or +inf) at step " + std::to_string(step + 1) +
                      " of at most " + std::to_string(p.max_len) + " (first at token id " + std::to_string(v) + ")",
                  kNanHint);
    int32_t next = sample_from_logits(logits.f32(), V, p, rng, banned);
    out.push_back(next);
    if (log_probs) log_probs->push_back(log_softmax_at(logits.f32(), V, next));
    if (next == p.stop_token) break;
    src = Tensor::empty({1, 1}, DType::I32);
    src.i32()[0] = next;
  }
  return out;
}

data::Dictionary generation_dictionary(const GenerateConfig& c, const models::ModelFile& ck, int64_t vocab) {
  if (c.data.empty()) {
    if (ck.dictionary.empty())
      fail_usage("generate: " + c.path + " has no dictionary inside (written before stretch stored it, or a fairseq "
                 "checkpoint, which never holds one)",
                 "give the data-bin directory the model was trained on: `stretch generate DATA --path " + c.path + "`");
    data::Dictionary dict = data::Dictionary::parse(ck.dictionary, c.path + " (stored dictionary)");
    if (dict.content_hash() != ck.dict_hash || dict.size() != vocab)
      fail_input(c.path, "its stored dictionary (hash " + dict.content_hash() + ", " + std::to_string(dict.size()) +
                             " symbols) does not match the model (hash " + ck.dict_hash + ", vocabulary " +
                             std::to_string(vocab) + ")",
                 "the file is damaged; give the data-bin directory the model was trained on");
    return dict;
  }
  const std::string dict_path = (std::filesystem::path(c.data) / "dict.txt").string();
  data::Dictionary dict = data::Dictionary::load(dict_path);
  if (dict.size() != vocab)
    fail_input(dict_path, "has " + std::to_string(dict.size()) + " symbols but the checkpoint's vocabulary is " +
                              std::to_string(vocab),
               "give the data-bin directory the model was trained on");
  if (!models::dictionary_matches(ck, dict.content_hash()))
    fail_input(dict_path, "is not the dictionary the checkpoint was trained with (hash " + dict.content_hash() +
                              ", checkpoint " + ck.dict_hash + ")",
               "give the data-bin directory the model was trained on");
  return dict;
}

std::vector<std::string> generate_samples(models::LanguageModel& model, const data::Dictionary& dict,
                                          const GenerateConfig& c,
                                          const std::function<void(const std::string&)>& on_sample) {
  check_sampling_params(c.sampling);
  // fairseq's LanguageModelingTask.inference_step conditions on <s> instead of </s> when the
  // task has --add-bos-token (sequence_generator: tokens[:, 0] = bos_token), the prompt after it.
  std::vector<int32_t> context = {model.info().add_bos_token ? dict.bos() : dict.eos()};
  const bool bytes = dict.is_byte_level();
  if (bytes) {
    auto ids = dict.byte_ids();
    for (unsigned char ch : c.prompt) context.push_back(ch == '\n' ? dict.eos() : ids[ch]);
  } else if (!c.prompt.empty()) {
    std::vector<int32_t> ids = dict.encode_line(c.prompt);
    ids.pop_back();  // encode_line appends </s>; the prompt continues instead
    context.insert(context.end(), ids.begin(), ids.end());
  }
  SamplingParams sp = c.sampling;
  const std::vector<int32_t> banned = banned_ids(dict);
  Rng rng(c.seed, 0x9e4);
  std::vector<std::string> samples;
  for (int64_t n = 0; n < c.nbest; ++n) {
    std::vector<double> log_probs;
    std::vector<int32_t> out = generate_tokens(model, context, sp, rng, banned, c.print_scores ? &log_probs : nullptr);
    if (bytes) {  // the prompt as given (a byte the dictionary lacks went in as <unk>), then new bytes
      samples.push_back(c.prompt + dict.decode_bytes(out));
    } else {
      std::vector<int32_t> all(context.begin() + 1, context.end());
      all.insert(all.end(), out.begin(), out.end());
      samples.push_back(dict.decode(all, data::Dictionary::EosInDecode::Keep));
    }
    if (c.print_scores) {
      std::string ids = "\nids\t", lps = "\nlogprobs\t";
      char buf[32];
      for (size_t i = 0; i < out.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%.9g", log_probs[i]);
        if (i > 0) {
          ids += ' ';
          lps += ' ';
        }
        ids += std::to_string(out[i]);
        lps += buf;
      }
      samples.back() += ids + lps;
    }
    if (on_sample) on_sample(samples.back());
  }
  return samples;
}

int run_generate(const GenerateConfig& c) {
  check_sampling_params(c.sampling);
  models::ModelFile ck;
  auto model = load_eval_model(c.path, c.overrides, &ck);
  require_decoder(model->info(), c.path, "generate");
  const data::Dictionary dict = generation_dictionary(c, ck, model->info().vocab_size);
  // Each sample printed as soon as it is drawn (a long --nbest run shows its first ones at once).
  generate_samples(*model, dict, c, [](const std::string& s) { std::cout << s << "\n"; });
  return 0;
}

}  // namespace stretch::eval
