// Issue 17, defects 7 (first two parts), 8, 10 and 11 through the binary:
//  - a second `stretch train` into a --save-dir in use stops at once (exit 1) naming the directory
//    and the pid holding its lock (before: both runs exit 0 with checkpoints mixed from both);
//    the lock of a killed run is taken over; --no-save runs take no lock;
//  - a --save-dir that is a regular file, or where no file can be created, is one error at
//    startup, before any update (before: found at the first save);
//  - kill -9 orphans: checkpoint*.pt.tmp.<pid> in --save-dir (also the link made while a saved
//    checkpoint is published under its other names) and preprocess's
//    .<destdir>.tmp-<pid>-XXXXXX staging directories of dead pids are removed by the next run,
//    those of live pids kept (before: kept forever);
//  - `train --restore-file` of a PyTorch .pt names it as one (before: a safetensors header error).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "train_test_util.h"

namespace stretch::train {
namespace {

namespace fs = std::filesystem;
using testing::Child;
using stretch::testing::dead_pid;
using stretch::testing::Sleeper;
using testing::make_data_bin;
using testing::read_file;
using testing::run_stretch;
using testing::RunResult;
using testing::TempDir;
using testing::write_file;

std::vector<std::string> train_args(const std::string& data, const std::string& save_dir, int64_t max_update) {
  return {"train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "1", "--decoder-embed-dim", "16",
          "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
          "--batch-size", "4", "--required-batch-size-multiple", "1", "--max-update", std::to_string(max_update),
          "--threads", "1", "--no-progress-bar", "--log-format", "json", "--log-interval", "1",
          "--save-dir", save_dir};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

class SaveDir : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    data_ = make_data_bin(*dir_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* SaveDir::dir_ = nullptr;
std::string SaveDir::data_;

TEST_F(SaveDir, SecondTrainingIntoTheSameDirectoryIsRefused) {
  TempDir tmp;
  const std::string save = tmp / "ckpt";
  Child first(train_args(data_, save, 100000000));
  ASSERT_TRUE(first.wait_for_stderr("parameters, vocabulary")) << "the first run did not start";
  const std::string lock = save + "/.stretch-train.lock";
  EXPECT_EQ(read_file(lock), std::to_string(first.pid()) + "\n");

  const RunResult second = run_stretch(train_args(data_, save, 2));
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_TRUE(contains(second.err, save + ": --save-dir is in use by another `stretch train` (pid " +
                                       std::to_string(first.pid()) + ", lock " + lock + ")"))
      << second.err;
  EXPECT_TRUE(contains(second.err, "hint:")) << second.err;
  EXPECT_FALSE(contains(second.out, "num_updates")) << "the second run trained:\n" << second.out;
  EXPECT_EQ(read_file(lock), std::to_string(first.pid()) + "\n") << "the refused run changed the lock file";

  // --no-save writes nothing there and takes no lock.
  const RunResult no_save = run_stretch(with(train_args(data_, save, 2), {"--no-save"}));
  EXPECT_EQ(no_save.exit_code, 0) << no_save.err;

  // kill -9: the kernel releases the flock; the next run takes the lock file over.
  first.signal(SIGKILL);
  EXPECT_EQ(first.wait().exit_code, 128 + SIGKILL);
  // (It resumes from the first run's checkpoint_last.pt, already past --max-update 2: it stops at once.)
  const RunResult third = run_stretch(train_args(data_, save, 2));
  EXPECT_EQ(third.exit_code, 0) << third.err;
  EXPECT_TRUE(contains(third.err, "took over the --save-dir lock " + lock + " of process " +
                                      std::to_string(first.pid())))
      << third.err;
  EXPECT_TRUE(fs::exists(save + "/checkpoint_last.pt"));
  EXPECT_EQ(read_file(lock), "") << "a clean end leaves no pid in the lock file";
}

TEST_F(SaveDir, UnwritableSaveDirIsAnErrorAtStartup) {
  TempDir tmp;
  const std::string file = tmp / "a-file";
  write_file(file, "not a directory\n");
  {  // a regular file in place of the directory
    const RunResult r = run_stretch(train_args(data_, file, 2));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, file + ": --save-dir exists and is not a directory")) << r.err;
    EXPECT_FALSE(contains(r.out, "num_updates")) << "trained before the check:\n" << r.out;
  }
  {  // a directory below a regular file cannot be created
    const RunResult r = run_stretch(train_args(data_, file + "/sub", 2));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, file + "/sub: cannot create the --save-dir")) << r.err;
    EXPECT_FALSE(contains(r.out, "num_updates")) << r.out;
  }
  // An existing directory where no file can be created. chmod does not stop root (these tests
  // run as root in CI), so as root use a directory of sysfs, which refuses new files to root
  // too, and skip the case where there is none; otherwise a 0555 directory of our own.
  std::string ro;
  if (::geteuid() != 0) {
    ro = tmp / "read-only";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                            fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  } else if (fs::is_directory("/sys/fs")) {
    const int fd = ::open("/sys/fs/.stretch-probe", O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) ::close(fd), ::unlink("/sys/fs/.stretch-probe");
    else ro = "/sys/fs";
  }
  if (ro.empty()) GTEST_SKIP() << "running as root with no directory that refuses new files to root";
  const RunResult r = run_stretch(train_args(data_, ro, 2));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, ro + ": --save-dir is not writable (cannot create a file in it: ")) << r.err;
  EXPECT_FALSE(contains(r.out, "num_updates")) << r.out;
  if (::geteuid() != 0) fs::permissions(ro, fs::perms::owner_all);
}

TEST_F(SaveDir, OrphanedCheckpointTemporariesOfDeadRunsAreRemoved) {
  TempDir tmp;
  const std::string save = tmp / "ckpt";
  fs::create_directories(save);
  Sleeper live;
  const pid_t dead = dead_pid();
  const std::string orphan = save + "/checkpoint_last.pt.tmp." + std::to_string(dead);
  const std::string orphan2 = save + "/checkpoint_1_50.pt.tmp." + std::to_string(dead);
  const std::string alive = save + "/checkpoint_best.pt.tmp." + std::to_string(live.pid);
  const std::string other = save + "/notes.txt.tmp." + std::to_string(dead);  // not a checkpoint's
  for (const auto& p : {orphan, orphan2, alive, other}) write_file(p, "partial checkpoint");
  const RunResult r = run_stretch(train_args(data_, save, 2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(orphan)) << r.err;
  EXPECT_FALSE(fs::exists(orphan2)) << r.err;
  EXPECT_TRUE(fs::exists(alive)) << "a live process's temporary was removed";
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(contains(r.err, "removed " + orphan + ", left by process " + std::to_string(dead))) << r.err;
  EXPECT_TRUE(fs::exists(save + "/checkpoint_last.pt"));
}

// A run killed while it links a saved checkpoint under its other names (checkpoint_best.pt,
// checkpoint_last.pt): the temporary link carries the dead pid and the next run removes it. Before
// session 29 it was checkpoint_best.pt.tmp.link, kept for good (found by tests/fault_injection.py's
// SIGKILLs in CI); such a leftover of an older version is removed too.
TEST_F(SaveDir, KilledWhilePublishingACheckpointLeavesNoTemporaryForTheNextRun) {
  TempDir tmp;
  const std::string save = tmp / "ckpt";
  fs::create_directories(save);
  const std::string legacy = save + "/checkpoint_best.pt.tmp.link";
  write_file(legacy, "a link an older version left");
  auto temporaries = [&save] {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(save))
      if (contains(e.path().filename().string(), ".tmp")) found.push_back(e.path().filename().string());
    return found;
  };
  const RunResult killed = run_stretch(train_args(data_, save, 2), {{"STRETCH_TEST_DIE_WHILE_PUBLISHING", "1"}});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  const std::vector<std::string> left = temporaries();
  ASSERT_EQ(left.size(), 1u) << "the killed run's link temporary (the legacy one was removed at its start)";
  const std::string name = left[0];
  const size_t at = name.rfind(".pt.tmp.");
  ASSERT_NE(at, std::string::npos) << name;
  EXPECT_EQ(name.find_first_not_of("0123456789", at + 8), std::string::npos) << name << ": not <file>.pt.tmp.<pid>";
  EXPECT_FALSE(fs::exists(legacy));
  const RunResult next = run_stretch(train_args(data_, save, 2));
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_TRUE(temporaries().empty()) << next.err;
  EXPECT_TRUE(contains(next.err, "removed " + save + "/" + name + ", left by process")) << next.err;
  EXPECT_TRUE(fs::exists(save + "/checkpoint_last.pt"));
}

TEST_F(SaveDir, OrphanedPreprocessStagingDirectoriesOfDeadRunsAreRemoved) {
  TempDir tmp;
  Sleeper live;
  const pid_t dead = dead_pid();
  const std::string orphan = tmp / (".bin.tmp-" + std::to_string(dead) + "-AbC123");
  const std::string alive = tmp / (".bin.tmp-" + std::to_string(live.pid) + "-XyZ789");
  const std::string other = tmp / (".other.tmp-" + std::to_string(dead) + "-AbC123");  // another --destdir's
  for (const auto& d : {orphan, alive, other}) {
    fs::create_directories(d);
    write_file(d + "/train.bin", "partial");
  }
  write_file(tmp / "t.txt", "a b c\nb c d\n");
  const RunResult r = run_stretch({"preprocess", "--only-source", "--trainpref", tmp / "t.txt", "--destdir", tmp / "bin"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(orphan)) << r.err;
  EXPECT_TRUE(fs::exists(alive)) << "a live process's staging directory was removed";
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(tmp / "bin/train.bin"));
  EXPECT_TRUE(contains(r.err, "removed " + orphan)) << r.err;
  // Nothing of this run is left behind.
  int staging = 0;
  for (const auto& e : fs::directory_iterator(tmp.path()))
    staging += e.path().filename().string().rfind(".bin.tmp-", 0) == 0;
  EXPECT_EQ(staging, 1) << "only the live process's staging directory remains";
}

TEST_F(SaveDir, RestoreFileThatIsAPyTorchCheckpointSaysSo) {
  TempDir tmp;
  const std::string zip = tmp / "fake_zip.pt", pkl = tmp / "fake_pickle.pt";
  const std::string py = "python3 -c \"import zipfile, pickle; z = zipfile.ZipFile('" + zip +
                         "', 'w'); z.writestr('archive/data.pkl', pickle.dumps({})); z.close(); open('" + pkl +
                         "', 'wb').write(pickle.dumps({'model': {}}))\"";
  if (std::system(py.c_str()) != 0) GTEST_SKIP() << "python3 is not available to write the files";
  for (const auto& [file, kind] : {std::pair{zip, "zip archive"}, std::pair{pkl, "pickle"}}) {
    const RunResult r = run_stretch(with(train_args(data_, tmp / "ckpt", 2), {"--restore-file", file}));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, file + ": is a PyTorch checkpoint (" + std::string(kind) + ")")) << r.err;
    EXPECT_FALSE(contains(r.err, "header length")) << r.err;
  }
}

}  // namespace
}  // namespace stretch::train
