// train/tensorboard_writer.h — `--tensorboard-logdir DIR`: TensorBoard event files of the training
// scalars, laid out as fairseq 0.12.2's TensorboardProgressBarWrapper lays them out
// (fairseq/logging/progress_bar.py): one writer per log tag in DIR/<tag>/ ("train_inner" every
// --log-interval updates, "train" at the end of each epoch, "<subset>" after each validation), one
// scalar per stat under the stat's name ("loss", "ppl", "wps", "lr", "gnorm", ...; "num_updates"
// is the step, not a scalar), step = num_updates, value = the stat as fairseq's meter rounds it,
// stored as a float32 simple_value (what SummaryWriter.add_scalar writes).
// Format (TensorBoard's documented record format; no C++ protobuf or CRC32C library is packaged
// with the TensorBoard .proto files in Debian 12): the file events.out.tfevents.<10-digit unix
// time>.<host>.<pid>.0 is a sequence of TFRecords
//   uint64 length (little-endian) | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 with c = CRC-32C (Castagnoli) of x, and
// each data is a serialized tensorflow.Event, hand-encoded for the few fields used (field numbers
// from tensorboard/compat/proto/event.proto and summary.proto):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first record of a file is Event{wall_time, file_version: "brain.Event:2"}. Each record is
// written whole with one write and flushed (fairseq flushes after each log call), so a reader
// never sees half a record unless the disk fills; a failed write is an Error naming the file.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace stretch::train {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `size` bytes; crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
// TFRecord's mask of a CRC: ((c >> 15) | (c << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);
// One TFRecord: length, masked CRC of the length, the data, masked CRC of the data.
std::string tfrecord(const std::string& data);
// A serialized Event with one scalar (Summary.Value{tag, simple_value}).
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
// The serialized Event every event file starts with (file_version "brain.Event:2").
std::string file_version_event(double wall_time);

struct TensorboardScalar {
  std::string tag{};
  float value = 0;
};

class TensorboardWriter {
 public:
  // Creates DIR (and its parents) at once: a directory that cannot be made is an Io error naming
  // --tensorboard-logdir and the path, before training starts.
  explicit TensorboardWriter(std::string logdir);
  ~TensorboardWriter();
  TensorboardWriter(const TensorboardWriter&) = delete;
  TensorboardWriter& operator=(const TensorboardWriter&) = delete;
  // Appends the scalars at `step` to DIR/<run>/events.out.tfevents.* (opened on first use) and flushes.
  void write(const std::string& run, int64_t step, const std::vector<TensorboardScalar>& scalars);
  const std::string& logdir() const { return logdir_; }

 private:
  struct File {
    std::string path{};
    std::FILE* f = nullptr;
  };
  File& file(const std::string& run);
  void append(File& file, const std::string& record);

  std::string logdir_;
  std::map<std::string, File> files_{};
};

}  // namespace stretch::train
