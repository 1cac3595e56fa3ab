// train/tensorboard_writer.h: CRC-32C against its published check value, the TFRecord mask and
// framing, and the hand-written protobuf bytes of an Event against bytes derived here by hand from
// event.proto / summary.proto's field numbers and the protobuf wire format (not from the writer).
// TensorBoard's own reader reading a real run is tests/train/check_tensorboard.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "train/tensorboard_writer.h"

namespace stretch::train {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

TEST(TensorboardWriter, Crc32cCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C check value (RFC 3720 / Castagnoli)
  EXPECT_EQ(crc32c("", 0), 0u);
  const std::string zeros(32, '\0');  // RFC 3720 B.4: 32 bytes of zeros
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  const std::string ones(32, '\xff');  // and of 0xFF
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorboardWriter, ScalarEventBytes) {
  // Event{wall_time(1, fixed64) = 1.0, step(2, varint) = 300, summary(5) = Summary{value(1) =
  //   Value{tag(1) = "loss", simple_value(2, fixed32) = 2.0f}}}
  const std::string value = bytes({0x0A, 4, 'l', 'o', 's', 's', 0x15, 0, 0, 0, 0x40});
  const std::string summary = bytes({0x0A, static_cast<int>(value.size())}) + value;
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x10, 0xAC, 0x02, 0x2A,
                                      static_cast<int>(summary.size())}) + summary;
  EXPECT_EQ(scalar_event(1.0, 300, "loss", 2.0f), expected);
  // Event{wall_time = 0.5, file_version(3) = "brain.Event:2"}; step 0 is not written (proto3)
  EXPECT_EQ(file_version_event(0.5), bytes({0x09, 0, 0, 0, 0, 0, 0, 0xE0, 0x3F, 0x1A, 13}) + "brain.Event:2");
}

TEST(TensorboardWriter, RecordFraming) {
  const std::string data = "abc";
  const std::string r = tfrecord(data);
  ASSERT_EQ(r.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(r.substr(0, 8), bytes({3, 0, 0, 0, 0, 0, 0, 0}));
  uint32_t len_crc = 0, data_crc = 0;
  std::memcpy(&len_crc, r.data() + 8, 4);
  std::memcpy(&data_crc, r.data() + 15, 4);
  EXPECT_EQ(len_crc, masked_crc32c(r.data(), 8));
  EXPECT_EQ(r.substr(12, 3), data);
  EXPECT_EQ(data_crc, masked_crc32c("abc", 3));
}

TEST(TensorboardWriter, FilesPerRunAndErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("stretch-tb-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    TensorboardWriter w((dir / "tb").string());
    w.write("train_inner", 2, {{"loss", 3.5f}, {"ppl", 11.3f}});
    w.write("train_inner", 4, {{"loss", 3.25f}});
    w.write("valid", 4, {{"loss", 3.0f}});
  }
  for (const char* run : {"train_inner", "valid"}) {
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir / "tb" / run)) {
      ++files;
      EXPECT_NE(e.path().filename().string().find("events.out.tfevents."), std::string::npos);
      std::ifstream f(e.path(), std::ios::binary);
      const std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      // first record: the file_version event
      uint64_t n = 0;
      std::memcpy(&n, content.data(), 8);
      EXPECT_NE(content.substr(12, n).find("brain.Event:2"), std::string::npos);
    }
    EXPECT_EQ(files, 1) << run;
  }
  // a path below a plain file cannot be a directory: an Io error naming the flag
  std::ofstream(dir / "plain").put('x');
  try {
    TensorboardWriter w((dir / "plain" / "tb").string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tensorboard-logdir"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), 1);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stretch::train
