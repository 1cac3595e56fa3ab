#include <gtest/gtest.h>

#include "cli/overrides.h"
#include "core/error.h"

namespace stretch::cli {

TEST(ModelOverrides, PythonDictLiteralFromTheAlibiReadme) {
  auto j = parse_model_overrides("{'max_tokens':1024, 'tokens_per_sample':1024, 'max_target_positions':1024}");
  EXPECT_EQ(j.at("max_tokens"), 1024);
  EXPECT_EQ(j.at("tokens_per_sample"), 1024);
  EXPECT_EQ(j.at("max_target_positions"), 1024);
}

TEST(ModelOverrides, BooleansAndShellStrippedQuotes) {
  // The Transformer-XL README form after the shell removed the quotes.
  auto j = parse_model_overrides("{mem_len:2100,clamp_len:820,same_length:True}");
  EXPECT_EQ(j.at("mem_len"), 2100);
  EXPECT_EQ(j.at("same_length"), true);
  auto k = parse_model_overrides(R"({"pos": "alibi", "dropout": 0.25, "x": None, "y": False})");
  EXPECT_EQ(k.at("pos"), "alibi");
  EXPECT_DOUBLE_EQ(k.at("dropout").get<double>(), 0.25);
  EXPECT_TRUE(k.at("x").is_null());
  EXPECT_EQ(k.at("y"), false);
  EXPECT_TRUE(parse_model_overrides("").empty());
}

TEST(ModelOverrides, MalformedIsAUsageError) {
  try {
    parse_model_overrides("{'a': 1");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("--model-overrides"), std::string::npos);
  }
  EXPECT_THROW(parse_model_overrides("[1, 2]"), Error);
}

// tests/fuzz/corpus/model_overrides/crash-invalid-utf8: bytes that are not UTF-8 in a key or value
// escaped as nlohmann's type_error ("a bug in stretch") instead of a usage error.
TEST(ModelOverrides, InvalidUtf8IsAUsageError) {
  for (const char* text : {"{'dr\xff\xffopout': 0.1}", "{'arch': 'tr\xc3'}"}) {
    try {
      parse_model_overrides(text);
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find("--model-overrides: the string"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    }
  }
}

// Seed 004's Transformer-XL evaluation writes --model-overrides {mem_len:2100,clamp_len:820,same_length:True}
// without quotes; bash's brace expansion turns it into three words, which must become one dict again.
TEST(ModelOverrides, BraceExpandedWordsAreJoinedIntoOneDict) {
  using V = std::vector<std::string>;
  V a = {"eval-lm", "data", "--model-overrides", "mem_len:2100", "clamp_len:820", "same_length:True",
         "--gen-subset", "valid"};
  join_brace_expanded_overrides(a);
  EXPECT_EQ(a, (V{"eval-lm", "data", "--model-overrides", "{mem_len:2100,clamp_len:820,same_length:True}",
                  "--gen-subset", "valid"}));
  const auto j = parse_model_overrides(a[3]);
  EXPECT_EQ(j.at("mem_len"), 2100);
  EXPECT_EQ(j.at("clamp_len"), 820);
  EXPECT_EQ(j.at("same_length"), true);

  // The = form, a lone word (no braces: bash expands nothing), and a data directory after the words.
  V b = {"--model-overrides=mem_len:64", "tokens_per_sample:8", "~/data/enwik8/data-bin/"};
  join_brace_expanded_overrides(b);
  EXPECT_EQ(b, (V{"--model-overrides", "{mem_len:64,tokens_per_sample:8}", "~/data/enwik8/data-bin/"}));
  V c = {"--model-overrides", "dropout:0.25", "data:bin"};  // "data:bin" is key:value too: joined
  join_brace_expanded_overrides(c);
  EXPECT_EQ(c, (V{"--model-overrides", "{dropout:0.25,data:bin}"}));

  // Left alone: a quoted dict, a path with a colon, words not after the flag, a flag as the last word.
  for (const V& same : {V{"--model-overrides", "{'mem_len': 2100}", "same_length:True"},
                        V{"--model-overrides", "/tmp/a:b"}, V{"--path", "a:1", "b:2"}, V{"--model-overrides"},
                        V{"--model-overrides", "2100:mem_len"}, V{"--model-overrides", "mem_len:"}}) {
    V d = same;
    join_brace_expanded_overrides(d);
    EXPECT_EQ(d, same);
  }
}

}  // namespace stretch::cli
