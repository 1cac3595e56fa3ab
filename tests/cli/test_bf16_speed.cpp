// cli/bf16_speed.h: how --bf16 computes its products, chosen on given rates (the measurement is
// InfoPeak's and bench_peak's; the binary on this CPU: Bf16Products.* in test_bf16_flag.cpp).
#include "cli/bf16_speed.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace stretch::cli {
namespace {

using ops::Bf16MatmulKind;
using ops::Bf16Products;

const Bf16Speed kXeon{Bf16MatmulKind::Dot, 176.4, 85.6};  // an Intel Xeon without AMX (docs/BENCHMARKS.md)
const Bf16Speed kZen5{Bf16MatmulKind::Dot, 287.0, 574.0};

TEST(Bf16Choice, DotSlowerThanFp32RunsFp32FmaAndSaysWhyWithTheRatio) {
  const Bf16Choice c = choose_bf16_products(kXeon, nullptr, "--amp");
  EXPECT_EQ(c.products, Bf16Products::Fp32Fma);
  ASSERT_TRUE(c.info.has_value());
  EXPECT_FALSE(c.warning.has_value());
  EXPECT_NE(c.info->find("--amp: bf16 products run as fp32 FMAs on bf16-rounded operands"), std::string::npos) << *c.info;
  EXPECT_NE(c.info->find("this CPU's bf16 dot product runs at 0.49x its fp32 FMA rate"), std::string::npos) << *c.info;
  EXPECT_NE(c.info->find("STRETCH_BF16_PRODUCTS=native"), std::string::npos) << *c.info;
  EXPECT_EQ(choose_bf16_products({Bf16MatmulKind::Dot, 100.0, 99.0}, "", "--bf16").products, Bf16Products::Fp32Fma);
}

TEST(Bf16Choice, DotAtOrAboveFp32AndAmxStayNativeSilently) {
  for (const Bf16Speed& s : {kZen5, Bf16Speed{Bf16MatmulKind::Dot, 100.0, 100.0}, Bf16Speed{Bf16MatmulKind::Amx, 0, 0},
                             Bf16Speed{Bf16MatmulKind::Dot, 0, 0} /* not measured: no claim */}) {
    const Bf16Choice c = choose_bf16_products(s, nullptr, "--bf16");
    EXPECT_EQ(c.products, Bf16Products::Native);
    EXPECT_FALSE(c.info.has_value()) << *c.info;
    EXPECT_FALSE(c.warning.has_value()) << *c.warning;
  }
}

// An Intel Xeon model 167 (docs/BENCHMARKS.md): AMX runs oneDNN's products, vdpbf16ps at 0.50x fp32;
// the attention's bf16 tiles on AMX too, or (a build without that kernel) with vdpbf16ps.
const Bf16Speed kAmx167{Bf16MatmulKind::Amx, 236.1, 118.1};
const Bf16Speed kAmx167Tiles{Bf16MatmulKind::Amx, 236.1, 118.1, /*attention_on_amx=*/true};

TEST(Bf16Choice, AmxWithTheAttentionOnTheTilesStaysNativeSilently) {
  const Bf16Choice c = choose_bf16_products(kAmx167Tiles, nullptr, "--bf16");
  EXPECT_EQ(c.products, Bf16Products::Native);
  EXPECT_FALSE(c.info.has_value()) << *c.info;
  EXPECT_FALSE(c.warning.has_value()) << *c.warning;
  const Bf16Choice forced = choose_bf16_products(kAmx167Tiles, "native-fp32-attention", "--bf16");
  EXPECT_EQ(forced.products, Bf16Products::NativeFp32Attention);
  ASSERT_TRUE(forced.info.has_value());
  EXPECT_NE(forced.info->find("the attention in fp32 (STRETCH_BF16_PRODUCTS=native-fp32-attention)"),
            std::string::npos)
      << *forced.info;
  EXPECT_FALSE(forced.warning.has_value()) << *forced.warning;
}

TEST(Bf16Choice, AmxWithASlowerDotRunsTheAttentionInFp32AndSaysWhy) {
  const Bf16Choice c = choose_bf16_products(kAmx167, nullptr, "--bf16");
  EXPECT_EQ(c.products, Bf16Products::NativeFp32Attention);
  ASSERT_TRUE(c.info.has_value());
  EXPECT_FALSE(c.warning.has_value());
  EXPECT_NE(c.info->find("--bf16: bf16 products on oneDNN's AMX kernels, the attention in fp32: this CPU's bf16 dot "
                         "product runs at 0.50x its fp32 FMA rate"),
            std::string::npos)
      << *c.info;
  EXPECT_NE(c.info->find("STRETCH_BF16_PRODUCTS=native runs them in bf16"), std::string::npos) << *c.info;
  const Bf16Choice native = choose_bf16_products(kAmx167, "native", "--bf16");
  EXPECT_EQ(native.products, Bf16Products::Native);
  ASSERT_TRUE(native.warning.has_value());
  EXPECT_NE(native.warning->find("the attention's bf16 tiles are slower than fp32 ones here"), std::string::npos)
      << *native.warning;
  EXPECT_EQ(choose_bf16_products(kAmx167, "fp32", "--bf16").products, Bf16Products::Fp32Fma);
  // AMX with a dot product at or above fp32 (none known; the rule, not a CPU): all native, silently.
  const Bf16Choice fast = choose_bf16_products({Bf16MatmulKind::Amx, 100.0, 200.0}, nullptr, "--bf16");
  EXPECT_EQ(fast.products, Bf16Products::Native);
  EXPECT_FALSE(fast.info.has_value());
}

TEST(Bf16Choice, ProductNamesRoundTripAndOthersAreRefused) {
  for (const Bf16Products p : {Bf16Products::Native, Bf16Products::Fp32Fma, Bf16Products::NativeFp32Attention}) {
    Bf16Products back = p == Bf16Products::Native ? Bf16Products::Fp32Fma : Bf16Products::Native;
    EXPECT_TRUE(ops::parse_bf16_products(ops::bf16_products_name(p), &back)) << ops::bf16_products_name(p);
    EXPECT_EQ(back, p);
  }
  EXPECT_STREQ(ops::bf16_products_name(Bf16Products::NativeFp32Attention), "native-fp32-attention");
  Bf16Products untouched = Bf16Products::Fp32Fma;
  EXPECT_FALSE(ops::parse_bf16_products("amx", &untouched));
  EXPECT_FALSE(ops::parse_bf16_products("", &untouched));
  EXPECT_EQ(untouched, Bf16Products::Fp32Fma);
}

TEST(Bf16Choice, EmulatedRunsFp32Fma) {
  const Bf16Choice c = choose_bf16_products({Bf16MatmulKind::Emulated, 0, 0}, nullptr, "--fp16");
  EXPECT_EQ(c.products, Bf16Products::Fp32Fma);
  ASSERT_TRUE(c.info.has_value());
  EXPECT_NE(c.info->find("--fp16: bf16 products run as fp32 FMAs"), std::string::npos) << *c.info;
  EXPECT_NE(c.info->find("oneDNN has no native bf16 kernels here (oneDNN ISA "), std::string::npos) << *c.info;
}

TEST(Bf16Choice, TheEnvironmentOverridesAndNativeWhereSlowerIsWarned) {
  const Bf16Choice native = choose_bf16_products(kXeon, "native", "--bf16");
  EXPECT_EQ(native.products, Bf16Products::Native);
  ASSERT_TRUE(native.warning.has_value());
  EXPECT_NE(native.warning->find("--bf16 with STRETCH_BF16_PRODUCTS=native: this CPU's bf16 dot product runs at 0.49x"),
            std::string::npos)
      << *native.warning;
  const Bf16Choice fast_native = choose_bf16_products(kZen5, "native", "--bf16");
  EXPECT_EQ(fast_native.products, Bf16Products::Native);
  EXPECT_FALSE(fast_native.warning.has_value());
  const Bf16Choice fp32 = choose_bf16_products(kZen5, "fp32", "--bf16");
  EXPECT_EQ(fp32.products, Bf16Products::Fp32Fma);
  ASSERT_TRUE(fp32.info.has_value());
  EXPECT_NE(fp32.info->find("(STRETCH_BF16_PRODUCTS=fp32)"), std::string::npos) << *fp32.info;
  try {
    choose_bf16_products(kZen5, "fast", "--bf16");
    ADD_FAILURE() << "STRETCH_BF16_PRODUCTS=fast accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("STRETCH_BF16_PRODUCTS=fast"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stretch::cli
