// core/output_file.h — a text or binary output that appears complete or not at all (issue 17,
// defect 7: `--dump-nll` / word-prob / results files on a full disk left a partial file).
// Contract: OutputFile(path, what) opens "<path>.tmp.<pid>" or throws fail_io naming `what` and the
// path. After a kill -9 of the writer that temporary stays, and the next OutputFile of the same
// path removes it (only "<path>.tmp.<pid>" whose pid no process has: core/orphans.h), saying so
// on stderr; the final name is never half-written either way. stream() is written as a
// std::ostream. commit() flushes, closes and checks the stream, then renames the temporary over
// path; any failure (ENOSPC, EIO, ...) is fail_io naming the path with the system's reason, and
// the temporary is removed, so an existing file at path is left as it was. Destroyed without
// commit() (an exception in between), the temporary is removed and path is untouched.
#pragma once
#include <fstream>
#include <string>

namespace stretch {

class OutputFile {
 public:
  OutputFile(std::string path, std::string what, std::ios::openmode mode = std::ios::out | std::ios::trunc);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return out_; }
  // Throws fail_io when the stream is already in a failed state (a write failed).
  void check_written();
  void commit();
  const std::string& temporary_path() const { return tmp_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  std::string path_, what_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

// Writes `text` to path through an OutputFile.
void write_file_atomically(const std::string& path, const std::string& what, const std::string& text);

}  // namespace stretch
