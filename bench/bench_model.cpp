// bench/bench_model.cpp — stretch's side of bench/compare.py: the real transformer_lm, optimizer,
// clipping and eval-lm scorer timed on synthetic batches, one JSON line per measurement, with
// the same fields as bench/torch_lm.py so the two can be put side by side.
//
//   train  tokens/s, step time and peak RSS of full training steps exactly as stretch train runs
//          them (zero grads, forward with dropout, summed cross-entropy, backward, grads / ntokens,
//          clip 0.1, NAG step, lr 1e-3, momentum 0.99) at --batch B x --tokens-per-sample T;
//          --checkpoint-activations recomputes the blocks in backward (bench/checkpoint_activations.sh)
//   eval   tokens/s and peak RSS of eval::evaluate (the eval-lm code: non-overlapping windows,
//          B = 1, log-softmax only at scored rows) on one window of each of --lengths; each
//          length in a fresh process so VmHWM is that length's own peak; "loss" = Σ −log p in
//          nats of the window's random targets (the same weights for fp32 and --bf16);
//          with --checkpoint PATH --data DIR: that trained model on DIR's valid split, all of it
//          in windows of each length ("loss" = Σ −log p over the split)
//   Both print "tiles_skipped_frac", the attention's share of (query tile, key tile) pairs skipped
//   as negligible (ops/attention.h, TileSkipping; --no-tile-skipping visits them all).
//
// Figures per measurement: tokens per wall second, tokens per CPU second of the process,
// model FLOP/s per CPU second ("mfu_cpu" = that rate / P, P = this host's fp32 FMA peak per core
// with --threads busy, measured at startup by core/peak_flops.h or given by --peak-gflops;
// "mfu_wall" = FLOP/s per wall second / (threads · P)); with --bf16 also "mfu_cpu_of_bf16_peak"
// against the measured bf16 peak: AMX tiles' where the CPU has AMX (oneDNN's bf16 products run
// there), else vdpbf16ps's ("bf16_peak_unit": "amx" or "avx512_bf16"; absent where the CPU has
// neither or the products ran as fp32 FMAs, which "mfu_cpu" measures), and "bf16_products": how
// --bf16 ran its products here ("native", "native-fp32-attention", or "fp32": FMAs on bf16 values, cli/bf16_speed.h's
// choice, as stretch train makes it). "peak_gflops_per_core", "cpu_family" and "cpu_model" say
// what was divided by.
// FLOPs: 6·N per trained token (2·N evaluated) with N the weights of the matrix products (every
// Linear and the output projection; the input embedding is a lookup), plus causal attention:
// 2·L·T·C per token forward (QKᵀ and PV over the visible half), three times that in training.
//
// Example:
//   build/bench/bench_model train --threads 1 --vocab 256 --tokens-per-sample 128
//   build/bench/bench_model eval --threads 1 --vocab 33280 --lengths 512,4096
#include <CLI/CLI.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "cli/bf16_speed.h"
#include "core/rng.h"
#include "core/threads.h"
#include "data/indexed_dataset.h"
#include "eval/eval_lm.h"
#include "models/registry.h"
#include "train/lm_data.h"
#include "ops/attention.h"
#include "ops/gemm.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"
#include "core/peak_flops.h"

using namespace stretch;

namespace {

// fp32 (and bf16, 0 = none) FLOP/s per core with the benchmark's threads busy; set in main().
double g_core_peak = 0, g_core_peak_bf16 = 0;
std::string g_bf16_peak_unit = "given";  // measured: "amx" or "avx512_bf16"
CpuInfo g_cpu;

struct Args {
  std::string mode;
  int threads = 1;
  std::string arch = "transformer_lm_small";
  std::string pos = "alibi";
  int64_t vocab = 33280, batch = 8, tokens_per_sample = 512;
  int64_t layers = 0, embed_dim = 0, heads = 0, ffn_dim = 0;  // 0: the preset's
  float dropout = 0.1f;
  std::string lengths = "512,1024,2048,4096,8192";
  int warmup = 2, steps = 5;
  bool no_isolate = false;
  bool bf16 = false;
  bool checkpoint_activations = false;  // train: ForwardOptions::activations = Recompute
  bool no_tile_skipping = false;        // ops::TileSkipping::Off: visit negligible key tiles too
  uint64_t seed = 1;
  std::string model_json = "{}";  // extra model config keys (fairseq names), e.g. the adaptive softmax's
  std::string checkpoint, data;    // eval: a trained model and its data-bin (valid split) instead
};

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
double peak_rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return NAN;
}

// The transformer_lm config (fairseq keys) of the benchmark's flags.
nlohmann::json make_config(const Args& a, int64_t T) {
  nlohmann::json given = {{"vocab_size", a.vocab}, {"pos", a.pos}, {"dropout", a.dropout}};
  if (a.layers > 0) given["decoder_layers"] = a.layers;
  if (a.embed_dim > 0) given["decoder_embed_dim"] = a.embed_dim;
  if (a.heads > 0) given["decoder_attention_heads"] = a.heads;
  if (a.ffn_dim > 0) given["decoder_ffn_embed_dim"] = a.ffn_dim;
  const nlohmann::json extra = nlohmann::json::parse(a.model_json);
  if (!extra.is_object()) fail_usage("--model-json must be a JSON object, got " + a.model_json);
  for (auto it = extra.begin(); it != extra.end(); ++it) given[it.key()] = it.value();
  nlohmann::json c = models::resolve_config(a.arch, given, T);
  c["max_target_positions"] = std::max<int64_t>(512, T);
  return c;
}

struct Dims {
  double V, L, C, F;
  explicit Dims(const nlohmann::json& c)
      : V(c.at("vocab_size").get<double>()), L(c.at("decoder_layers").get<double>()),
        C(c.at("decoder_embed_dim").get<double>()), F(c.at("decoder_ffn_embed_dim").get<double>()) {}
};

// Weights of the matrix products: 4·C² + 2·C·F per layer, plus V·C for the output projection.
double matmul_params(const Dims& d) { return d.L * (4 * d.C * d.C + 2 * d.C * d.F) + d.V * d.C; }
// Forward FLOPs per token at context T (causal attention: the visible half).
double forward_flops_per_token(const Dims& d, int64_t T) {
  return 2 * matmul_params(d) + 2.0 * d.L * static_cast<double>(T) * d.C;
}

nlohmann::json base_record(const Args& a, const Dims& c) {
  nlohmann::json r = {{"bench", "stretch"},       {"mode", a.mode},
          {"pos", a.pos},             {"V", static_cast<int64_t>(c.V)},
          {"L", static_cast<int64_t>(c.L)},    {"C", static_cast<int64_t>(c.C)},
          {"threads", num_threads()}, {"params", static_cast<double>(0)},
          {"head", nlohmann::json::parse(a.model_json).value("adaptive_softmax_cutoff", std::string()).empty()
                       ? "softmax"
                       : "adaptive"},
          {"precision", a.bf16 ? "bf16" : "fp32"}};
  if (a.bf16) r["bf16_products"] = ops::bf16_products_name(ops::bf16_products());
  return r;
}

std::vector<int32_t> random_tokens(Rng& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& t : out) t = 4 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab - 4)));
  return out;
}

void add_rates(nlohmann::json& r, double tokens, double flops_per_token, double wall, double cpu, int threads) {
  r["tokens_per_s"] = std::round(tokens / wall * 10) / 10;
  r["tokens_per_cpu_s"] = std::round(tokens / cpu * 10) / 10;
  r["mfu_cpu"] = std::round(tokens * flops_per_token / cpu / g_core_peak * 1000) / 1000;
  r["mfu_wall"] = std::round(tokens * flops_per_token / wall / (threads * g_core_peak) * 1000) / 1000;
  if (r.value("precision", "") == "bf16" && r.value("bf16_products", "fp32") != "fp32" && g_core_peak_bf16 > 0) {
    r["mfu_cpu_of_bf16_peak"] = std::round(tokens * flops_per_token / cpu / g_core_peak_bf16 * 1000) / 1000;
    r["bf16_peak_unit"] = g_bf16_peak_unit;
  }
  r["peak_gflops_per_core"] = std::round(g_core_peak / 1e8) / 10;
  r["cpu_family"] = g_cpu.family;
  r["cpu_model"] = g_cpu.model;
  r["gemm"] = ops::gemm_library_name(ops::gemm_library());  // the plain fp32 products' library
}

// The attention's (query tile, key tile) pairs of the timed steps and the share it skipped as
// negligible (ops/attention.h, TileSkipping); the MFU fields still count every causal pair.
void add_tile_counts(nlohmann::json& r) {
  const ops::AttentionTileCounts n = ops::attention_tile_counts(true);
  r["tile_skipping"] = ops::attention_tile_skipping() == ops::TileSkipping::On;
  const double all = static_cast<double>(n.visited + n.skipped);
  r["tiles_skipped_frac"] = all > 0 ? std::round(1e4 * static_cast<double>(n.skipped) / all) / 1e4 : 0.0;
}

void run_train(const Args& a) {
  const int64_t B = a.batch, T = a.tokens_per_sample;
  auto model_ptr = models::build_model(make_config(a, T));
  models::LanguageModel& model = *model_ptr;
  model.init(a.seed);
  const Dims c(model.config_json());
  const int64_t vocab = model.info().vocab_size;
  std::vector<optim::OptimParam> params;
  for (const auto& [name, var] : model.params().items()) params.push_back({name, var.data(), var.grad_data(), var.numel()});
  auto optimizer = optim::make_optimizer({.kind = optim::OptimizerKind::Nag, .momentum = 0.99});
  Rng rng(a.seed, 7);
  Tensor src = Tensor::empty({B, T}, DType::I32), tgt = Tensor::empty({B, T}, DType::I32);
  auto s = random_tokens(rng, B * T, vocab), t = random_tokens(rng, B * T, vocab);
  std::copy(s.begin(), s.end(), src.i32());
  std::copy(t.begin(), t.end(), tgt.i32());
  int64_t update = 0;
  auto step = [&] {
    model.params().zero_grad();
    autograd::Var hidden = model.features(
        src, {.mode = models::Mode::Train,
              .seed = a.seed,
              .step = static_cast<uint64_t>(update),
              .micro = 0,
              .activations = a.checkpoint_activations ? autograd::Activations::Recompute : autograd::Activations::Keep});
    autograd::Var loss = model.head().loss(hidden, tgt, model.info().padding_idx, nn::LossUse::Training).loss;
    autograd::tape().backward(loss);
    const optim::GradScale scale = optim::scale_and_clip_factor(params, 1.0 / static_cast<double>(B * T), 0.1);
    optimizer->step(params, 1e-3, scale.factor);  // as train/update.cpp: the multiply inside NAG's pass
    ++update;
  };
  for (int i = 0; i < a.warmup; ++i) step();
  ops::attention_tile_counts(true);
  const double w0 = wall_now(), c0 = cpu_now();
  for (int i = 0; i < a.steps; ++i) step();
  const double wall = (wall_now() - w0) / a.steps, cpu = (cpu_now() - c0) / a.steps;
  nlohmann::json r = base_record(a, c);
  r["params"] = model.params().numel();
  r["B"] = B;
  r["T"] = T;
  add_rates(r, static_cast<double>(B * T), 3 * forward_flops_per_token(c, T), wall, cpu, num_threads());
  add_tile_counts(r);
  r["step_s"] = std::round(wall * 1e4) / 1e4;
  r["steps"] = a.steps;
  r["checkpoint_activations"] = a.checkpoint_activations;
  r["peak_rss_mb"] = std::round(peak_rss_mb() * 10) / 10;
  std::printf("%s\n", r.dump().c_str());
  std::fflush(stdout);
}

void run_eval_one(const Args& a, int64_t T) {
  std::unique_ptr<models::LanguageModel> model_ptr;
  std::shared_ptr<const data::TokenStream> stream_ptr;
  eval::EvalOptions o;
  if (a.checkpoint.empty()) {
    model_ptr = models::build_model(make_config(a, T));
    model_ptr->init(a.seed);
    Rng rng(a.seed, 9);
    stream_ptr = std::make_shared<data::MemoryTokenStream>(random_tokens(rng, T, model_ptr->info().vocab_size),
                                                           std::vector<int64_t>{T});
  } else {  // as stretch eval-lm CHECKPOINT --path DATA --gen-subset valid --tokens-per-sample T
    model_ptr = eval::load_eval_model(a.checkpoint, nlohmann::json::object(), nullptr);
    const train::LmData d = train::open_lm_data(a.data);
    stream_ptr = train::open_split_stream(a.data, "valid", d);
    o.bos = d.bos, o.pad = d.pad, o.eos = d.eos;
  }
  models::LanguageModel& model = *model_ptr;
  const data::TokenStream& stream = *stream_ptr;
  const Dims c(model.config_json());
  o.tokens_per_sample = T;
  o.max_sentences = 1;
  for (int i = 0; i < a.warmup; ++i) eval::evaluate(model, stream, o);
  ops::attention_tile_counts(true);
  const double w0 = wall_now(), c0 = cpu_now();
  eval::EvalResult res;
  for (int i = 0; i < a.steps; ++i) res = eval::evaluate(model, stream, o);
  const double wall = (wall_now() - w0) / a.steps, cpu = (cpu_now() - c0) / a.steps;
  nlohmann::json r = base_record(a, c);
  r["loss"] = res.nll_sum;  // Σ −log p in nats over the window (bench/torch_lm.py's "loss")
  r["params"] = model.params().numel();
  r["B"] = 1;
  r["T"] = T;
  if (!a.checkpoint.empty()) r["checkpoint"] = a.checkpoint, r["scored"] = res.count;
  add_rates(r, static_cast<double>(res.count), forward_flops_per_token(c, T), wall, cpu, num_threads());
  add_tile_counts(r);
  r["pass_s"] = std::round(wall * 1e4) / 1e4;
  r["steps"] = a.steps;
  r["peak_rss_mb"] = std::round(peak_rss_mb() * 10) / 10;
  std::printf("%s\n", r.dump().c_str());
  std::fflush(stdout);
}

std::vector<int64_t> parse_lengths(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(std::stoll(item));
  if (out.empty()) fail_usage("--lengths '" + s + "' names no length", "e.g. --lengths 512,4096");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"stretch model benchmark: one JSON line per measurement (see bench/compare.py)"};
  app.add_option("mode", a.mode, "train | eval")->required()->check(CLI::IsMember({"train", "eval"}));
  app.add_option("--threads", a.threads, "OpenMP / oneDNN threads");
  double peak_gflops = 0, peak_gflops_bf16 = -1;
  app.add_option("--peak-gflops", peak_gflops,
                 "fp32 peak per core in GFLOP/s for the MFU fields (0: measure it now, core/peak_flops.h)");
  app.add_option("--peak-gflops-bf16", peak_gflops_bf16, "bf16 peak per core in GFLOP/s (0: none; -1: measure)");
  app.add_option("--arch", a.arch, "preset the sizes start from");
  app.add_option("--pos", a.pos, "position method");
  app.add_option("--vocab", a.vocab, "V");
  app.add_option("--batch", a.batch, "B (train)");
  app.add_option("--tokens-per-sample", a.tokens_per_sample, "T (train)");
  app.add_option("--layers", a.layers, "L (0: preset)");
  app.add_option("--embed-dim", a.embed_dim, "C (0: preset)");
  app.add_option("--heads", a.heads, "H (0: preset)");
  app.add_option("--ffn-dim", a.ffn_dim, "F (0: preset)");
  app.add_option("--dropout", a.dropout, "dropout (train)");
  app.add_option("--lengths", a.lengths, "eval: comma-separated T");
  app.add_option("--warmup", a.warmup, "untimed steps first");
  app.add_option("--steps", a.steps, "timed steps / passes");
  app.add_option("--seed", a.seed, "seed");
  app.add_option("--model-json", a.model_json,
                 "extra model config keys, e.g. '{\"adaptive_softmax_cutoff\":\"20000,60000\"}' (the mfu fields "
                 "count the full softmax's FLOPs whatever the head)");
  app.add_flag("--no-isolate", a.no_isolate, "eval: all lengths in this process");
  app.add_option("--checkpoint", a.checkpoint, "eval: a trained checkpoint instead of random weights (with --data)");
  app.add_option("--data", a.data, "eval: the checkpoint's data-bin; its valid split is scored");
  app.add_flag("--checkpoint-activations", a.checkpoint_activations,
               "train: recompute each block's activations in backward, as stretch train --checkpoint-activations");
  app.add_flag("--bf16", a.bf16, "bf16 matrix products (fp32 accumulation), as stretch train --bf16");
  app.add_flag("--no-tile-skipping", a.no_tile_skipping,
               "the attention visits key tiles whose probabilities all flush to zero (bitwise the same results)");
  CLI11_PARSE(app, argc, argv);
  try {
    set_num_threads(a.threads);
    g_cpu = cpu_info();
    if (peak_gflops <= 0 || peak_gflops_bf16 < 0) {
      const Peak p = measure_peak(g_cpu, a.threads, 0.2);
      if (peak_gflops <= 0) peak_gflops = p.fp32_n() / a.threads;
      if (peak_gflops_bf16 < 0) {
        peak_gflops_bf16 = p.bf16_peak_n() > 0 ? p.bf16_peak_n() / a.threads : 0;
        g_bf16_peak_unit = p.amx_n > 0 ? "amx" : "avx512_bf16";
      }
    }
    g_core_peak = peak_gflops * 1e9;
    g_core_peak_bf16 = peak_gflops_bf16 * 1e9;
    if (a.bf16) {
      ops::set_matmul_precision(ops::GemmPrecision::Bf16);
      cli::apply_bf16_products("--bf16");  // as stretch train --bf16 chooses (STRETCH_BF16_PRODUCTS overrides)
    }
    if (a.no_tile_skipping) ops::set_attention_tile_skipping(ops::TileSkipping::Off);
    if (a.checkpoint.empty() != a.data.empty())
      fail_usage("--checkpoint and --data go together", "give both or neither");
    if (a.mode == "train") {
      run_train(a);
    } else {
      const auto lengths = parse_lengths(a.lengths);
      if (lengths.size() == 1 || a.no_isolate) {
        for (int64_t T : lengths) run_eval_one(a, T);
      } else {
        for (int64_t T : lengths) {  // a fresh process per length: VmHWM is then that length's own
          std::string cmd;
          for (int i = 0; i < argc; ++i) {
            const std::string arg = argv[i];
            if (arg == "--lengths") {
              ++i;  // replaced below
              continue;
            }
            if (arg.rfind("--lengths=", 0) == 0) continue;
            cmd += "'" + arg + "' ";
          }
          cmd += "--lengths " + std::to_string(T) + " --no-isolate";
          if (std::system(cmd.c_str()) != 0) return 1;
        }
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
