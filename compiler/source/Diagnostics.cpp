#include "source/Diagnostics.h"

#include <algorithm>

namespace shmapc {

std::string SourceFile::lineText(int line) const {
  if (line < 1 || line > (int)lineStarts.size()) return "";
  size_t begin = lineStarts[line - 1];
  size_t end = text.find('\n', begin);
  if (end == std::string::npos) end = text.size();
  std::string s = text.substr(begin, end - begin);
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return s;
}

int SourceManager::addBuffer(const std::string &path, std::string text) {
  auto f = std::make_unique<SourceFile>();
  f->path = path;
  f->text = std::move(text);
  // A UTF-8 byte-order mark (which some Windows editors write) is not part of the program:
  // it is dropped, so columns count from the character after it and lines echo without it.
  if (f->text.compare(0, 3, "\xEF\xBB\xBF") == 0) f->text.erase(0, 3);
  f->lineStarts.push_back(0);
  for (size_t i = 0; i < f->text.size(); ++i)
    if (f->text[i] == '\n' && i + 1 <= f->text.size()) f->lineStarts.push_back(i + 1);
  files_.push_back(std::move(f));
  return (int)files_.size() - 1;
}

int SourceManager::load(const std::string &path, ReadResult &failure) {
  std::string text;
  failure = readSourceFile(path, text);
  if (failure.status != ReadStatus::Ok) return -1;
  return addBuffer(path, std::move(text));
}

const char *diagName(DiagId id) {
  switch (id) {
#define DIAG(Id, Name)                                                                     \
  case DiagId::Id:                                                                         \
    return Name;
#include "source/Diagnostics.def"
#undef DIAG
  }
  return "unknown";
}

void Diagnostics::show(Loc loc, const char *kind, const std::string &message,
                       const char *name) {
  if (loc.valid()) {
    const SourceFile &f = sm_.file(loc.file);
    out_ << f.path << ":" << loc.line << ":" << loc.col << ": ";
  } else {
    out_ << "shmapc: ";
  }
  out_ << kind << ": " << message;
  if (name) out_ << " [" << name << "]";
  out_ << "\n";
  if (!loc.valid()) return;
  std::string line = sm_.file(loc.file).lineText(loc.line);
  if (line.empty()) return;  // an empty file or line: a caret under nothing says nothing
  // A long line (a generated program's, up to the 64 MiB of a file) is shown as a window of
  // kEchoWidth bytes, the caret kEchoBefore bytes into it, "..." marking what is left out on
  // either side; the window's ends move to whole UTF-8 characters.
  constexpr size_t kEchoWidth = 200, kEchoBefore = 100;
  const size_t caret = loc.col > 1 ? std::min((size_t)loc.col - 1, line.size()) : 0;  // byte offset
  size_t begin = 0, end = line.size();
  if (line.size() > kEchoWidth) {
    begin = caret > kEchoBefore ? caret - kEchoBefore : 0;
    end = std::min(line.size(), begin + kEchoWidth);
    if (end == line.size()) begin = end - kEchoWidth;
    auto continuation = [&](size_t i) { return i < line.size() && ((unsigned char)line[i] & 0xC0) == 0x80; };
    while (begin > 0 && continuation(begin)) --begin;
    while (continuation(end)) ++end;
  }
  const std::string before = begin > 0 ? "..." : "", after = end < line.size() ? "..." : "";
  line = line.substr(begin, end - begin);
  // Control characters (a NUL, an escape sequence) are shown as '?', one column each, so
  // the terminal shows what the file holds without acting on it.
  for (char &ch : line)
    if (((unsigned char)ch < 0x20 && ch != '\t') || ch == 0x7f) ch = '?';
  out_ << "    " << before << line << after << "\n    " << std::string(before.size(), ' ');
  // Keep tabs so the caret lines up under the token; a UTF-8 character is one column
  // (its continuation bytes add none).
  for (size_t i = begin; i < caret && i - begin < line.size(); ++i) {
    unsigned char ch = (unsigned char)line[i - begin];
    if ((ch & 0xC0) == 0x80) continue;
    out_ << (ch == '\t' ? '\t' : ' ');
  }
  out_ << "^\n";
}

void Diagnostics::error(DiagId id, Loc loc, const std::string &message,
                        const std::string &hint) {
  ++errors_;
  show(loc, "error", message, diagName(id));
  if (!hint.empty()) out_ << "  help: " << hint << "\n";
}

void Diagnostics::note(Loc loc, const std::string &message) {
  show(loc, "note", message, nullptr);
}

void Diagnostics::fatal(DiagId id, Loc loc, const std::string &message,
                        const std::string &hint) {
  error(id, loc, message, hint);
  throw CompileError();
}

} // namespace shmapc
