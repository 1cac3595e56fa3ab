// tests/optim/test_lr_scheduler.cpp — the schedules against REFERENCE §3.4's test values and
// values worked out by hand from fairseq's formulas (each written next to its numbers).
//
// Tolerances: lr values are doubles computed in a few operations; where the expected value
// is an exact decimal the error is a few ulp (1e-15 relative is ample, kTight), except where
// cos(π/2) or a cosine near π enters (documented at the check).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>

#include "core/error.h"
#include "optim/lr_scheduler.h"

namespace stretch::optim {
namespace {

constexpr double kTight = 1e-15;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The ALiBi wikitext-103 command (REFERENCE §3): --lr 1.0 --min-lr 1e-4 --warmup-updates 16000
// --warmup-init-lr 1e-7 --lr-period-updates 270000 --t-mult 2 --lr-shrink 0.75
SchedulerConfig alibi_cosine() {
  return {.kind = SchedulerKind::Cosine,
          .lr = {1.0},
          .warmup_updates = 16000,
          .warmup_init_lr = 1e-7,
          .min_lr = 1e-4,
          .max_update = 286000,
          .t_mult = 2,
          .lr_period_updates = 270000,
          .lr_shrink = 0.75};
}

TEST(Cosine, ReferenceTestValues) {
  LrSchedule s(alibi_cosine());
  EXPECT_EQ(s.lr_at(0), 1e-7);
  // 1e-7 + 1·(1 − 1e-7)/16000 = 1e-7 + 6.24999375e-5
  EXPECT_NEAR(s.lr_at(1), 6.259999375e-5, 6.26e-5 * kTight);
  EXPECT_NEAR(s.lr_at(8000), 0.50000005, kTight);
  EXPECT_NEAR(s.lr_at(16000), 1.0, kTight);
  // c = 135000 = P/2: cos(π/2) is 6e-17 in double, so 1e-12 covers it.
  EXPECT_NEAR(s.lr_at(151000), 0.50005, 1e-12);
  // c = 269999: lr = 1e-4 + ½·0.9999·(1 − cos(π/270000)) ≈ 1e-4 + 3.4e-11
  EXPECT_NEAR(s.lr_at(285999), 1e-4, 1e-10);
  EXPECT_GT(s.lr_at(285999), 1e-4);
  // Restart (unused by the recipe): i = 1, lr = 0.75·max_lr at the start of the period.
  EXPECT_NEAR(s.lr_at(286000), 0.75, kTight);
}

TEST(Cosine, PeriodFromMaxUpdate) {
  SchedulerConfig c = alibi_cosine();
  c.lr_period_updates = -1;  // P = max_update − W = 270000, the same schedule
  LrSchedule s(c);
  EXPECT_NEAR(s.lr_at(151000), 0.50005, 1e-12);
  c.max_update = 0;
  EXPECT_NE(error_of([&] { LrSchedule bad(c); }).find("--lr-period-updates or --max-update"), std::string::npos);
}

TEST(Cosine, TMultOneRestartsEveryPeriodWithShrink) {
  // lr 1, min 0.1, W = 10 from init 0, P = 100, t_mult 1, shrink 0.5.
  LrSchedule s({.kind = SchedulerKind::Cosine, .lr = {1.0}, .warmup_updates = 10, .warmup_init_lr = 0.0,
                .min_lr = 0.1, .t_mult = 1, .lr_period_updates = 100, .lr_shrink = 0.5});
  EXPECT_NEAR(s.lr_at(5), 0.5, kTight);            // warmup: 5·(1 − 0)/10
  EXPECT_NEAR(s.lr_at(10), 1.0, kTight);           // c = 0, i = 0: peak
  EXPECT_NEAR(s.lr_at(60), 0.55, 1e-12);           // c = 50: 0.1 + ½·0.9·(1 + cos(π/2))
  EXPECT_NEAR(s.lr_at(110), 0.5, kTight);          // c = 100: i = 1, s = 0.5: 0.05 + ½·0.45·2
  EXPECT_NEAR(s.lr_at(160), 0.275, 1e-12);         // c = 150: 0.05 + ½·0.45·1
  EXPECT_NEAR(s.lr_at(210), 0.25, kTight);         // c = 200: i = 2, s = 0.25: 0.025 + 0.225
  EXPECT_NEAR(s.lr_at(260), 0.1375, 1e-12);        // c = 250: 0.025 + ½·0.225
  // c = 175: i = 1, t_curr = 75: 0.05 + ½·0.45·(1 + cos(0.75π)) = 0.05 + 0.225·(1 − √½)
  EXPECT_NEAR(s.lr_at(185), 0.05 + 0.225 * (1 - std::sqrt(0.5)), 1e-12);
}

TEST(Cosine, TMultTwoGrowsPeriods) {
  // lr 1, min 0, no warmup, P = 100, t_mult 2, shrink 0.5: periods [0,100), [100,300), [300,700)
  LrSchedule s({.kind = SchedulerKind::Cosine, .lr = {1.0}, .min_lr = 0.0, .t_mult = 2,
                .lr_period_updates = 100, .lr_shrink = 0.5});
  EXPECT_NEAR(s.lr_at(0), 1.0, kTight);
  EXPECT_NEAR(s.lr_at(50), 0.5, 1e-12);
  EXPECT_NEAR(s.lr_at(100), 0.5, kTight);   // i = 1: log2(1 + 1) = 1, t_curr 0, s = 0.5
  EXPECT_NEAR(s.lr_at(200), 0.25, 1e-12);   // t_curr = 100 of t_i = 200
  EXPECT_NEAR(s.lr_at(300), 0.25, kTight);  // i = 2: log2(1 + 3) = 2, s = 0.25
  EXPECT_NEAR(s.lr_at(500), 0.125, 1e-12);  // t_curr = 200 of 400
  // warmup_init_lr < 0 means min_lr, and max_lr must exceed min_lr.
  LrSchedule w({.kind = SchedulerKind::Cosine, .lr = {1.0}, .warmup_updates = 4, .min_lr = 0.2,
                .lr_period_updates = 10});
  EXPECT_NEAR(w.lr_at(0), 0.2, kTight);
  EXPECT_NEAR(w.lr_at(2), 0.6, kTight);  // 0.2 + 2·(1 − 0.2)/4
  EXPECT_THROW(LrSchedule({.kind = SchedulerKind::Cosine, .lr = {0.1}, .min_lr = 0.1, .lr_period_updates = 10}), Error);
}

TEST(InverseSqrt, WarmupThenDecay) {
  // fairseq: lr_step = (lr − init)/W; decay = lr·sqrt(W); n < W: init + n·lr_step,
  // else decay·n^−0.5. lr 5e-4, W 4000 (the default), init default 0.
  LrSchedule s({.kind = SchedulerKind::InverseSqrt, .lr = {5e-4}});
  EXPECT_EQ(s.lr_at(0), 0.0);
  EXPECT_NEAR(s.lr_at(1000), 1.25e-4, 1e-4 * kTight * 10);  // 1000·5e-4/4000
  EXPECT_NEAR(s.lr_at(4000), 5e-4, 5e-4 * kTight * 10);     // 5e-4·√4000/√4000
  EXPECT_NEAR(s.lr_at(16000), 2.5e-4, 5e-4 * kTight * 10);  // 5e-4·√(4000/16000) = 5e-4/2
  EXPECT_NEAR(s.lr_at(64000), 1.25e-4, 5e-4 * kTight * 10);
  LrSchedule i({.kind = SchedulerKind::InverseSqrt, .lr = {1.0}, .warmup_updates = 10, .warmup_init_lr = 0.5});
  EXPECT_NEAR(i.lr_at(4), 0.7, kTight);  // 0.5 + 4·0.05
  EXPECT_THROW(LrSchedule({.kind = SchedulerKind::InverseSqrt, .warmup_updates = 0}), Error);
}

TEST(PolynomialDecay, WarmupLinearAndPower) {
  // n ≤ W: lr·n/W; n ≥ T: end; else (lr − end)·(1 − (n − W)/(T − W))^power + end
  LrSchedule s({.kind = SchedulerKind::PolynomialDecay, .lr = {1.0}, .warmup_updates = 10,
                .end_learning_rate = 0.1, .power = 2.0, .total_num_update = 110});
  EXPECT_EQ(s.lr_at(0), 0.0);  // fairseq: update 1 runs at lr 0 when warming up
  EXPECT_NEAR(s.lr_at(5), 0.5, kTight);
  EXPECT_NEAR(s.lr_at(10), 1.0, kTight);
  EXPECT_NEAR(s.lr_at(60), 0.9 * 0.25 + 0.1, kTight);  // pct = 1 − 50/100 = 0.5
  EXPECT_NEAR(s.lr_at(100), 0.9 * 0.01 + 0.1, 1e-14);  // pct = 0.1
  EXPECT_EQ(s.lr_at(110), 0.1);
  EXPECT_EQ(s.lr_at(5000), 0.1);
  LrSchedule lin({.kind = SchedulerKind::PolynomialDecay, .lr = {2.0}, .total_num_update = 8});
  EXPECT_EQ(lin.lr_at(0), 2.0);
  EXPECT_NEAR(lin.lr_at(6), 0.5, kTight);  // 2·(1 − 6/8)
}

TEST(Fixed, WarmupAndEpochs) {
  // Update u (1-based) uses lr·min(1, u/W): lr_at(n) = lr·(n+1)/W for n < W (REFERENCE §3.5).
  LrSchedule s({.kind = SchedulerKind::Fixed, .lr = {0.07}, .warmup_updates = 32000});
  EXPECT_NEAR(s.lr_at(0), 0.07 / 32000, 1e-20);
  EXPECT_NEAR(s.lr_at(15999), 0.035, kTight);
  EXPECT_EQ(s.lr_at(31999), 0.07);
  EXPECT_EQ(s.lr_at(1000000), 0.07);
  EXPECT_FALSE(s.depends_on_epoch());
  // One lr per epoch, the last one repeating; --force-anneal 4 --lr-shrink 0.5 anneals from
  // epoch 4 on: lr[last]·0.5^(epoch + 1 − 4).
  LrSchedule e({.kind = SchedulerKind::Fixed, .lr = {1.0, 0.5, 0.25}, .lr_shrink = 0.5, .force_anneal = 4});
  EXPECT_TRUE(e.depends_on_epoch());
  EXPECT_EQ(e.lr_at_epoch(7, 1), 1.0);
  EXPECT_EQ(e.lr_at_epoch(7, 2), 0.5);
  EXPECT_EQ(e.lr_at_epoch(7, 3), 0.25);
  EXPECT_EQ(e.lr_at_epoch(7, 4), 0.125);
  EXPECT_EQ(e.lr_at_epoch(7, 5), 0.0625);
  EXPECT_THROW(e.lr_at(7), Error);
  EXPECT_NE(error_of([] { LrSchedule({.kind = SchedulerKind::Cosine, .lr = {1.0, 0.5}, .max_update = 10}); })
                .find("takes one"),
            std::string::npos);
}

// fairseq FixedLRSchedule (0.12.2): the warmup factor (n+1)/W multiplies the epoch's base lr,
// also once --force-anneal has started shrinking it. W = 4, --lr 0.1,0.05, --force-anneal 2,
// --lr-shrink 0.5 (the seed 004 command itself is WarmupAndEpochs' 0.07 / 32000 case).
TEST(Fixed, WarmupAcrossForceAnneal) {
  LrSchedule s({.kind = SchedulerKind::Fixed, .lr = {0.1, 0.05}, .warmup_updates = 4, .lr_shrink = 0.5,
                .force_anneal = 2});
  EXPECT_NEAR(s.lr_at_epoch(0, 1), 0.025, 1e-17);    // 0.1·1/4
  EXPECT_NEAR(s.lr_at_epoch(1, 1), 0.05, 1e-17);     // 0.1·2/4
  EXPECT_NEAR(s.lr_at_epoch(2, 2), 0.01875, 1e-17);  // base 0.05·0.5^(2+1−2) = 0.025, ·3/4
  EXPECT_NEAR(s.lr_at_epoch(3, 2), 0.025, 1e-17);    // ·4/4
  EXPECT_NEAR(s.lr_at_epoch(4, 2), 0.025, 1e-17);    // warmup over: the base
  EXPECT_NEAR(s.lr_at_epoch(9, 3), 0.0125, 1e-17);   // 0.05·0.5^2
  // Without --force-anneal the last --lr repeats: epoch 5 uses lr[min(4, 1)] = 0.05.
  LrSchedule t({.kind = SchedulerKind::Fixed, .lr = {0.1, 0.05}});
  EXPECT_EQ(t.lr_at_epoch(100, 5), 0.05);
  EXPECT_EQ(t.lr_at_epoch(0, 1), 0.1);  // no warmup: the full lr from update 1
  // Bad values name the flag.
  EXPECT_NE(error_of([] { LrSchedule({.kind = SchedulerKind::Fixed, .lr = {0.1}, .lr_shrink = -1}); }).find("--lr-shrink"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule({.kind = SchedulerKind::Fixed, .lr = {0.1}, .warmup_updates = -1}); })
                .find("--warmup-updates"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule({.kind = SchedulerKind::Fixed, .lr = {0.1}, .force_anneal = 0}); })
                .find("--force-anneal"),
            std::string::npos);
}

TEST(Schedules, FlagNamesAndStopConditions) {
  for (auto k : {SchedulerKind::Fixed, SchedulerKind::InverseSqrt, SchedulerKind::Cosine, SchedulerKind::PolynomialDecay,
                 SchedulerKind::TriStage, SchedulerKind::Triangular})
    EXPECT_EQ(parse_scheduler_kind(scheduler_kind_name(k)), k);
  EXPECT_EQ(parse_scheduler_kind("tri_stage"), SchedulerKind::TriStage);
  EXPECT_EQ(parse_scheduler_kind("triangular"), SchedulerKind::Triangular);
  EXPECT_NE(error_of([] { parse_scheduler_kind("tri-stage"); }).find("--lr-scheduler tri-stage"), std::string::npos);
  // fairseq: stop when num_updates ≥ max_update (0 = no limit) or lr ≤ stop_min_lr.
  StopCriteria c{.max_update = 286000, .stop_min_lr = 1e-9};
  EXPECT_EQ(should_stop(c, 285999, 1e-4), StopReason::None);
  EXPECT_EQ(should_stop(c, 286000, 1e-4), StopReason::MaxUpdate);
  EXPECT_EQ(should_stop(c, 10, 1e-9), StopReason::MinLr);
  EXPECT_EQ(should_stop({}, 1000000000, 0.0), StopReason::None);
}

// tri_stage, lr 1, init_lr_scale 0.01, final 0.01, Ws 10, Hs 5, Ds 10:
//   warmup 0.01 + n·0.099; hold 1; decay exp(ln(0.01)·(n − 15)/10); then 0.01.
TEST(TriStage, StepsByHand) {
  LrSchedule s({.kind = SchedulerKind::TriStage, .lr = {1.0}, .warmup_steps = 10, .hold_steps = 5, .decay_steps = 10});
  EXPECT_NEAR(s.lr_at(0), 0.01, kTight);
  EXPECT_NEAR(s.lr_at(5), 0.505, kTight);
  EXPECT_NEAR(s.lr_at(9), 0.901, kTight);
  EXPECT_EQ(s.lr_at(10), 1.0);  // hold starts at Ws
  EXPECT_EQ(s.lr_at(14), 1.0);
  EXPECT_EQ(s.lr_at(15), 1.0);  // decay step 0: exp(0)
  EXPECT_NEAR(s.lr_at(20), 0.1, 0.1 * 1e-14);    // exp(ln(0.01)/2)
  EXPECT_NEAR(s.lr_at(25), 0.01, 0.01 * 1e-14);  // n ≤ Ws+Hs+Ds is still the decay: exp(ln 0.01)
  EXPECT_EQ(s.lr_at(26), 0.01);                  // final_lr_scale·lr
  EXPECT_EQ(s.lr_at(100000), 0.01);
}

// --phase-ratio (0.5, 0.25, 0.25) of --max-update 7: int(3.5), int(1.75), int(1.75) = 3, 1, 1.
TEST(TriStage, PhaseRatioTruncatesLikePythonInt) {
  LrSchedule s({.kind = SchedulerKind::TriStage, .lr = {2.0}, .max_update = 7,
                .phase_ratio = std::array<double, 3>{0.5, 0.25, 0.25}, .init_lr_scale = 0.5, .final_lr_scale = 0.25});
  EXPECT_EQ(s.lr_at(0), 1.0);                                // 0.5·2
  EXPECT_NEAR(s.lr_at(1), 1.0 + 1.0 / 3.0, kTight);          // rate (2 − 1)/3
  EXPECT_NEAR(s.lr_at(2), 1.0 + 2.0 / 3.0, kTight);
  EXPECT_EQ(s.lr_at(3), 2.0);                                // hold: 3 ≤ n < 4
  EXPECT_EQ(s.lr_at(4), 2.0);                                // decay step 0
  EXPECT_NEAR(s.lr_at(5), 0.5, 0.5 * kTight * 4);            // 2·exp(ln 0.25)
  EXPECT_EQ(s.lr_at(6), 0.5);                                // final 0.25·2
  EXPECT_EQ(parse_phase_ratio("(0.1, 0.4, 0.5)"), (std::array<double, 3>{0.1, 0.4, 0.5}));
  EXPECT_EQ(parse_phase_ratio("[0.1,0.4,0.5]"), (std::array<double, 3>{0.1, 0.4, 0.5}));
  EXPECT_NE(error_of([] { parse_phase_ratio("(0.1, 0.4)"); }).find("--phase-ratio '(0.1, 0.4)': expected 3 numbers"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_phase_ratio("0.1,0.4,0.5,0"); }).find("expected 3 numbers"), std::string::npos);
}

TEST(TriStage, RefusesWhatFairseqCannotRun) {
  auto err = [](SchedulerConfig c) { return error_of([&] { LrSchedule s(c); }); };
  SchedulerConfig ok{.kind = SchedulerKind::TriStage, .lr = {1.0}, .decay_steps = 10};
  EXPECT_EQ(err(ok), "(no error)");
  SchedulerConfig c = ok;
  c.decay_steps = 0;
  EXPECT_NE(err(c).find("--decay-steps 0: must be > 0 with --lr-scheduler tri_stage"), std::string::npos) << err(c);
  c = ok;
  c.phase_ratio = std::array<double, 3>{0.5, 0.5, 0.5};
  c.max_update = 100;
  EXPECT_NE(err(c).find("must add up to 1"), std::string::npos) << err(c);
  c.phase_ratio = std::array<double, 3>{0.1, 0.4, 0.5};
  c.max_update = 0;
  EXPECT_NE(err(c).find("--phase-ratio needs --max-update"), std::string::npos) << err(c);
  c = ok;
  c.final_lr_scale = 0;
  EXPECT_NE(err(c).find("--final-lr-scale 0: must be finite and > 0"), std::string::npos) << err(c);
  c = ok;
  c.warmup_updates = 100;
  EXPECT_NE(err(c).find("--warmup-updates is not a tri_stage flag"), std::string::npos) << err(c);
  c = ok;
  c.lr = {1.0, 0.5};
  EXPECT_NE(err(c).find("takes one"), std::string::npos) << err(c);
}

// triangular, lr 0.1, max_lr 1.1, period 10 (step size 5), lr_shrink 0.5:
//   cycle 0: 0.1 → 1.1 (n = 5) → 0.1 (n = 10); cycle 1 peaks at 0.55 (n = 15).
TEST(Triangular, CyclesByHand) {
  SchedulerConfig c{.kind = SchedulerKind::Triangular, .lr = {0.1}, .lr_period_updates = 10, .lr_shrink = 0.5,
                    .max_lr = 1.1};
  LrSchedule s(c);
  EXPECT_NEAR(s.lr_at(0), 0.1, kTight);   // x = |0 − 2 + 1| = 1
  EXPECT_NEAR(s.lr_at(2), 0.5, kTight);   // x = 0.6: 0.1 + 1.0·0.4
  EXPECT_NEAR(s.lr_at(5), 1.1, kTight);   // x = 0
  EXPECT_NEAR(s.lr_at(8), 0.5, kTight);   // x = |1.6 − 1| = 0.6
  EXPECT_NEAR(s.lr_at(10), 0.1, kTight);  // cycle 1, x = |2 − 4 + 1| = 1
  EXPECT_NEAR(s.lr_at(12), 0.28, kTight); // 0.1 + (0.55 − 0.1)·0.4
  EXPECT_NEAR(s.lr_at(15), 0.55, kTight);
  c.shrink_min = true;  // the lower bound shrinks too
  LrSchedule m(c);
  EXPECT_NEAR(m.lr_at(10), 0.05, kTight);
  EXPECT_NEAR(m.lr_at(12), 0.25, kTight);  // 0.05 + 0.5·0.4
  EXPECT_NEAR(m.lr_at(5), 1.1, kTight);    // cycle 0: unchanged
  // An odd period: the step size is floor(11 / 2) = 5, the same cycle as period 10.
  c.shrink_min = false;
  c.lr_period_updates = 11;
  LrSchedule odd(c);
  for (int64_t n : {0, 3, 5, 7, 10, 12, 15}) EXPECT_EQ(odd.lr_at(n), s.lr_at(n)) << n;
  // The default period is fairseq's 5000: the peak is at update 2500.
  c.lr_period_updates = -1;
  LrSchedule d(c);
  EXPECT_NEAR(d.lr_at(2500), 1.1, kTight);
  EXPECT_NEAR(d.lr_at(5000), 0.1, kTight);
}

TEST(Triangular, RefusesWhatFairseqCannotRun) {
  auto err = [](SchedulerConfig c) { return error_of([&] { LrSchedule s(c); }); };
  SchedulerConfig ok{.kind = SchedulerKind::Triangular, .lr = {0.1}, .max_lr = 1.0};
  EXPECT_EQ(err(ok), "(no error)");
  SchedulerConfig c = ok;
  c.max_lr = -1;
  EXPECT_NE(err(c).find("needs --max-lr"), std::string::npos) << err(c);
  c.max_lr = 0.1;
  EXPECT_NE(err(c).find("--max-lr 0.1 must be more than --lr 0.1"), std::string::npos) << err(c);
  c = ok;
  c.lr_period_updates = 1;
  EXPECT_NE(err(c).find("--lr-period-updates 1: must be >= 2"), std::string::npos) << err(c);
  c = ok;
  c.warmup_updates = 10;
  EXPECT_NE(err(c).find("--warmup-updates is not a triangular flag"), std::string::npos) << err(c);
}

// step, lr 0.01, warmup 5 from --min-lr 0.002 (the default init; step 0.0016), a decay of 0.6
// every 7 updates after the warmup, floored at --min-lr.
TEST(Step, DecaysByHand) {
  SchedulerConfig c{.kind = SchedulerKind::Step, .lr = {0.01}, .warmup_updates = 5, .min_lr = 0.002,
                    .lr_deacy_period = 7, .lr_decay = 0.6};
  LrSchedule s(c);
  EXPECT_NEAR(s.lr_at(0), 0.002, kTight);
  EXPECT_NEAR(s.lr_at(1), 0.0036, kTight);
  EXPECT_NEAR(s.lr_at(4), 0.0084, kTight);
  EXPECT_NEAR(s.lr_at(5), 0.01, kTight);    // (5 − 5) // 7 = 0
  EXPECT_NEAR(s.lr_at(11), 0.01, kTight);   // 6 // 7 = 0
  EXPECT_NEAR(s.lr_at(12), 0.006, kTight);  // 7 // 7 = 1
  EXPECT_NEAR(s.lr_at(19), 0.0036, kTight);
  EXPECT_NEAR(s.lr_at(26), 0.00216, kTight);
  EXPECT_NEAR(s.lr_at(33), 0.002, kTight);  // 0.001296 under the floor
  // fairseq's defaults: no warmup, decay 0.5 every 25000 updates, floor 0.
  LrSchedule d(SchedulerConfig{.kind = SchedulerKind::Step, .lr = {0.4}});
  EXPECT_EQ(d.lr_at(0), 0.4);
  EXPECT_EQ(d.lr_at(24999), 0.4);
  EXPECT_EQ(d.lr_at(25000), 0.2);
  EXPECT_EQ(d.lr_at(75000), 0.05);
}

TEST(Step, RefusesWhatFairseqAsserts) {
  auto err = [](SchedulerConfig c) { return error_of([&] { LrSchedule s(c); }); };
  SchedulerConfig ok{.kind = SchedulerKind::Step, .lr = {0.1}};
  EXPECT_EQ(err(ok), "(no error)");
  SchedulerConfig c = ok;
  c.lr_deacy_period = 0;
  EXPECT_NE(err(c).find("--lr-deacy-period 0: must be > 0"), std::string::npos) << err(c);
  c = ok;
  c.lr_decay = 1.5;
  EXPECT_NE(err(c).find("--lr-decay 1.5: must be finite and <= 1"), std::string::npos) << err(c);
  c = ok;
  c.min_lr = 0.1;
  EXPECT_NE(err(c).find("--lr 0.1 must be more than --min-lr 0.1"), std::string::npos) << err(c);
}

// reduce_lr_on_plateau by hand (torch's ReduceLROnPlateau rule): --lr 0.1, warmup 4 from 0.02
// (step 0.02), patience 1, shrink 0.5, threshold 0.1 (better: < 0.9·best).
TEST(ReduceLrOnPlateau, StepsByHand) {
  LrSchedule s({.kind = SchedulerKind::ReduceLrOnPlateau, .lr = {0.1}, .warmup_updates = 4, .warmup_init_lr = 0.02,
                .lr_shrink = 0.5, .lr_threshold = 0.1, .lr_patience = 1});
  EXPECT_NEAR(s.lr_at(0), 0.02, kTight);
  EXPECT_NEAR(s.lr_at(2), 0.06, kTight);
  EXPECT_NEAR(s.lr_at(4), 0.1, kTight);
  s.step_epoch(1, 5.0, 4);  // n = 4 = W: the warmup has not ended, only last_epoch moves
  EXPECT_EQ(s.plateau().last_epoch, 1);
  EXPECT_FALSE(s.plateau().has_best);
  s.step_epoch(2, 5.0, 8);  // best = 5
  EXPECT_EQ(s.plateau().best, 5.0);
  EXPECT_EQ(s.plateau().last_epoch, 2);
  s.step_epoch(3, 4.6, 12);  // 4.6 ≥ 4.5: bad 1 (≤ patience)
  EXPECT_EQ(s.plateau().num_bad_epochs, 1);
  EXPECT_NEAR(s.lr_at(12), 0.1, kTight);
  s.step_epoch(4, std::nullopt, 16);  // no validation: nothing but last_epoch
  EXPECT_EQ(s.plateau().num_bad_epochs, 1);
  EXPECT_EQ(s.plateau().last_epoch, 4);
  s.step_epoch(5, 4.7, 20);  // bad 2 > 1: 0.1 → 0.05, bad 0
  EXPECT_NEAR(s.lr_at(20), 0.05, kTight);
  EXPECT_EQ(s.plateau().num_bad_epochs, 0);
  s.step_epoch(6, 4.4, 24);  // 4.4 < 4.5: best
  EXPECT_EQ(s.plateau().best, 4.4);
  EXPECT_NEAR(s.lr_at(100), 0.05, kTight);
  // The state survives its JSON (the checkpoint's train_state "lr_plateau").
  const PlateauState back = PlateauState::from_json(nlohmann::json::parse(s.plateau().to_json().dump()), "x");
  EXPECT_EQ(back, s.plateau());
  const PlateauState fresh = PlateauState::from_json(PlateauState{}.to_json(), "x");
  EXPECT_TRUE(std::isnan(fresh.lr));
  EXPECT_FALSE(fresh.has_best);
}

TEST(ReduceLrOnPlateau, RefusesBadFlagsAndState) {
  auto err = [](SchedulerConfig c) { return error_of([&] { LrSchedule s(c); }); };
  SchedulerConfig ok{.kind = SchedulerKind::ReduceLrOnPlateau, .lr = {0.1}};
  EXPECT_EQ(err(ok), "(no error)");
  SchedulerConfig c = ok;
  c.lr_shrink = 1.0;
  EXPECT_NE(err(c).find("--lr-shrink 1: must be in [0, 1)"), std::string::npos) << err(c);
  c = ok;
  c.lr_threshold = NAN;
  EXPECT_NE(err(c).find("--lr-threshold"), std::string::npos) << err(c);
  c = ok;
  c.lr = {0.1, 0.2};
  EXPECT_NE(err(c).find("--lr has 2 values"), std::string::npos) << err(c);
  const std::string missing = error_of([] { PlateauState::from_json({{"lr", 0.1}}, "ck.pt"); });
  EXPECT_NE(missing.find("ck.pt"), std::string::npos) << missing;
  EXPECT_NE(missing.find("'best'"), std::string::npos) << missing;
  const std::string bad = error_of([] {
    PlateauState::from_json({{"lr", -1.0}, {"best", nullptr}, {"num_bad_epochs", 0}, {"last_epoch", 0}}, "ck.pt");
  });
  EXPECT_NE(bad.find("impossible"), std::string::npos) << bad;
}

}  // namespace
}  // namespace stretch::optim
