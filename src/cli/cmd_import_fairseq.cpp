// cli/cmd_import_fairseq.cpp — `stretch import-fairseq IN.pt --out OUT [--pos alibi] [--dict DICT]`:
// a fairseq checkpoint (models/fairseq/fairseq_import.h) → a stretch model file
// (models/model_file.h). The dictionary stored with it is --dict, else dict.txt beside IN,
// else none (then eval-lm checks only the vocabulary size, as fairseq does).
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "core/error.h"
#include "data/dictionary.h"
#include "models/fairseq/fairseq_import.h"
#include "models/model_file.h"

namespace stretch::cli {

void add_import_fairseq(CLI::App& sub, Runner& run) {
  struct Options {
    CommonOptions common;
    std::string in, out, pos, dict;
  };
  auto o = std::make_shared<Options>();
  add_common_options(sub, o->common);
  sub.add_option("checkpoint", o->in, "a fairseq checkpoint (.pt, as torch.save wrote it)")->required();
  sub.add_option("--out", o->out, "the stretch model file to write")->required();
  sub.add_option("--pos", o->pos, "alibi: the file is an ALiBi-fork checkpoint (its sinusoidal entry is unused)");
  sub.add_option("--dict", o->dict, "dict.txt to store with the model (default: dict.txt beside the checkpoint)");
  run = [o] {
    apply_common_options(o->common);
    if (!o->pos.empty() && o->pos != "alibi")
      fail_usage("--pos: import takes only 'alibi' (got '" + o->pos + "')", "omit --pos to keep the stored positions");
    if (std::filesystem::weakly_canonical(o->in) == std::filesystem::weakly_canonical(o->out))
      fail_usage("--out " + o->out + " is the checkpoint being imported", "write the model file elsewhere");
    models::FairseqImport imp = models::import_fairseq(o->in, {.pos = o->pos});
    for (const auto& n : imp.notes) std::cout << "import-fairseq | " << n << "\n";
    if (const std::string kept = models::ema_kept_note(imp.tensors); !kept.empty())
      std::cout << "import-fairseq | " << kept << "\n";
    auto model = models::build_model(imp.config);
    models::ModelFile mf;
    mf.file.path = o->in;
    mf.file.tensors = std::move(imp.tensors);
    models::load_weights(*model, mf);
    models::ModelFileWrite w;
    for (auto& [name, t] : mf.file.tensors)  // extra_state['ema'] (fairseq_import.h)
      if (name.rfind("ema.", 0) == 0) w.extra_tensors.emplace_back(name, t);
    std::string dict_path = o->dict;
    if (dict_path.empty()) {
      const auto beside = std::filesystem::path(o->in).parent_path() / "dict.txt";
      if (std::filesystem::exists(beside)) dict_path = beside.string();
    }
    if (!dict_path.empty()) {
      data::Dictionary dict = data::Dictionary::load(dict_path);
      if (dict.size() != model->info().vocab_size)
        fail_input(dict_path, "has " + std::to_string(dict.size()) + " symbols; the checkpoint's embedding has " +
                                  std::to_string(model->info().vocab_size) + " rows",
                   "give the dict.txt of the data the model was trained on (--dict)");
      w.dict_hash = dict.content_hash();
      w.dictionary = dict.to_text();
      std::cout << "import-fairseq | dictionary " << dict_path << " (" << dict.size() << " symbols) stored\n";
    } else {
      std::cout << "import-fairseq | no dictionary stored (none beside the checkpoint; --dict gives one): "
                   "eval-lm will check the vocabulary size only\n";
    }
    models::write_model_file(o->out, *model, w);
    std::cout << "import-fairseq | wrote " << o->out << "\n";
    return 0;
  };
}

}  // namespace stretch::cli
