// python/stretch_module.cpp — `import stretch`: the library behind the `stretch` binary, from Python
// (docs/python.md). pybind11 (Debian's pybind11-dev); built by CMake as build/python/stretch/_stretch*.so.
// Contract:
//   * Nothing is re-implemented here: scoring is eval::evaluate (eval-lm's protocols, windows and
//     batching), eval_lm() is eval::prepare_eval_lm + evaluate_split (what `stretch eval-lm` runs),
//     generate is eval::generate_samples (what `stretch generate` prints, same seed → same text),
//     sweep() is eval::sweep_table (the table `stretch sweep` prints). Same threads → same numbers.
//   * Arrays: per-token NLL in nats as float64 [N] (±inf where the model gave ±inf: eval-lm drops
//     those from the mean, and so does "loss"), token ids as int32 [N], weights as float32 copies.
//   * Every stretch::Error becomes stretch.Error (a RuntimeError; usage errors stretch.UsageError,
//     also a ValueError) whose text is the binary's message without "stretch: error: ".
//   * The GIL is released while stretch computes; OpenMP threads: set_threads(n) (0: the environment's).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/overrides.h"
#include "core/error.h"
#include "core/threads.h"
#include "data/binarizer.h"
#include "data/dictionary.h"
#include "data/indexed_dataset.h"
#include "eval/eval_lm.h"
#include "eval/generate.h"
#include "eval/sweep.h"
#include "models/model_file.h"
#include "stretch/version.h"

namespace py = pybind11;
using namespace pybind11::literals;
using namespace stretch;

namespace {

// JSON <-> Python through the json module (configs are small).
py::object to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }
nlohmann::json to_json(const py::handle& obj) {
  return nlohmann::json::parse(py::module_::import("json").attr("dumps")(obj).cast<std::string>());
}

// --model-overrides as eval-lm takes it: a dict, or the fairseq text "{'tokens_per_sample': 1024}".
nlohmann::json overrides_json(const py::object& o) {
  if (o.is_none()) return nlohmann::json::object();
  if (py::isinstance<py::str>(o)) return cli::parse_model_overrides(o.cast<std::string>());
  if (!py::isinstance<py::dict>(o)) fail_usage("model_overrides must be a dict or a string like \"{'key': value}\"");
  return to_json(o);
}

template <typename T>
py::array_t<T> to_numpy(const std::vector<T>& v) {
  py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
  return a;
}

// Per-token scores in stream order, filled by EvalOptions::on_score.
struct TokenScores {
  std::vector<double> nll;       // [N] nats; NaN where not scored (an interrupted evaluation never returns)
  std::vector<int32_t> target;   // [N]
  void attach(eval::EvalOptions& o, int64_t total) {
    nll.assign(static_cast<size_t>(total), std::numeric_limits<double>::quiet_NaN());
    target.assign(static_cast<size_t>(total), 0);
    o.on_score = [this](int64_t offset, int32_t y, double v) {
      nll[static_cast<size_t>(offset)] = v;
      target[static_cast<size_t>(offset)] = y;
    };
  }
};

py::dict result_dict(const eval::EvalResult& r, const TokenScores& s) {
  py::dict d = to_python(eval::eval_result_json(r)).cast<py::dict>();
  d["loss"] = r.loss2;  // base 2, as eval-lm prints "Loss (base 2)"
  d["nll"] = to_numpy(s.nll);
  d["targets"] = to_numpy(s.target);
  return d;
}

struct ScoreArgs {
  int64_t tokens_per_sample = 0, context_window = 0, stride = 0, max_sentences = 0, max_tokens = 0;
  bool kv_cache = false;
  eval::EvalOptions options() const {
    eval::EvalOptions o;
    o.tokens_per_sample = tokens_per_sample;
    o.context_window = context_window;
    o.stride = stride;
    o.max_sentences = max_sentences;
    o.max_tokens = max_tokens;
    o.protocol = kv_cache ? eval::EvalProtocol::KvCache : eval::EvalProtocol::Windows;
    return o;
  }
};

// A loaded model file (stretch model file, training checkpoint, or fairseq .pt imported in memory).
class Model {
 public:
  Model(const std::string& path, const py::object& overrides, const std::string& data) : path_(path), data_(data) {
    overrides_ = overrides_json(overrides);
    model_ = eval::load_eval_model(path, overrides_, &file_);
    file_.file.tensors.clear();  // the weights live in the model now
  }

  py::dict info() const {
    const models::ModelInfo i = model_->info();
    py::dict d;
    d["arch"] = i.arch, d["family"] = i.family, d["vocab_size"] = i.vocab_size, d["padding_idx"] = i.padding_idx;
    d["tokens_per_sample"] = i.tokens_per_sample, d["label"] = i.label, d["summary"] = i.summary;
    d["format"] = file_.format, d["path"] = path_;
    return d;
  }
  py::object config() const { return to_python(model_->config_json()); }

  // The dictionary generate would use (DATA/dict.txt when load() was given data=, else the file's).
  const data::Dictionary& dictionary() {
    if (!dict_) {
      eval::GenerateConfig c;
      c.data = data_, c.path = path_;
      dict_ = std::make_unique<data::Dictionary>(eval::generation_dictionary(c, file_, model_->info().vocab_size));
    }
    return *dict_;
  }

  // Text as `stretch preprocess` binarizes it: one item per line, each ending with </s>.
  std::vector<std::vector<int32_t>> encode_items(const std::string& text) {
    const data::Dictionary& d = dictionary();
    return data::binarize_text(text, d, d.is_byte_level() ? data::TokenMode::Byte : data::TokenMode::Text);
  }
  py::array_t<int32_t> encode(const std::string& text) {
    std::vector<int32_t> flat;
    for (const auto& item : encode_items(text)) flat.insert(flat.end(), item.begin(), item.end());
    return to_numpy(flat);
  }
  std::string decode(const std::vector<int32_t>& ids) {
    const data::Dictionary& d = dictionary();
    for (int32_t id : ids)
      if (id < 0 || id >= d.size())
        fail_usage("decode: token id " + std::to_string(id) + " is outside the dictionary [0, " +
                   std::to_string(d.size()) + ")");
    return d.is_byte_level() ? d.decode_bytes(ids) : d.decode(ids, data::Dictionary::EosInDecode::Keep);
  }

  // eval-lm's protocols on a token stream (ids) or on text (binarized as preprocess does).
  py::dict score(const py::object& input, const ScoreArgs& a) {
    std::vector<std::vector<int32_t>> items;
    if (py::isinstance<py::str>(input)) {
      items = encode_items(input.cast<std::string>());
    } else {
      py::array_t<int64_t, py::array::c_style | py::array::forcecast> ids(input);
      if (ids.ndim() != 1) fail_usage("score: token ids must be one-dimensional (the stream), got " +
                                      std::to_string(ids.ndim()) + " dimensions");
      std::vector<int32_t> flat(static_cast<size_t>(ids.size()));
      const int64_t V = model_->info().vocab_size;
      for (py::ssize_t i = 0; i < ids.size(); ++i) {
        const int64_t v = ids.data()[i];
        if (v < 0 || v >= V)
          fail_usage("score: token id " + std::to_string(v) + " at index " + std::to_string(i) +
                     " is outside the vocabulary [0, " + std::to_string(V) + ")");
        flat[static_cast<size_t>(i)] = static_cast<int32_t>(v);
      }
      items.push_back(std::move(flat));
    }
    data::MemoryTokenStream stream(items);
    if (stream.total_tokens() == 0) fail_usage("score: nothing to score (no tokens)");
    eval::EvalOptions o = a.options();
    o.pad = model_->info().padding_idx;
    o.eos = dict_ ? dict_->eos() : 2;
    TokenScores s;
    s.attach(o, stream.total_tokens());
    eval::EvalResult r;
    {
      py::gil_scoped_release unlocked;
      r = eval::evaluate(*model_, stream, o);
    }
    return result_dict(r, s);
  }

  std::vector<std::string> generate(const std::string& prompt, int64_t max_len, float temperature, int64_t top_k,
                                    float top_p, uint64_t seed, int64_t nbest, bool stop_at_eos) {
    if (nbest < 1) fail_usage("generate: nbest " + std::to_string(nbest) + " must be at least 1");
    eval::GenerateConfig c;
    c.path = path_, c.data = data_, c.prompt = prompt, c.seed = seed, c.nbest = nbest;
    c.sampling = {.max_len = max_len, .temperature = temperature, .top_k = top_k, .top_p = top_p,
                  .stop_token = -1};
    const data::Dictionary& d = dictionary();
    if (stop_at_eos) c.sampling.stop_token = d.eos();
    py::gil_scoped_release unlocked;
    return eval::generate_samples(*model_, d, c);
  }

  // Parameters under fairseq's state-dict names (a tied parameter once, under its input-side name).
  py::dict state_dict() const {
    py::dict d;
    for (const auto& [name, v] : model_->params().items()) {
      const Tensor& t = v.value();
      py::array_t<float> a(t.shape().dims());
      std::memcpy(a.mutable_data(), t.f32(), static_cast<size_t>(t.numel()) * sizeof(float));
      d[py::str(name)] = a;
    }
    return d;
  }

  // Copies every parameter from `d` (the same names and shapes as state_dict(); all or nothing).
  void load_state_dict(const py::dict& d) {
    std::set<std::string> known;
    std::vector<std::pair<autograd::Var, py::array_t<float, py::array::c_style | py::array::forcecast>>> staged;
    for (const auto& [name, v] : model_->params().items()) {
      known.insert(name);
      if (!d.contains(name))
        fail_usage("load_state_dict: parameter '" + name + "' is missing", "give every key of state_dict()");
      py::array_t<float, py::array::c_style | py::array::forcecast> a(d[py::str(name)]);
      std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
      if (Shape(shape) != v.shape())
        fail_usage("load_state_dict: parameter '" + name + "' has shape " + Shape(shape).str() + ", the model's is " +
                   v.shape().str());
      staged.emplace_back(v, std::move(a));
    }
    for (const auto& item : d) {
      const std::string key = py::str(item.first);
      if (!known.count(key))
        fail_usage("load_state_dict: '" + key + "' is not a parameter of this model",
                   "state_dict() lists the names (fairseq's; a tied parameter once)");
    }
    for (auto& [v, a] : staged) std::memcpy(v.data(), a.data(), static_cast<size_t>(v.numel()) * sizeof(float));
  }

  // A stretch model file (what eval-lm, sweep and generate read) with the current weights.
  void save(const std::string& path) const {
    models::ModelFileWrite w;
    w.dict_hash = file_.dict_hash;
    w.dictionary = file_.dictionary;
    models::write_model_file(path, *model_, w);
  }

 private:
  std::string path_, data_;
  nlohmann::json overrides_;
  models::ModelFile file_;
  std::unique_ptr<models::LanguageModel> model_;
  std::unique_ptr<data::Dictionary> dict_;
};

py::dict eval_lm(const std::string& data, const std::string& path, const std::string& gen_subset, const ScoreArgs& a,
                 const py::object& overrides, bool alibi_interpolate) {
  eval::EvalLmConfig cfg;
  cfg.data = data, cfg.path = path, cfg.gen_subset = gen_subset;
  cfg.options = a.options();
  cfg.overrides = overrides_json(overrides);
  cfg.alibi_interpolate = alibi_interpolate;
  eval::EvalResult r;
  TokenScores s;
  {
    py::gil_scoped_release unlocked;
    eval::EvalLmSetup setup = eval::prepare_eval_lm(cfg);
    eval::EvalOptions o = setup.options;
    s.attach(o, setup.stream->total_tokens());
    r = eval::evaluate_split(setup, cfg, o);
  }
  py::dict d = result_dict(r, s);
  d["split"] = gen_subset, d["checkpoint"] = path;
  return d;
}

py::dict sweep(const std::string& data, const std::vector<std::string>& paths, const std::vector<int64_t>& lengths,
               const std::string& gen_subset, const std::vector<std::string>& labels, const ScoreArgs& a, bool sliding,
               bool alibi_interpolate) {
  eval::SweepConfig cfg;
  cfg.data = data, cfg.paths = paths, cfg.lengths = lengths, cfg.gen_subset = gen_subset, cfg.labels = labels;
  cfg.options = a.options();
  cfg.sliding = sliding, cfg.alibi_interpolate = alibi_interpolate;
  std::vector<eval::SweepRow> rows;
  {
    py::gil_scoped_release unlocked;
    rows = eval::sweep_table(cfg);
  }
  py::list out;
  for (const eval::SweepRow& row : rows) {
    std::vector<double> ppl, loss;
    std::vector<int64_t> tokens;
    std::vector<std::string> notes;
    for (const eval::SweepCell& c : row.cells)
      ppl.push_back(c.ppl), loss.push_back(c.loss2), tokens.push_back(c.tokens), notes.push_back(c.note);
    py::dict r;
    r["label"] = row.label, r["path"] = row.path, r["train_length"] = row.train_length;
    r["ppl"] = to_numpy(ppl), r["loss"] = to_numpy(loss), r["tokens"] = to_numpy(tokens), r["notes"] = notes;
    out.append(r);
  }
  py::dict d;
  d["lengths"] = to_numpy(lengths);
  d["split"] = gen_subset;
  d["protocol"] = eval::sweep_protocol(cfg);
  d["rows"] = out;
  d["markdown"] = eval::sweep_markdown(rows, lengths);
  return d;
}

}  // namespace

PYBIND11_MODULE(_stretch, m) {
  m.doc() = "stretch: train short, test long (docs/python.md)";
  m.attr("__version__") = STRETCH_VERSION;
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static py::object usage_error = [&] {
    py::object builtins = py::module_::import("builtins");
    py::object t = builtins.attr("type")("UsageError", py::make_tuple(error, builtins.attr("ValueError")),
                                         py::dict("__doc__"_a = "a bad argument: the binary's exit-2 errors"));
    m.attr("UsageError") = t;
    return t;
  }();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString((e.kind() == ErrorKind::Usage ? usage_error : py::object(error)).ptr(), e.what());
    }
  });

  auto score_args = [](int64_t tokens_per_sample, int64_t context_window, int64_t stride, int64_t max_sentences,
                       int64_t max_tokens, bool kv_cache) {
    return ScoreArgs{tokens_per_sample, context_window, stride, max_sentences, max_tokens, kv_cache};
  };

  py::class_<Model>(m, "Model", "a model file loaded for evaluation: stretch.load(path)")
      .def(py::init<const std::string&, const py::object&, const std::string&>(), py::arg("path"),
           py::arg("model_overrides") = py::none(), py::arg("data") = "")
      .def_property_readonly("info", &Model::info)
      .def_property_readonly("config", &Model::config)
      .def("encode", &Model::encode, py::arg("text"), "text -> int32 ids as `stretch preprocess` binarizes it")
      .def("decode", &Model::decode, py::arg("ids"))
      .def(
          "score",
          [score_args](Model& self, const py::object& input, int64_t tokens_per_sample, int64_t context_window,
                       int64_t stride, int64_t max_sentences, int64_t max_tokens, bool kv_cache) {
            return self.score(input, score_args(tokens_per_sample, context_window, stride, max_sentences, max_tokens,
                                                kv_cache));
          },
          py::arg("input"), py::kw_only(), py::arg("tokens_per_sample") = 0, py::arg("context_window") = 0,
          py::arg("stride") = 0, py::arg("max_sentences") = 0, py::arg("max_tokens") = 0, py::arg("kv_cache") = false,
          "per-token NLL (nats) of a token stream or text with eval-lm's protocols")
      .def("generate", &Model::generate, py::arg("prompt") = "", py::kw_only(), py::arg("max_len") = 50,
           py::arg("temperature") = 1.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f, py::arg("seed") = 1,
           py::arg("nbest") = 1, py::arg("stop_at_eos") = false)
      .def("state_dict", &Model::state_dict)
      .def("load_state_dict", &Model::load_state_dict, py::arg("state_dict"))
      .def("save", &Model::save, py::arg("path"));

  m.def(
      "eval_lm",
      [score_args](const std::string& data, const std::string& path, const std::string& gen_subset,
                   int64_t tokens_per_sample, int64_t context_window, int64_t stride, int64_t max_sentences,
                   int64_t max_tokens, bool kv_cache, const py::object& model_overrides, bool alibi_interpolate) {
        return eval_lm(data, path, gen_subset,
                       score_args(tokens_per_sample, context_window, stride, max_sentences, max_tokens, kv_cache),
                       model_overrides, alibi_interpolate);
      },
      py::arg("data"), py::kw_only(), py::arg("path"), py::arg("gen_subset") = "test", py::arg("tokens_per_sample") = 0,
      py::arg("context_window") = 0, py::arg("stride") = 0, py::arg("max_sentences") = 0, py::arg("max_tokens") = 0,
      py::arg("kv_cache") = false, py::arg("model_overrides") = py::none(), py::arg("alibi_interpolate") = false,
      "`stretch eval-lm DATA --path PATH ...`: the result and the per-token NLL");
  m.def(
      "sweep",
      [score_args](const std::string& data, const std::vector<std::string>& paths, const std::vector<int64_t>& lengths,
                   const std::string& gen_subset, const std::vector<std::string>& labels, int64_t context_window,
                   int64_t stride, int64_t max_sentences, int64_t max_tokens, bool sliding, bool alibi_interpolate) {
        return sweep(data, paths, lengths, gen_subset, labels,
                     score_args(0, context_window, stride, max_sentences, max_tokens, false), sliding,
                     alibi_interpolate);
      },
      py::arg("data"), py::kw_only(), py::arg("paths"), py::arg("lengths"), py::arg("gen_subset") = "valid",
      py::arg("labels") = std::vector<std::string>{}, py::arg("context_window") = 0, py::arg("stride") = 0,
      py::arg("max_sentences") = 0, py::arg("max_tokens") = 0, py::arg("sliding") = false,
      py::arg("alibi_interpolate") = false, "`stretch sweep`'s table (nothing written)");
  m.def("set_threads", &set_num_threads, py::arg("n"), "OpenMP + GEMM threads (0: OMP_NUM_THREADS or all cores)");
  m.def("num_threads", &num_threads);
}
