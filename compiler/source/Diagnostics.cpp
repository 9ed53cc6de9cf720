#include "source/Diagnostics.h"

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
  // Control characters (a NUL, an escape sequence) are shown as '?', one column each, so
  // the terminal shows what the file holds without acting on it.
  for (char &ch : line)
    if (((unsigned char)ch < 0x20 && ch != '\t') || ch == 0x7f) ch = '?';
  out_ << "    " << line << "\n    ";
  // Keep tabs so the caret lines up under the token; a UTF-8 character is one column
  // (its continuation bytes add none).
  for (int i = 1; i < loc.col && i - 1 < (int)line.size(); ++i) {
    unsigned char ch = (unsigned char)line[i - 1];
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
