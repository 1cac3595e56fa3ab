// data/preprocess.cpp — see preprocess.h.
#include "data/preprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/orphans.h"
#include "core/progress_display.h"
#include "data/indexed_dataset.h"
#include "data/mapped_file.h"

namespace fs = std::filesystem;

namespace stretch::data {

namespace {

struct SplitInput {
  std::string name, path, flag;
  MappedFile file;
};

// Files from this size on show their progress (core/progress_display.h: a bar with MB/s and an
// ETA on a terminal, a line per tenth otherwise): WikiText-103's 540 MB or enwik8's 100 MB, not PTB's 5 MB.
constexpr size_t kProgressBytes = 10'000'000;

// A progress display of one pass over `file` in MB, wired into `scan.on_bytes`, or none for a
// small file. The caller keeps it for the pass and then calls done().
class FileProgress {
 public:
  FileProgress(const std::string& label, const MappedFile& file, ScanParams& scan) : scan_(scan) {
    if (file.size() < kProgressBytes) return;
    const auto size = static_cast<int64_t>(file.size());
    const int64_t total_mb = (size + 500'000) / 1'000'000;  // the nearest MB (>= 10)
    display_ = std::make_unique<ProgressDisplay>(label, total_mb, "MB");
    // The last range reports the whole file (100%), however its size rounds.
    scan_.on_bytes = [d = display_.get(), size, total_mb](int64_t bytes) {
      d->update(bytes >= size ? total_mb : std::min(total_mb, bytes / 1'000'000));
    };
  }
  ~FileProgress() { done(); }
  FileProgress(const FileProgress&) = delete;
  FileProgress& operator=(const FileProgress&) = delete;
  void done() {
    scan_.on_bytes = {};
    if (display_) display_->finish();
    display_.reset();
  }

 private:
  ScanParams& scan_;
  std::unique_ptr<ProgressDisplay> display_;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t c = s.find(',', pos);
    out.push_back(s.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return v < 0 ? "-" + out : out;
}

void warn_utf8(const std::string& path, const Utf8Report& r) {
  if (r.invalid_sequences == 0) return;
  log_warning(path + ": " + with_commas(r.invalid_sequences) +
              " byte(s) that are not valid UTF-8, the first at byte offset " + std::to_string(r.first_offset) +
              "; they are kept inside tokens as raw bytes (fairseq-preprocess would stop with a UnicodeDecodeError; "
              "use --byte-level for binary data)");
}

// Staging directories are named .<destdir name>.tmp-<pid>-XXXXXX next to the destination.
// (Appended piecewise: GCC 12 warns -Wrestrict, a false positive, on "." + string.)
std::string staging_prefix(const fs::path& dest) {
  std::string prefix(1, '.');
  prefix.append(dest.filename().string()).append(".tmp-");
  return prefix;
}

// The pid in a staging directory's name, if `name` is one for `dest`.
std::optional<pid_t> staging_pid(const fs::path& dest, const std::string& name) {
  const std::string prefix = staging_prefix(dest);
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const size_t dash = name.find('-', prefix.size());
  if (dash == std::string::npos || dash + 7 != name.size()) return std::nullopt;  // "-XXXXXX"
  const std::string digits = name.substr(prefix.size(), dash - prefix.size());
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return static_cast<pid_t>(std::stol(digits));
}

// A temporary directory next to the destination, removed unless committed (or, after a kill -9,
// by the next preprocess into the same --destdir).
class StagingDir {
 public:
  explicit StagingDir(const fs::path& dest) : dest_(dest) {
    const fs::path parent = dest.has_parent_path() ? dest.parent_path() : fs::path(".");
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec)
      fail_io(parent.string(), "cannot create the directory for --destdir " + dest.string() + ": " + ec.message(),
              "choose a --destdir in a writable location");
    // Orphans of killed runs (their pid is in the name) are removed first (core/orphans.h).
    remove_dead_orphans(parent.string(), [&dest](const std::string& n) { return staging_pid(dest, n); });
    std::string name = staging_prefix(dest) + std::to_string(::getpid()) + "-XXXXXX";
    std::string templ = (parent / name).string();
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()))
      fail_io(dest.string(), std::string("cannot write into ") + parent.string() + ": " + std::strerror(errno),
              "choose a --destdir in a writable location, or fix the directory's permissions");
    path_ = buf.data();
    // mkdtemp makes it 0700; the output should get the usual permissions (0777 & ~umask).
    const mode_t mask = ::umask(0);
    ::umask(mask);
    fs::permissions(path_, static_cast<fs::perms>(0777 & ~mask), ec);
  }
  ~StagingDir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  const fs::path& path() const { return path_; }

  // Move everything into dest so that it changes in one step (issue 17: a kill between per-file
  // renames left a new dict.txt next to old .bin files):
  //   * dest does not exist: one rename of the staging directory;
  //   * dest exists: every regular file of dest that this run does not write and that is not
  //     `stale` (a split binarized with the old dictionary) is hard-linked (else copied) into
  //     the staging directory, which then takes dest's place in one renameat2(RENAME_EXCHANGE);
  //     the old directory, now at the staging name, is removed (after a kill -9 the next run
  //     removes it as an orphan: nothing in it is needed any more). A kill before the exchange
  //     leaves dest as it was; after it, dest is complete.
  //   * dest holds something that is not a regular file (a subdirectory, a symlink) or the
  //     filesystem refuses the exchange: one rename per file, each atomic, with a warning that
  //     a kill midway would mix the runs' files.
  void commit(const std::vector<fs::path>& stale = {}) {
    std::error_code ec;
    if (!fs::exists(dest_, ec)) {
      fs::rename(path_, dest_, ec);
      if (ec) fail_io(dest_.string(), "cannot move the finished output into place: " + ec.message());
      path_.clear();
      return;
    }
    std::string why_not;  // why the one-step exchange is not possible ("" = it is)
    for (const auto& entry : fs::directory_iterator(dest_)) {
      const fs::path target = path_ / entry.path().filename();
      if (fs::exists(target, ec) || std::find(stale.begin(), stale.end(), entry.path()) != stale.end()) continue;
      if (!entry.is_regular_file() || entry.is_symlink()) {
        why_not = entry.path().string() + " is not a regular file";
        break;
      }
      fs::create_hard_link(entry.path(), target, ec);
      if (ec) {
        fs::copy_file(entry.path(), target, ec);
        if (ec) fail_io(entry.path().string(), "cannot carry this file over into the new --destdir contents: " + ec.message(),
                        "free disk space, or preprocess into a new --destdir");
      }
    }
    if (why_not.empty()) {
      fs::permissions(path_, fs::status(dest_, ec).permissions(), ec);  // dest keeps its mode
      if (const char* h = std::getenv("STRETCH_TEST_PREPROCESS_KILL_BEFORE_EXCHANGE"); h && *h == '1') ::raise(SIGKILL);
      if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, dest_.c_str(), RENAME_EXCHANGE) == 0) {
        fs::remove_all(path_, ec);  // the old contents
        path_.clear();
        return;
      }
      why_not = std::string("the filesystem cannot exchange two directories (") + std::strerror(errno) + ")";
    }
    log_warning("preprocess: " + why_not + ": replacing the files of --destdir " + dest_.string() +
                " one by one (a kill midway would leave a mix of old and new files)");
    for (const fs::path& f : stale) {
      fs::remove(f, ec);
      if (ec) fail_io(f.string(), "cannot remove a split binarized with the old dictionary: " + ec.message(),
                      "remove it by hand, or preprocess into a new --destdir");
    }
    for (const auto& entry : fs::directory_iterator(path_)) {
      fs::rename(entry.path(), dest_ / entry.path().filename(), ec);
      if (ec)
        fail_io((dest_ / entry.path().filename()).string(), "cannot move the finished file into place: " + ec.message());
    }
    fs::remove_all(path_, ec);
    path_.clear();
  }

 private:
  fs::path dest_, path_;
};

// Splits already in dest (train/valid*/test* .bin/.idx, the names preprocess writes) that this run
// does not write and that were binarized with another dictionary than `new_dict` (issue 17, defect
// 9: train and eval-lm read them with the new dict.txt). Same dictionary: kept.
std::vector<fs::path> stale_splits(const fs::path& dest, const Dictionary& new_dict, const std::vector<SplitInput>& inputs) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dest, ec)) return out;
  std::string old_hash = "(none)";
  try {
    if (fs::exists(dest / "dict.txt", ec)) old_hash = Dictionary::load((dest / "dict.txt").string()).content_hash();
  } catch (const Error&) {
    old_hash = "(unreadable)";
  }
  if (old_hash == new_dict.content_hash()) return out;
  auto is_split_name = [](const std::string& stem) {
    for (const char* base : {"train", "valid", "test"}) {
      const std::string b = base;
      if (stem.rfind(b, 0) == 0 && stem.find_first_not_of("0123456789", b.size()) == std::string::npos) return true;
    }
    return false;
  };
  for (const auto& entry : fs::directory_iterator(dest, ec)) {
    const fs::path& p = entry.path();
    if (p.extension() != ".bin" && p.extension() != ".idx") continue;
    const std::string stem = p.stem().string();
    if (!is_split_name(stem)) continue;
    bool written = false;
    for (const auto& in : inputs) written = written || in.name == stem;
    if (!written) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

PreprocessReport preprocess(const PreprocessConfig& cfg) {
  // 1. Check flags and open every input before writing anything.
  if (cfg.trainpref.empty() && cfg.validpref.empty() && cfg.testpref.empty())
    fail_usage("nothing to do: give --trainpref, --validpref and/or --testpref");
  if (cfg.srcdict.empty() && cfg.trainpref.empty())
    fail_usage("--trainpref is required to build a dictionary", "or pass an existing dictionary with --srcdict");
  if (cfg.workers < 1) fail_usage("--workers " + std::to_string(cfg.workers) + " must be at least 1");
  if (cfg.destdir.empty()) fail_usage("--destdir must not be empty");
  fs::path dest = fs::absolute(fs::path(cfg.destdir)).lexically_normal();
  if (dest.filename().empty()) dest = dest.parent_path();  // "data-bin/ptb/" -> "data-bin/ptb"
  {
    std::error_code ec;
    if (fs::exists(dest, ec) && !fs::is_directory(dest, ec))
      fail_io(dest.string(), "--destdir exists and is not a directory", "choose another --destdir");
  }
  std::vector<SplitInput> inputs;
  auto add = [&](const std::string& flag, const std::string& base, const std::string& list) {
    if (list.empty()) return;
    auto paths = split_commas(list);
    for (size_t k = 0; k < paths.size(); ++k) {
      SplitInput in;
      in.name = k == 0 ? base : base + std::to_string(k);
      in.path = paths[k];
      in.flag = flag;
      if (in.path.empty()) fail_usage(flag + " " + list + ": empty file name");
      in.file = MappedFile::open(in.path, flag);
      if (in.file.size() == 0)
        fail_input(in.path, "the file is empty (0 bytes; from " + flag + ")",
                   "every split needs at least one line of text; check the path");
      inputs.push_back(std::move(in));
    }
  };
  add("--trainpref", "train", cfg.trainpref);
  add("--validpref", "valid", cfg.validpref);
  add("--testpref", "test", cfg.testpref);
  ScanParams scan{.mode = cfg.mode, .workers = cfg.workers, .range_bytes = 0};

  // 2. The dictionary.
  Dictionary dict;
  if (!cfg.srcdict.empty()) {
    dict = Dictionary::load(cfg.srcdict);
    if (cfg.mode == TokenMode::Byte && !dict.is_byte_level())
      fail_usage("--byte-level with --srcdict " + cfg.srcdict + ": the dictionary's symbols are not byte values 0..255",
                 "pass a dictionary made with --byte-level, or drop --byte-level");
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    FileProgress progress("preprocess " + inputs.front().name + ": counting words", inputs.front().file, scan);
    dict = build_dictionary({&inputs.front().file}, scan, cfg.finalize);
    progress.done();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char buf[64];
    std::snprintf(buf, sizeof buf, " (counted in %.2f s)", s);
    log_info("preprocess: dictionary from " + inputs.front().path + ": " + with_commas(dict.size()) + " types" + buf);
  }

  // 3. Write everything into a staging directory, then move it into place.
  StagingDir stage(dest);
  PreprocessReport report;
  report.dict_size = dict.size();
  report.dict_hash = dict.content_hash();
  dict.save((stage.path() / "dict.txt").string());
  const DTypeCode dtype = dtype_for_vocab(dict.size());
  nlohmann::json meta;
  meta["format"] = "fairseq MMIDIDX v1";
  meta["written_by"] = "stretch preprocess";
  meta["mode"] = cfg.mode == TokenMode::Byte ? "byte-level" : "text";
  meta["dict_size"] = dict.size();
  meta["dict_hash"] = report.dict_hash;
  meta["dtype"] = dtype_code_name(dtype);
  meta["dict_only"] = cfg.dict_only;
  for (auto& in : inputs) {
    if (cfg.dict_only) break;  // fairseq's --dict-only: the dictionary, nothing binarized
    const auto t0 = std::chrono::steady_clock::now();
    IndexedDatasetWriter writer((stage.path() / in.name).string(), dtype);
    FileProgress progress("preprocess " + in.name + ": binarizing", in.file, scan);
    BinarizeStats st = binarize_file(in.file, dict, scan, writer);
    progress.done();
    writer.finish();
    // Read back what was written, as a trainer would (header, sizes, ids < dictionary size).
    auto check = IndexedDataset::open((stage.path() / in.name).string());
    STRETCH_CHECK(check->num_items() == st.lines && check->total_tokens() == st.tokens,
                  "wrote " << st.lines << " items / " << st.tokens << " tokens, read back " << check->num_items()
                           << " / " << check->total_tokens());
    check->validate_ids(dict.size());
    SplitReport r;
    r.name = in.name;
    r.source = in.path;
    r.stats = st;
    r.bytes = static_cast<int64_t>(in.file.size());
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    warn_utf8(in.path, st.utf8);
    char pct[128];
    std::snprintf(pct, sizeof pct, "%.3f%% replaced by <unk> (%.1f MB in %.2f s)", st.replaced_percent(),
                  static_cast<double>(r.bytes) / 1e6, r.seconds);
    log_info("preprocess: " + in.name + ": " + in.path + ": " + with_commas(st.lines) + " lines, " +
             with_commas(st.tokens) + " tokens, " + pct);
    meta["splits"][in.name] = {{"source", in.path},      {"lines", st.lines},
                               {"tokens", st.tokens},    {"replaced_by_unk", st.replaced},
                               {"invalid_utf8", st.utf8.invalid_sequences}};
    report.splits.push_back(r);
  }
  {
    const std::string path = (stage.path() / "preprocess.json").string();
    std::ofstream f(path);
    errno = 0;
    f << meta.dump(2) << "\n";
    f.close();
    if (!f)
      fail_io(path, std::string("write failed: ") + (errno ? std::strerror(errno) : "the stream reported an error"),
              "is the disk full?");
  }
  // --dict-only rewrites no split: every old split binarized with another dictionary is stale.
  const std::vector<SplitInput> none;
  const std::vector<fs::path> stale = stale_splits(dest, dict, cfg.dict_only ? none : inputs);
  for (const fs::path& f : stale)
    log_warning("preprocess: removing " + f.string() + ": binarized with the dictionary this run replaces (" +
                "train and eval-lm would read it with the new dict.txt); preprocess its text again to keep it");
  stage.commit(stale);
  log_info("preprocess: wrote " + dest.string() + "/ (dict.txt, " + std::to_string(cfg.dict_only ? 0 : inputs.size()) + " split(s), " +
           dtype_code_name(dtype) + " ids)");
  return report;
}

}  // namespace stretch::data
