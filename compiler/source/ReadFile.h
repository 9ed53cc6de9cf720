// Reading a source file without trusting the path: only regular files, and at most
// kMaxSourceBytes, so a directory, a FIFO or /dev/zero named as a program is refused instead
// of being misread, blocking or exhausting memory.
#pragma once
#include <cstdint>
#include <string>

namespace shmapc {

// 64 MiB: far above any real program, far below what would strain the machine.
constexpr uint64_t kMaxSourceBytes = uint64_t(64) << 20;

enum class ReadStatus { Ok, Unreadable, NotRegular, TooLarge };

struct ReadResult {
  ReadStatus status = ReadStatus::Ok;
  std::string detail;  // Unreadable: strerror; NotRegular: what it is ("a directory")
};

ReadResult readSourceFile(const std::string &path, std::string &text);

} // namespace shmapc
