// Exact resume through the binary: a run stopped by SIGINT, by SIGTERM or by kill -9 and
// restarted from checkpoint_last continues with bit-identical later JSON log lines (loss, ppl,
// lr, gnorm, clip, validation loss) and ends with bit-identical weights and optimizer state.
// The child stalls at a known update (STRETCH_TEST_STALL_AT_UPDATE, train/test_hooks.h) so each
// signal lands at a chosen point: mid-epoch, and on the last update of an epoch.
#include <gtest/gtest.h>

#include <cstring>

#include "cli/bf16_speed.h"
#include "ops/gemm.h"
#include "tensor/safetensors.h"
#include "train/checkpoint.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

using namespace testing;
namespace fs = std::filesystem;

// Dropout on (masks must be replayed exactly), NAG (its lr_old lives in the optimizer
// scalars), cosine with warmup (the lr is recomputed from num_updates), --update-freq 2 and
// several epochs (the data position), clipping, validation at every save.
std::vector<std::string> train_args(const std::string& data, const std::string& save_dir) {
  return {"train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "2", "--decoder-embed-dim", "32",
          "--decoder-ffn-embed-dim", "64", "--decoder-attention-heads", "2", "--dropout", "0.1",
          "--attention-dropout", "0.1", "--tokens-per-sample", "16", "--batch-size", "4",
          "--required-batch-size-multiple", "1", "--update-freq", "2", "--optimizer", "nag", "--lr", "0.05",
          "--lr-scheduler", "cosine", "--warmup-updates", "3", "--min-lr", "1e-4", "--clip-norm", "0.5",
          "--max-update", "24", "--save-interval-updates", "5", "--seed", "7", "--log-format", "json", "--log-full-precision",
          "--log-interval", "1", "--threads", "1", "--no-progress-bar", "--save-dir", save_dir};
}

// The deterministic fields of each log line, keyed by update number ("train_inner" lines) or
// "valid@<update>" (validation lines).
std::map<std::string, nlohmann::json> log_by_update(const std::string& out) {
  std::map<std::string, nlohmann::json> m;
  for (const auto& j : json_lines(out)) {
    if (j.contains("num_updates")) {
      nlohmann::json k;
      for (const char* f : {"epoch", "loss", "ppl", "lr", "gnorm", "clip", "wpb", "bsz"}) k[f] = j.at(f);
      m[std::to_string(j.at("num_updates").get<int64_t>())] = k;
    } else if (j.contains("valid_loss")) {
      // fairseq logs best_loss from the second validation on.
      m["valid@" + std::to_string(j.at("valid_num_updates").get<int64_t>())] = {
          j.at("valid_loss"), j.value("valid_best_loss", nlohmann::json())};
    } else if (j.contains("train_loss")) {
      m["train@epoch" + std::to_string(j.at("epoch").get<int64_t>())] = {j.at("train_loss"), j.at("train_lr")};
    }
  }
  return m;
}

int64_t ckpt_updates(const std::string& path) { return read_checkpoint(path).state.num_updates; }

// Every tensor (model and optimizer.*) and the train_state of two checkpoints are identical.
void expect_same_checkpoint(const std::string& a, const std::string& b) {
  const SafetensorsFile fa = load_safetensors(a), fb = load_safetensors(b);
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (const auto& [name, t] : fa.tensors) {
    const Tensor* u = fb.find(name);
    ASSERT_NE(u, nullptr) << name;
    ASSERT_EQ(t.shape(), u->shape()) << name;
    EXPECT_EQ(std::memcmp(t.bytes(), u->bytes(), t.nbytes()), 0) << "tensor " << name << " differs";
  }
  EXPECT_EQ(fa.metadata.at("train_state"), fb.metadata.at("train_state"));
  EXPECT_EQ(fa.metadata.at("optimizer"), fb.metadata.at("optimizer"));
}

class Resume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    data_ = new std::string(make_data_bin(*dir_));
    // The uninterrupted reference run.
    const RunResult r = run_stretch(train_args(*data_, *dir_ / "ref"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    reference_ = new std::map<std::string, nlohmann::json>(log_by_update(r.out));
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete data_;
    delete dir_;
  }

  // The last update of epoch 1 in the reference run.
  static int64_t last_update_of_epoch1() {
    int64_t last = 0;
    for (const auto& [k, v] : *reference_)
      if (k.find('@') == std::string::npos && v.at("epoch") == 1) last = std::max<int64_t>(last, std::stoll(k));
    return last;
  }

  // Stops a run at `stall_at` with `sig`, restarts it, and compares with the reference.
  // `resumed_from`: the update the saved checkpoint_last holds when the restart begins.
  void stop_and_resume(int sig, int64_t stall_at, int64_t expect_resumed_from, const std::string& name) {
    const std::string save = *dir_ / name;
    int64_t resumed_from = -1;
    {
      Child c(train_args(*data_, save), {{"STRETCH_TEST_STALL_AT_UPDATE", std::to_string(stall_at)}});
      ASSERT_TRUE(c.wait_for_stderr("stretch-test: stalled at update " + std::to_string(stall_at)));
      c.signal(sig);
      const RunResult r = c.wait();
      EXPECT_EQ(r.exit_code, 128 + sig) << r.err;
      if (sig != SIGKILL) {
        EXPECT_NE(r.err.find("received signal " + std::to_string(sig)), std::string::npos) << r.err;
      }
      // What the stopped run logged equals the reference, update by update.
      for (const auto& [k, v] : log_by_update(r.out)) EXPECT_EQ(v, reference_->at(k)) << "stopped run, " << k;
      EXPECT_EQ(count_of(r.out, "\"num_updates\""), stall_at);
      resumed_from = ckpt_updates(save + "/checkpoint_last.pt");
      EXPECT_EQ(resumed_from, expect_resumed_from);
      for (const auto& e : fs::directory_iterator(save))
        EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
    }
    const RunResult r = run_stretch(train_args(*data_, save));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("resumed from " + save + "/checkpoint_last.pt at update " + std::to_string(resumed_from)),
              std::string::npos)
        << r.err;
    const auto resumed = log_by_update(r.out);
    // Every update after the checkpoint is logged again, bit for bit as in the reference.
    int64_t compared = 0;
    for (const auto& [k, v] : resumed) {
      ASSERT_TRUE(reference_->count(k)) << "resumed run logged " << k << ", the reference did not";
      EXPECT_EQ(v, reference_->at(k)) << "resumed run, " << k;
      compared += k.find('@') == std::string::npos;
    }
    EXPECT_EQ(compared, 24 - resumed_from);
    expect_same_checkpoint(save + "/checkpoint_last.pt", *dir_ / "ref/checkpoint_last.pt");
  }

  static TempDir* dir_;
  static std::string* data_;
  static std::map<std::string, nlohmann::json>* reference_;
};
TempDir* Resume::dir_ = nullptr;
std::string* Resume::data_ = nullptr;
std::map<std::string, nlohmann::json>* Resume::reference_ = nullptr;

TEST_F(Resume, ReferenceRunCrossesEpochsAndLogsFairseqFields) {
  // The scenario is only meaningful if the run spans several epochs and logs what fairseq logs.
  ASSERT_EQ(reference_->count("24"), 1u);
  EXPECT_GE(reference_->at("24").at("epoch").get<int64_t>(), 3);
  EXPECT_TRUE(reference_->count("train@epoch1"));
  EXPECT_TRUE(reference_->count("valid@5"));
  const int64_t e1 = last_update_of_epoch1();
  EXPECT_GT(e1, 5);
  EXPECT_LT(e1, 24);
  // The loss falls (the synthetic corpus is learnable): later updates below the first.
  EXPECT_LT(reference_->at("24").at("loss").get<double>(), reference_->at("1").at("loss").get<double>());
}

TEST_F(Resume, SigintMidEpoch) { stop_and_resume(SIGINT, 7, 7, "sigint"); }

TEST_F(Resume, SigtermOnTheLastUpdateOfAnEpoch) {
  const int64_t e1 = last_update_of_epoch1();
  stop_and_resume(SIGTERM, e1, e1, "sigterm");
}

TEST_F(Resume, KillNineContinuesFromTheLastSavedCheckpoint) {
  // No chance to save: the restart begins at the last interval checkpoint (update 10), or at
  // the end-of-epoch checkpoint if that came later (one written before the stall at 12).
  const int64_t e1 = last_update_of_epoch1();
  const int64_t expected = std::max<int64_t>(10, e1 < 12 ? e1 : 0);
  stop_and_resume(SIGKILL, 12, expected, "sigkill");
}

// --bf16 where the CPU's choice of products is measured at startup (cli/bf16_speed.h, kind Dot: Zen 4,
// Zen 5, an Intel Xeon without AMX; kind Amx: native or native-fp32-attention): a resume keeps the
// checkpoint's choice. The run starts with the products this CPU would NOT choose (forced by STRETCH_BF16_PRODUCTS), so the resume's own measurement
// disagrees with the checkpoint every time; the two choices give different roundings, so keeping the
// wrong one fails the comparison (the control shows it).
TEST(Bf16Resume, KeepsTheCheckpointsBf16Products) {
  const ops::Bf16MatmulKind kind = ops::bf16_matmul_kind();
  if (kind != ops::Bf16MatmulKind::Dot && kind != ops::Bf16MatmulKind::Amx)
    GTEST_SKIP() << "bf16 products are chosen by measurement only on a CPU with avx512_bf16 or AMX ("
                 << ops::cpu_isa_summary() << "): nothing to keep across a resume here";
  const cli::Bf16Choice here = cli::choose_bf16_products(cli::measure_bf16_speed(), nullptr, "--bf16");
  const std::string other = here.products == ops::Bf16Products::Native ? "fp32" : "native";
  const std::string mine = ops::bf16_products_name(here.products);
  TempDir dir;
  const std::string data = make_data_bin(dir);
  auto args = [&](const std::string& save, const char* max_update) {
    std::vector<std::string> a = train_args(data, save);
    a.insert(a.end(), {"--bf16", "--lr-scheduler", "inverse_sqrt", "--max-update", max_update});  // no period to change
    return a;
  };
  const RunResult ref = run_stretch(args(dir / "ref", "6"), {{"STRETCH_BF16_PRODUCTS", other}});
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_EQ(read_checkpoint(dir / "ref/checkpoint_last.pt").state.bf16_products, other);
  const auto want = log_by_update(ref.out);
  for (const bool control : {false, true}) {
    const std::string save = dir / (control ? "control" : "resumed");
    const RunResult first = run_stretch(args(save, "3"), {{"STRETCH_BF16_PRODUCTS", other}});
    ASSERT_EQ(first.exit_code, 0) << first.err;
    // The resume: no variable (this CPU's measured choice, `mine`), or the control forcing `mine`.
    std::map<std::string, std::string> env;
    if (control) env["STRETCH_BF16_PRODUCTS"] = mine;
    const RunResult r = run_stretch(args(save, "6"), env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto got = log_by_update(r.out);
    int64_t same = 0, updates = 0;
    for (const auto& [k, v] : got)
      if (k.find('@') == std::string::npos) {
        ++updates;
        same += want.count(k) && want.at(k) == v;
      }
    EXPECT_EQ(updates, 3);
    if (!control) {
      EXPECT_NE(r.err.find("keeps its checkpoint's bf16 products (" + other), std::string::npos) << r.err;
      EXPECT_EQ(same, 3) << "the resumed updates differ from the uninterrupted run's";
      expect_same_checkpoint(save + "/checkpoint_last.pt", dir / "ref/checkpoint_last.pt");
    } else {
      EXPECT_NE(r.err.find("other roundings than an uninterrupted run"), std::string::npos) << r.err;
      EXPECT_LT(same, 3) << "forcing the other products changed nothing: this test could not fail";
      EXPECT_EQ(read_checkpoint(save + "/checkpoint_last.pt").state.bf16_products, mine);
    }
  }
}

}  // namespace
}  // namespace stretch::train
