// data/binarizer.cpp — see binarizer.h.
#include "data/binarizer.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <unordered_map>

#include "core/error.h"

namespace stretch::data {

namespace {

std::vector<size_t> work_ranges(const MappedFile& file, const ScanParams& p) {
  const size_t size = file.size();
  const size_t workers = static_cast<size_t>(std::max(1, p.workers));
  size_t target = p.range_bytes;
  if (target == 0) target = std::clamp<size_t>(size / (workers * 4), size_t{256} << 10, size_t{16} << 20);
  const size_t n = std::max<size_t>(1, (size + target - 1) / target);
  return split_at_line_starts(file.bytes(), size, n, p.mode);
}

// One work range's output, kept until it is its turn to be written.
template <class T>
struct RangeOut {
  std::vector<T> ids;
  std::vector<int32_t> sizes;
  BinarizeStats stats;
};

template <class T>
void binarize_range(const uint8_t* data, size_t begin, size_t end, const Dictionary& dict,
                    const std::array<int32_t, 256>& byte_ids, TokenMode mode, RangeOut<T>& out) {
  out.ids.clear();
  out.sizes.clear();
  out.stats = BinarizeStats{};
  out.ids.reserve((end - begin) / 3 + 16);
  size_t line_start = 0;
  int64_t replaced = 0;
  auto line_end = [&] {
    out.ids.push_back(static_cast<T>(Dictionary::kEos));
    out.sizes.push_back(static_cast<int32_t>(out.ids.size() - line_start));
    line_start = out.ids.size();
  };
  if (mode == TokenMode::Text) {
    out.stats.utf8 = scan_text_lines(
        data, begin, end,
        [&](std::string_view tok) {
          const int32_t id = dict.index(tok);
          if (id == Dictionary::kUnk && tok != "<unk>") ++replaced;
          out.ids.push_back(static_cast<T>(id));
        },
        line_end);
  } else {
    scan_byte_lines(
        data, begin, end,
        [&](uint8_t b) {
          const int32_t id = byte_ids[b];
          replaced += id == Dictionary::kUnk;
          out.ids.push_back(static_cast<T>(id));
        },
        line_end);
  }
  out.stats.lines = static_cast<int64_t>(out.sizes.size());
  out.stats.tokens = static_cast<int64_t>(out.ids.size());
  out.stats.replaced = replaced;
}

template <class T>
BinarizeStats binarize_typed(const MappedFile& file, const Dictionary& dict, const ScanParams& p,
                             IndexedDatasetWriter& writer) {
  const std::vector<size_t> bounds = work_ranges(file, p);
  const int64_t n = static_cast<int64_t>(bounds.size()) - 1;
  const auto byte_ids = dict.byte_ids();
  BinarizeStats total;
  std::exception_ptr error;
  std::mutex error_mu;
  file.advise_sequential();
#pragma omp parallel num_threads(std::max(1, p.workers))
  {
    RangeOut<T> out;
#pragma omp for ordered schedule(dynamic, 1)
    for (int64_t r = 0; r < n; ++r) {
      binarize_range(file.bytes(), bounds[static_cast<size_t>(r)], bounds[static_cast<size_t>(r) + 1], dict, byte_ids,
                     p.mode, out);
#pragma omp ordered
      {
        try {
          bool failed;
          {
            std::lock_guard<std::mutex> lock(error_mu);
            failed = static_cast<bool>(error);
          }
          if (!failed) {
            writer.add_raw(out.ids.data(), out.ids.size() * sizeof(T), out.sizes.data(), out.sizes.size());
            total.lines += out.stats.lines;
            total.tokens += out.stats.tokens;
            total.replaced += out.stats.replaced;
            total.utf8.merge(out.stats.utf8);
          }
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!error) error = std::current_exception();
        }
      }
    }
  }
  if (error) std::rethrow_exception(error);
  return total;
}

}  // namespace

BinarizeStats binarize_file(const MappedFile& file, const Dictionary& dict, const ScanParams& p,
                            IndexedDatasetWriter& out) {
  switch (out.dtype()) {
    case DTypeCode::U16:
      STRETCH_CHECK(dict.size() <= 65536, "uint16 output for a dictionary of " << dict.size());
      return binarize_typed<uint16_t>(file, dict, p, out);
    case DTypeCode::U32: return binarize_typed<uint32_t>(file, dict, p, out);
    case DTypeCode::I32: return binarize_typed<int32_t>(file, dict, p, out);
    case DTypeCode::I64: return binarize_typed<int64_t>(file, dict, p, out);
    default: STRETCH_CHECK(false, "binarize to dtype " << dtype_code_name(out.dtype()) << " is not supported");
  }
  return {};
}

TokenCounts count_tokens(const MappedFile& file, const ScanParams& p) {
  const std::vector<size_t> bounds = work_ranges(file, p);
  const int64_t n = static_cast<int64_t>(bounds.size()) - 1;
  const int workers = std::max(1, p.workers);
  using Map = std::unordered_map<std::string_view, int64_t>;
  std::vector<Map> maps(static_cast<size_t>(workers));
  std::vector<std::array<int64_t, 256>> byte_counts(static_cast<size_t>(workers));
  std::vector<int64_t> lines(static_cast<size_t>(workers), 0);
  std::vector<Utf8Report> utf8(static_cast<size_t>(workers));
#pragma omp parallel num_threads(workers)
  {
    const auto t = static_cast<size_t>(omp_get_thread_num());
    Map& m = maps[t];
    auto& bc = byte_counts[t];
    bc.fill(0);
    int64_t nl = 0;
#pragma omp for schedule(dynamic, 1)
    for (int64_t r = 0; r < n; ++r) {
      const size_t b = bounds[static_cast<size_t>(r)], e = bounds[static_cast<size_t>(r) + 1];
      if (p.mode == TokenMode::Text) {
        utf8[t].merge(scan_text_lines(file.bytes(), b, e, [&](std::string_view tok) { ++m[tok]; }, [&] { ++nl; }));
      } else {
        scan_byte_lines(file.bytes(), b, e, [&](uint8_t c) { ++bc[c]; }, [&] { ++nl; });
      }
    }
    lines[t] = nl;
  }
  TokenCounts out;
  Map all;
  for (size_t t = 0; t < maps.size(); ++t) {
    out.lines += lines[t];
    out.utf8.merge(utf8[t]);
    if (all.empty()) all = std::move(maps[t]);
    else for (const auto& [k, v] : maps[t]) all[k] += v;
  }
  if (p.mode == TokenMode::Byte) {
    std::array<int64_t, 256> bc{};
    for (const auto& a : byte_counts)
      for (int c = 0; c < 256; ++c) bc[static_cast<size_t>(c)] += a[static_cast<size_t>(c)];
    for (int c = 0; c < 256; ++c)
      if (bc[static_cast<size_t>(c)]) out.words.emplace_back(std::to_string(c), bc[static_cast<size_t>(c)]);
  } else {
    out.words.reserve(all.size());
    for (const auto& [k, v] : all) out.words.emplace_back(std::string(k), v);
  }
  std::sort(out.words.begin(), out.words.end());
  return out;
}

Dictionary build_dictionary(const std::vector<const MappedFile*>& files, const ScanParams& p, const FinalizeParams& f) {
  Dictionary d;
  for (const MappedFile* file : files) {
    TokenCounts c = count_tokens(*file, p);
    // fairseq: counter.update(tokens); counter.update([eos]) per line; then add_symbol in
    // sorted order (the eos count lands on the special </s>).
    c.words.emplace_back("</s>", c.lines);
    std::sort(c.words.begin(), c.words.end());
    for (const auto& [w, n] : c.words) d.add_symbol(w, n);
  }
  d.finalize(f);
  return d;
}

std::vector<std::vector<int32_t>> binarize_text(std::string_view text, const Dictionary& dict, TokenMode mode,
                                                BinarizeStats* stats) {
  RangeOut<int32_t> out;
  binarize_range(reinterpret_cast<const uint8_t*>(text.data()), 0, text.size(), dict, dict.byte_ids(), mode, out);
  std::vector<std::vector<int32_t>> items;
  size_t at = 0;
  for (int32_t s : out.sizes) {
    items.emplace_back(out.ids.begin() + static_cast<std::ptrdiff_t>(at), out.ids.begin() + static_cast<std::ptrdiff_t>(at + s));
    at += static_cast<size_t>(s);
  }
  if (stats) *stats = out.stats;
  return items;
}

}  // namespace stretch::data
