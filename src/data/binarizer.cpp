// data/binarizer.cpp — see binarizer.h.
#include "data/binarizer.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "data/symbol_table.h"

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

// Token counts keyed by views into the mapped file: open addressing, no allocation per token.
class WordCounter {
 public:
  WordCounter() { slots_.resize(1 << 12); }
  void add(std::string_view w, int64_t n = 1) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    const uint64_t h = hash_word(w);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.count == 0) {
        s = Slot{w, h, n};
        ++used_;
        return;
      }
      if (s.hash == h && s.word == w) {
        s.count += n;
        return;
      }
    }
  }
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.count) f(s.word, s.count);
  }

 private:
  struct Slot {
    std::string_view word;
    uint64_t hash = 0;
    int64_t count = 0;  // 0: empty
  };
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    for (const Slot& s : old)
      if (s.count) {
        size_t i = s.hash & (slots_.size() - 1);
        while (slots_[i].count) i = (i + 1) & (slots_.size() - 1);
        slots_[i] = s;
      }
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

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

// Ordered pipeline on plain threads (no OpenMP: a waiting OpenMP thread spins, which costs
// as much CPU as the work on a shared machine): `workers` threads take ranges in order from a
// counter, at most `window` ranges ahead of the writer; the calling thread writes finished
// ranges in file order.
template <class T>
BinarizeStats binarize_typed(const MappedFile& file, const Dictionary& dict, const ScanParams& p,
                             IndexedDatasetWriter& writer) {
  const std::vector<size_t> bounds = work_ranges(file, p);
  const int64_t n = static_cast<int64_t>(bounds.size()) - 1;
  const int workers = std::max(1, p.workers);
  const int64_t window = 2 * static_cast<int64_t>(workers);
  const auto byte_ids = dict.byte_ids();
  file.advise_sequential();

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<RangeOut<T>>> done(static_cast<size_t>(n));
  int64_t next = 0, written = 0;
  bool stop = false;
  std::exception_ptr error;

  auto work = [&] {
    for (;;) {
      int64_t r;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || next >= n || next - written < window; });
        if (stop || next >= n) return;
        r = next++;
      }
      auto out = std::make_unique<RangeOut<T>>();
      try {
        binarize_range(file.bytes(), bounds[static_cast<size_t>(r)], bounds[static_cast<size_t>(r) + 1], dict,
                       byte_ids, p.mode, *out);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        stop = true;
        cv.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      done[static_cast<size_t>(r)] = std::move(out);
      cv.notify_all();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) threads.emplace_back(work);

  BinarizeStats total;
  try {
    for (int64_t r = 0; r < n; ++r) {
      std::unique_ptr<RangeOut<T>> out;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || done[static_cast<size_t>(r)] != nullptr; });
        if (stop) break;
        out = std::move(done[static_cast<size_t>(r)]);
        written = r + 1;
      }
      cv.notify_all();
      writer.add_raw(out->ids.data(), out->ids.size() * sizeof(T), out->sizes.data(), out->sizes.size());
      if (p.on_bytes) p.on_bytes(static_cast<int64_t>(bounds[static_cast<size_t>(r) + 1]));
      total.lines += out->stats.lines;
      total.tokens += out->stats.tokens;
      total.replaced += out->stats.replaced;
      total.utf8.merge(out->stats.utf8);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu);
    if (!error) error = std::current_exception();
    stop = true;
    cv.notify_all();
  }
  for (auto& t : threads) t.join();
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
  std::vector<WordCounter> maps(static_cast<size_t>(workers));
  std::vector<std::array<int64_t, 256>> byte_counts(static_cast<size_t>(workers));
  std::vector<int64_t> lines(static_cast<size_t>(workers), 0);
  std::vector<Utf8Report> utf8(static_cast<size_t>(workers));
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> bytes_done{0};
  auto work = [&](size_t t) {
    WordCounter& m = maps[t];
    auto& bc = byte_counts[t];
    bc.fill(0);
    int64_t nl = 0;
    for (int64_t r = next++; r < n; r = next++) {
      const size_t b = bounds[static_cast<size_t>(r)], e = bounds[static_cast<size_t>(r) + 1];
      if (p.mode == TokenMode::Text) {
        utf8[t].merge(scan_text_lines(file.bytes(), b, e, [&](std::string_view tok) { m.add(tok); }, [&] { ++nl; }));
      } else {
        scan_byte_lines(file.bytes(), b, e, [&](uint8_t c) { ++bc[c]; }, [&] { ++nl; });
      }
      const int64_t so_far = bytes_done += static_cast<int64_t>(e - b);
      if (t == 0 && p.on_bytes) p.on_bytes(so_far);  // the calling thread reports (the others' ranges count too)
    }
    lines[t] = nl;
  };
  {
    std::vector<std::thread> threads;
    for (int w = 1; w < workers; ++w) threads.emplace_back(work, static_cast<size_t>(w));
    work(0);
    for (auto& t : threads) t.join();
  }
  if (p.on_bytes) p.on_bytes(bytes_done.load());  // the whole file, whichever thread did the last range
  TokenCounts out;
  WordCounter all;
  for (size_t t = 0; t < maps.size(); ++t) {
    out.lines += lines[t];
    out.utf8.merge(utf8[t]);
    maps[t].for_each([&](std::string_view w, int64_t c) { all.add(w, c); });
  }
  if (p.mode == TokenMode::Byte) {
    std::array<int64_t, 256> bc{};
    for (const auto& a : byte_counts)
      for (int c = 0; c < 256; ++c) bc[static_cast<size_t>(c)] += a[static_cast<size_t>(c)];
    for (int c = 0; c < 256; ++c)
      if (bc[static_cast<size_t>(c)]) out.words.emplace_back(std::to_string(c), bc[static_cast<size_t>(c)]);
  } else {
    all.for_each([&](std::string_view w, int64_t c) { out.words.emplace_back(std::string(w), c); });
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
