// tests/tensor/test_pickle.cpp — the restricted pickle reader (tensor/pickle.h) and the torch
// containers (tensor/torch_file.h): values a real torch.save pickle holds, refusal of every
// global off the allowlist and of unknown opcodes (nothing executed), bounds on truncated or
// corrupt input (mutations of a real fairseq checkpoint's data.pkl end in stretch::Error, never
// a crash), strides/offsets and fp16 in tensors, a shared storage read twice.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tensor/pickle.h"
#include "tensor/pickle_writer.h"
#include "tensor/torch_file.h"
#include "testing.h"

namespace stretch {
namespace {

using pickle::Kind;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::string from_hex(const std::string& h) {
  std::string out;
  for (size_t k = 0; k + 1 < h.size(); k += 2) out.push_back(static_cast<char>(std::stoi(h.substr(k, 2), nullptr, 16)));
  return out;
}

pickle::ValuePtr parse(const std::string& s) {
  auto b = bytes(s);
  return pickle::parse_pickle(b.data(), b.size(), "test.pkl");
}

std::string parse_error(const std::string& s) {
  return testing::error_of([&] { parse(s); });
}

TEST(Pickle, DictOfScalarsListsAndMemo) {
  // Python: pickle.dumps({'a': 1, 'b': [True, None, 2.5], 'c': 'x'}, protocol=2) with a memo get.
  const std::string p = from_hex(
      "80027d71002858010000006171014b0158010000006271025d710328884e47400400000000000065"
      "58010000006371046801752e");
  auto v = parse(p);
  ASSERT_EQ(v->kind, Kind::Dict);
  EXPECT_EQ(v->get("a")->i, 1);
  ASSERT_EQ(v->get("b")->kind, Kind::List);
  ASSERT_EQ(v->get("b")->items.size(), 3u);
  EXPECT_TRUE(v->get("b")->items[0]->b);
  EXPECT_EQ(v->get("b")->items[1]->kind, Kind::None);
  EXPECT_DOUBLE_EQ(v->get("b")->items[2]->f, 2.5);
  EXPECT_EQ(v->get("c")->s, "a");  // BINGET 1 = the memoized 'a'
}

TEST(Pickle, RefusesGlobalsOffTheAllowlist) {
  // What pickle.dumps of an object whose __reduce__ is (os.system, ('touch x',)) starts with.
  const std::string e = parse_error(std::string("\x80\x02" "cposix\nsystem\nq\x00X\x07\x00\x00\x00touch xq\x01\x85R.", 34));
  EXPECT_NE(e.find("posix.system"), std::string::npos) << e;
  EXPECT_NE(e.find("allowlist"), std::string::npos) << e;
  EXPECT_NE(e.find("test.pkl"), std::string::npos) << e;
  EXPECT_NE(parse_error("\x80\x02" "cbuiltins\neval\n.").find("builtins.eval"), std::string::npos);
  EXPECT_NE(parse_error("\x80\x02" "ctorch\nload\n.").find("torch.load"), std::string::npos);
}

TEST(Pickle, RefusesOpcodesItDoesNotKnow) {
  // INST (text-protocol object construction) and STACK_GLOBAL are refused by name of opcode.
  EXPECT_NE(parse_error("\x80\x02i__builtin__\nobject\n.").find("opcode 0x69"), std::string::npos);
  EXPECT_NE(parse_error("\x80\x04\x93.").find("opcode 0x93"), std::string::npos);
}

TEST(Pickle, TruncatedAndInconsistentInputIsAnError) {
  EXPECT_NE(parse_error("\x80\x02}").find("without STOP"), std::string::npos);
  EXPECT_NE(parse_error(std::string("\x80\x02X\xff\xff\xff\x7f", 7)).find("past the end"), std::string::npos);
  EXPECT_NE(parse_error("\x80\x02s.").find("underflow"), std::string::npos);
  EXPECT_NE(parse_error("\x80\x02h\x05.").find("memo entry 5"), std::string::npos);
  EXPECT_NE(parse_error("\x80\x02NN.").find("STOP with 2"), std::string::npos);
  EXPECT_NE(parse_error("\x80\x02" "ccollections\nOrderedDict\nK\x01\x85R.").find("OrderedDict built from"),
            std::string::npos);
}

TEST(Pickle, CyclesAndDeepNestsAreRefusedAndFreed) {
  // Python: l = []; l.append(l); pickle.dumps(l, protocol=2) — torch.save never writes a cycle;
  // a cycle would leak (shared_ptr) and overflow the stack when printed. Under ASan/LSan (the
  // sanitizer suite and the pickle fuzzer) these also check that nothing leaks.
  EXPECT_NE(parse_error(std::string("\x80\x02]q\x00h\x00" "a.", 9)).find("cycle"), std::string::npos);
  // The same cycle built, dropped (POP) and a None returned: parses, and nothing leaks.
  auto v = parse(std::string("\x80\x02]q\x00h\x00" "a0N.", 11));
  EXPECT_EQ(v->kind, Kind::None);
  // A cycle inside a failed parse (no STOP) is freed too.
  EXPECT_NE(parse_error(std::string("\x80\x02]q\x00h\x00" "a", 8)).find("without STOP"), std::string::npos);
  // 600 nested lists (fairseq checkpoints nest < 10 deep): refused, past the 512 limit.
  std::string deep = "\x80\x02" + std::string(600, ']') + std::string(599, 'a') + ".";
  EXPECT_NE(parse_error(deep).find("deeper than 512"), std::string::npos);
  // A DAG is not a cycle: a = []; pickle.dumps([a, a], protocol=2).
  auto dag = parse(std::string("\x80\x02]q\x00(]q\x01h\x01" "e.", 13));
  ASSERT_EQ(dag->kind, Kind::List);
  ASSERT_EQ(dag->items.size(), 2u);
  EXPECT_EQ(dag->items[0].get(), dag->items[1].get());
}

TEST(PickleWriter, WhatItWritesParsesBack) {
  pickle::Writer w;
  w.empty_dict();
  w.mark();
  w.str("n");
  w.integer(-5);
  w.str("big");
  w.integer(int64_t{1} << 40);
  w.str("x");
  w.real(0.25);
  w.str("args");
  w.namespace_begin();
  w.mark();
  w.str("arch");
  w.str("transformer_lm");
  w.namespace_end();
  w.str("t");
  w.tensor("HalfStorage", "0", 6, {2, 3});
  w.setitems_from_mark();
  const std::vector<uint8_t> b = w.finish();
  auto v = pickle::parse_pickle(b.data(), b.size(), "written");
  EXPECT_EQ(v->get("n")->i, -5);
  EXPECT_EQ(v->get("big")->i, int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(v->get("x")->f, 0.25);
  ASSERT_EQ(v->get("args")->kind, Kind::Object);
  EXPECT_EQ(v->get("args")->get("arch")->s, "transformer_lm");
  const auto& t = v->get("t")->tensor;
  EXPECT_EQ(t.storage.dtype, "Half");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.stride, (std::vector<int64_t>{3, 1}));
}

const std::string kFixtures = std::string(STRETCH_SOURCE_DIR) + "/tests/fixtures/fairseq/";

TEST(TorchFile, ReadsZipAndLegacyContainersOfRealFairseqCheckpoints) {
  const TorchFile z = load_torch_file(kFixtures + "learned_pre_untied.pt");
  const TorchFile l = load_torch_file(kFixtures + "legacy.pt");
  EXPECT_EQ(z.container, "zip");
  EXPECT_EQ(l.container, "legacy");
  const auto* zt = z.root->get("model")->get("decoder.embed_tokens.weight");
  const auto* lt = l.root->get("model")->get("decoder.embed_tokens.weight");
  ASSERT_TRUE(zt && lt);
  ASSERT_EQ(zt->kind, Kind::Tensor);
  EXPECT_EQ(zt->tensor.shape, (std::vector<int64_t>{504, 32}));
  const Tensor a = z.to_f32(zt->tensor, "a"), b = l.to_f32(lt->tensor, "b");
  ASSERT_EQ(a.numel(), b.numel());
  for (int64_t k = 0; k < a.numel(); ++k) ASSERT_EQ(a.f32()[k], b.f32()[k]) << k;
  // The config survives as plain values.
  EXPECT_EQ(z.root->get("cfg")->get("model")->get("decoder_layers")->i, 2);
  EXPECT_TRUE(z.root->get("cfg")->get("model")->get("decoder_learned_pos")->b);
}

TEST(TorchFile, Fp16WeightsAreTheRoundedFp32Ones) {
  const TorchFile f32 = load_torch_file(kFixtures + "sin_post_tied.pt");
  const TorchFile f16 = load_torch_file(kFixtures + "fp16.pt");
  const auto* a = f32.root->get("model")->get("decoder.layers.0.fc1.weight");
  const auto* h = f16.root->get("model")->get("decoder.layers.0.fc1.weight");
  EXPECT_EQ(h->tensor.storage.dtype, "Half");
  const Tensor x = f32.to_f32(a->tensor, "x"), y = f16.to_f32(h->tensor, "y");
  for (int64_t k = 0; k < x.numel(); ++k) ASSERT_NEAR(x.f32()[k], y.f32()[k], 1e-3f * std::abs(x.f32()[k]) + 1e-7f);
}

TEST(TorchFile, TiedTensorsShareOneStorageAndStridesAreHonoured) {
  const TorchFile f = load_torch_file(kFixtures + "sin_post_tied.pt");
  const auto* e = f.root->get("model")->get("decoder.embed_tokens.weight");
  const auto* o = f.root->get("model")->get("decoder.output_projection.weight");
  EXPECT_EQ(e->tensor.storage.key, o->tensor.storage.key);  // saved twice, one storage
  // A transposed view of the same storage: stride (1, 32) over [32, 504].
  pickle::TensorRef t = e->tensor;
  t.shape = {32, 504};
  t.stride = {1, 32};
  const Tensor full = f.to_f32(e->tensor, "e"), tr = f.to_f32(t, "eT");
  for (int64_t i = 0; i < 504; i += 37)
    for (int64_t j = 0; j < 32; j += 5) ASSERT_EQ(tr.f32()[j * 504 + i], full.f32()[i * 32 + j]);
  t.offset = 1;  // one element past the end
  EXPECT_NE(testing::error_of([&] { f.to_f32(t, "bad"); }).find("corrupt offset/stride"), std::string::npos);
}

TEST(Pickle, MutationsOfARealCheckpointNeverCrash) {
  // A small in-process fuzz loop: byte flips, truncations and insertions of a real data.pkl
  // either parse or raise stretch::Error (ASan/UBSan builds check the memory side).
  // The legacy container's 4th pickle is the checkpoint object itself (after the magic
  // number, the protocol version and sys_info).
  std::ifstream in(kFixtures + "legacy.pt", std::ios::binary);
  std::vector<uint8_t> file(std::istreambuf_iterator<char>(in), {});
  size_t at = 0;
  for (int k = 0; k < 3; ++k) {
    size_t used = 0;
    pickle::parse_pickle(file.data() + at, file.size() - at, "legacy.pt", &used);
    at += used;
  }
  size_t used = 0;
  auto root = pickle::parse_pickle(file.data() + at, file.size() - at, "legacy.pt", &used);
  ASSERT_EQ(root->kind, Kind::Dict);
  std::vector<uint8_t> pkl(file.begin() + static_cast<std::ptrdiff_t>(at),
                           file.begin() + static_cast<std::ptrdiff_t>(at + used));
  ASSERT_GT(pkl.size(), 1000u);
  std::mt19937 rng(1234);
  int errors = 0, parsed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> m = pkl;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % m.size();
      switch (rng() % 3) {
        case 0: m[at] = static_cast<uint8_t>(rng()); break;
        case 1: m.resize(std::max<size_t>(1, at)); break;
        default: m.insert(m.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng())); break;
      }
    }
    try {
      size_t n = 0;
      pickle::parse_pickle(m.data(), m.size(), "mutant", &n);
      ASSERT_LE(n, m.size());
      ++parsed;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_EQ(errors + parsed, 3000);
}

}  // namespace
}  // namespace stretch
