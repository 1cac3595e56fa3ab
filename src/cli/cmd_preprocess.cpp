// cli/cmd_preprocess.cpp — `stretch preprocess`: fairseq-preprocess --only-source, same flags.
// Parses the flags into data::PreprocessConfig and calls data::preprocess (data/preprocess.h).
// Example: stretch preprocess --only-source --trainpref ptb.train.txt --validpref ptb.valid.txt
//            --testpref ptb.test.txt --destdir data-bin/ptb --workers 2
#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "data/preprocess.h"

namespace stretch::cli {

void add_preprocess(CLI::App& sub, Runner& run) {
  struct Options {
    data::PreprocessConfig cfg;
    bool only_source = false;
    bool byte_level = false;
    std::string source_lang, target_lang;
    CommonOptions common;
  };
  auto o = std::make_shared<Options>();
  // argparse semantics, as in fairseq, train and eval-lm: an option given twice takes the last value.
  sub.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub.description(
      "Text files to a fairseq data-bin directory: dict.txt and {train,valid,test}.{bin,idx} in fairseq's "
      "memory-mapped format (loads in fairseq unchanged). Each line becomes its tokens' ids and </s>.");
  sub.add_flag("--only-source", o->only_source, "language-model data (the only mode; accepted for fairseq commands)");
  sub.add_option("--trainpref", o->cfg.trainpref, "training text; the dictionary is built from it");
  sub.add_option("--validpref", o->cfg.validpref, "validation text (comma-separated for several: valid, valid1, ...)");
  sub.add_option("--testpref", o->cfg.testpref, "test text (comma-separated for several)");
  sub.add_option("--destdir", o->cfg.destdir, "output directory")->capture_default_str();
  sub.add_option("--srcdict", o->cfg.srcdict, "reuse this dict.txt instead of building one");
  sub.add_option("--workers", o->cfg.workers, "threads; the output does not depend on it")
      ->capture_default_str()
      ->transform(int_at_least(1, "threads"));
  sub.add_option("--thresholdsrc", o->cfg.finalize.threshold, "keep words seen at least this many times")
      ->capture_default_str();
  sub.add_option("--nwordssrc", o->cfg.finalize.nwords,
                 "at most this many symbols, the 4 specials included (-1: all)")
      ->capture_default_str();
  sub.add_option("--padding-factor", o->cfg.finalize.padding_factor,
                 "pad the dictionary size to a multiple of this with madeupwordNNNN")
      ->capture_default_str();
  sub.add_flag("--byte-level", o->byte_level,
               "raw bytes, enwik8 style: each byte is a token (its decimal value in dict.txt), '\\n' ends a line "
               "(docs/formats.md)");
  add_one_value_flag(sub, "--dataset-impl", "mmap", "fairseq's default format, the one stretch writes");
  sub.add_option("-s,--source-lang", o->source_lang, "not supported (language-model data has no languages)");
  sub.add_option("-t,--target-lang", o->target_lang, "not supported (language-model data has no languages)");
  sub.add_flag("--dict-only", o->cfg.dict_only, "only build and write dict.txt (fairseq's --dict-only)");
  add_ignored_flag(sub, "--joined-dictionary", "language-model data (--only-source) has a single dictionary", false);
  add_ignored_flag(sub, "--seed", "preprocessing is deterministic", true);
  add_ignored_flag(sub, "--log-format", "preprocess logs plain lines", true);
  add_ignored_flag(sub, "--log-interval", "preprocess logs one line per split", true);
  add_ignored_flag(sub, "--no-progress-bar",
                   "files of 10 MB or more show their progress on stderr (a bar on a terminal, else a line per tenth)",
                   false);
  add_ignored_flag(sub, "--task", "preprocess only prepares language-model data", true);
  add_common_options(sub, o->common);
  run = [o] {
    apply_common_options(o->common);
    if (!o->source_lang.empty() || !o->target_lang.empty())
      fail_usage("--source-lang/--target-lang are not supported", "stretch prepares language-model data: use --only-source");
    if (!o->only_source) log_once(LogLevel::Info, "preprocess: working as --only-source (language-model data)");
    o->cfg.mode = o->byte_level ? data::TokenMode::Byte : data::TokenMode::Text;
    data::preprocess(o->cfg);
    return 0;
  };
}

}  // namespace stretch::cli
