// train/test_hooks.h — fault injection for the trainer's end-to-end tests (tests/train),
// read once from the environment. Unset (the normal case) they do nothing. Documented in
// docs/formats.md ("Test hooks"); never needed by users.
//   STRETCH_TEST_WRITE_FAULT=STAGE[:BYTES]@N   the N-th checkpoint save of this process
//       (1-based) fails like a full disk: STAGE is write (after BYTES bytes), fsync, close or
//       rename (tensor/safetensors.h safetensors_testing::set_write_fault, errno ENOSPC).
//   STRETCH_TEST_STALL_AT_UPDATE=U   after update U is complete (logged, validated, saved),
//       the trainer waits until a signal arrives, so a test can deliver SIGINT, SIGTERM or
//       SIGKILL at a known point. It prints "stretch-test: stalled at update U" to stderr.
//   STRETCH_TEST_DIE_WHILE_PUBLISHING=1   the trainer kills itself (SIGKILL) while publishing a
//       saved checkpoint under another name (e.g. checkpoint_last.pt), after the temporary link
//       is made and before it is renamed, so a test can check what the next run finds there.
#pragma once
#include <cstdint>

namespace stretch::train::test_hooks {

// Arms the write fault when `save_index` (1-based count of checkpoint saves) matches.
void before_checkpoint_save(int64_t save_index);
// Disarms it again (whatever happened).
void after_checkpoint_save();
// SIGKILL to this process where STRETCH_TEST_DIE_WHILE_PUBLISHING=1.
void maybe_die_while_publishing();
// Blocks while STRETCH_TEST_STALL_AT_UPDATE == num_updates and no stop signal has arrived.
void maybe_stall(int64_t num_updates);

}  // namespace stretch::train::test_hooks
