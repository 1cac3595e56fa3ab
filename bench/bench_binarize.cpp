// bench/bench_binarize.cpp — binarization throughput with a given dictionary, and where the
// time goes. Inputs: ptb.train.txt (5.1 MB) and a larger file made by repeating
// wiki.valid.tokens (written to /tmp at start, removed at exit; never committed).
// Stages, each a benchmark on the same file so they read as ratios of one run:
//   scan      — tokenise only (line ends, whitespace incl. Unicode, UTF-8 checks)
//   lookup    — scan + dictionary hash lookup per token
//   binarize  — the full thing: scan + lookup + ids buffered + .bin/.idx written, W workers
//   count     — dictionary building (token counting), W workers
// Run: build/bench/bench_binarize --benchmark_counters_tabular=true
// Env: STRETCH_DATA_DIR (default: the build's corpus path), BENCH_WIKI_COPIES (default 40).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "data/binarizer.h"
#include "data/dictionary.h"
#include "data/indexed_dataset.h"
#include "data/mapped_file.h"

namespace fs = std::filesystem;
using namespace stretch::data;

namespace {

struct Corpus {
  std::string name;
  MappedFile file;
  Dictionary dict;
};

std::string data_dir() {
  const char* env = std::getenv("STRETCH_DATA_DIR");
  return env ? env : STRETCH_DATA_DIR;
}

fs::path scratch_dir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("stretch-bench-binarize-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::unique_ptr<Corpus> load(const std::string& name) {
  auto c = std::make_unique<Corpus>();
  c->name = name;
  if (name == "ptb") {
    const std::string path = data_dir() + "/ptb/ptb.train.txt";
    if (!fs::exists(path)) return nullptr;
    c->file = MappedFile::open(path);
  } else {
    const std::string src = data_dir() + "/wikitext-103/wiki.valid.tokens";
    if (!fs::exists(src)) return nullptr;
    const char* env = std::getenv("BENCH_WIKI_COPIES");
    const int copies = env ? std::atoi(env) : 40;
    const fs::path out = scratch_dir() / "wiki_repeated.txt";
    {
      std::ifstream in(src, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::ofstream o(out, std::ios::binary);
      for (int i = 0; i < copies; ++i) o.write(text.data(), static_cast<std::streamsize>(text.size()));
    }
    c->file = MappedFile::open(out.string());
  }
  c->dict = build_dictionary({&c->file}, ScanParams{.workers = 2}, {});
  return c;
}

Corpus* corpus(int which) {
  static std::unique_ptr<Corpus> ptb = load("ptb");
  static std::unique_ptr<Corpus> wiki = load("wiki");
  return which == 0 ? ptb.get() : wiki.get();
}

bool ready(benchmark::State& state, Corpus* c) {
  if (c) {
    state.SetLabel(c->name + " " + std::to_string(c->file.size() / 1000000) + " MB, V=" + std::to_string(c->dict.size()));
    return true;
  }
  state.SkipWithError("corpus not found under STRETCH_DATA_DIR");
  return false;
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// bytes_per_second is wall clock; cpu_MB_per_s divides by the CPU time of all threads, which
// does not depend on how busy the (shared) machine is: workers × cpu_MB_per_s is what W
// otherwise idle cores would give.
void finish(benchmark::State& state, Corpus* c, double cpu_seconds) {
  const double bytes = static_cast<double>(state.iterations()) * static_cast<double>(c->file.size());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["cpu_MB_per_s"] = bytes / 1e6 / cpu_seconds;
}

void BM_scan(benchmark::State& state) {
  Corpus* c = corpus(static_cast<int>(state.range(0)));
  if (!ready(state, c)) return;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    int64_t tokens = 0, lines = 0;
    scan_text_lines(c->file.bytes(), 0, c->file.size(), [&](std::string_view t) { tokens += static_cast<int64_t>(t.size()) > 0; },
                    [&] { ++lines; });
    benchmark::DoNotOptimize(tokens + lines);
  }
  finish(state, c, process_cpu_seconds() - cpu0);
}

void BM_lookup(benchmark::State& state) {
  Corpus* c = corpus(static_cast<int>(state.range(0)));
  if (!ready(state, c)) return;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    int64_t sum = 0;
    scan_text_lines(c->file.bytes(), 0, c->file.size(), [&](std::string_view t) { sum += c->dict.index(t); }, [&] { ++sum; });
    benchmark::DoNotOptimize(sum);
  }
  finish(state, c, process_cpu_seconds() - cpu0);
}

void BM_binarize(benchmark::State& state) {
  Corpus* c = corpus(static_cast<int>(state.range(0)));
  if (!ready(state, c)) return;
  const int workers = static_cast<int>(state.range(1));
  const std::string prefix = (scratch_dir() / ("out_" + c->name)).string();
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    IndexedDatasetWriter w(prefix, dtype_for_vocab(c->dict.size()));
    const BinarizeStats st = binarize_file(c->file, c->dict, ScanParams{.workers = workers}, w);
    w.finish();
    benchmark::DoNotOptimize(st.tokens);
  }
  finish(state, c, process_cpu_seconds() - cpu0);
}

void BM_count(benchmark::State& state) {
  Corpus* c = corpus(static_cast<int>(state.range(0)));
  if (!ready(state, c)) return;
  const int workers = static_cast<int>(state.range(1));
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    TokenCounts tc = count_tokens(c->file, ScanParams{.workers = workers});
    benchmark::DoNotOptimize(tc.lines);
  }
  finish(state, c, process_cpu_seconds() - cpu0);
}

// range(0): 0 = ptb.train.txt, 1 = repeated wiki.valid.tokens; range(1): workers.
BENCHMARK(BM_scan)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_lookup)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_binarize)->Args({0, 1})->Args({0, 2})->Args({1, 1})->Args({1, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_count)->Args({0, 1})->Args({0, 2})->Args({1, 2})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  fs::remove_all(scratch_dir(), ec);
  return 0;
}
