// A grammar-aware mutator for the front-end fuzz target (fuzz_check.cpp). Byte mutations
// mostly break the lexer or the parser, so few of their inputs reach sema and the IR passes;
// mutations of whole tokens keep a program a program while they change what it means:
//
//   - a number literal becomes an interesting value (0, -1, 2^31 - 1, 2^31, 2^63 - 1, 1e39,
//     0.0 / 0.0, a huge dimension, ...): the edges of shapes, axis sizes and dtypes;
//   - an identifier becomes another identifier of the same input (a variable, an axis, a
//     function or a primitive used elsewhere): the scoping and type rules;
//   - a token, or a balanced bracket group ( ), [ ], { }, is duplicated or deleted;
//   - a statement of the input is copied to another statement boundary, and
//     LLVMFuzzerCustomCrossOver copies a statement of another corpus program there.
//
// Half of the mutations (and every input the lexer refuses) go to libFuzzer's own byte
// mutations (LLVMFuzzerMutate, which also uses -dict). Everything is drawn from a generator
// seeded by libFuzzer's Seed argument, so a run with a fixed -seed repeats.
// SHMAPC_FUZZ_BYTES_ONLY=1 turns the token mutations off (to compare the two).
#include "lexer/Lexer.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace shmapc;

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

// A token as a byte range of the input.
struct Span {
  Tok kind;
  size_t begin, end;
};

// The input's tokens (without Eof), or false where the lexer refuses it (or it starts with a
// byte-order mark, which the source manager drops, so columns would not be offsets).
bool tokenize(const std::string &text, std::vector<Span> &out) {
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) return false;
  SourceManager sm;
  int id = sm.addBuffer("mutate.smp", text);
  std::ostringstream sink;
  Diagnostics diags(sm, sink);
  std::vector<Token> tokens;
  try {
    tokens = lex(id, sm, diags);
  } catch (const CompileError &) {
    return false;
  }
  std::vector<size_t> lineStart{0};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') lineStart.push_back(i + 1);
  for (const Token &t : tokens) {
    if (t.kind == Tok::Eof) break;
    if (t.loc.line < 1 || (size_t)t.loc.line > lineStart.size()) return false;
    size_t begin = lineStart[t.loc.line - 1] + t.loc.col - 1, end = begin + t.text.size();
    if (t.kind == Tok::String) {  // the text holds the contents without quotes and escapes
      end = begin + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, text.size());
    }
    if (end > text.size() || begin >= end) return false;
    out.push_back({t.kind, begin, end});
  }
  return true;
}

bool opens(Tok t) { return t == Tok::LParen || t == Tok::LBracket || t == Tok::LBrace; }
bool closes(Tok t) { return t == Tok::RParen || t == Tok::RBracket || t == Tok::RBrace; }

// The index of the token closing the group that tokens[open] opens, or -1 (unbalanced).
long groupEnd(const std::vector<Span> &tokens, size_t open) {
  long depth = 0;
  for (size_t i = open; i < tokens.size(); ++i) {
    depth += opens(tokens[i].kind) ? 1 : closes(tokens[i].kind) ? -1 : 0;
    if (depth == 0) return (long)i;
  }
  return -1;
}

// Where a statement may go: just after a `;`, `{` or `}` (byte offsets).
std::vector<size_t> statementBoundaries(const std::vector<Span> &tokens) {
  std::vector<size_t> at;
  for (const Span &t : tokens)
    if (t.kind == Tok::Semi || t.kind == Tok::LBrace || t.kind == Tok::RBrace) at.push_back(t.end);
  return at;
}

// The byte range of a statement starting at a statement boundary: up to its `;`, or through
// the block it opens (`for ... { ... }`, `if`, `def`); false if there is none there.
bool statementAt(const std::vector<Span> &tokens, size_t first, size_t &begin, size_t &end) {
  if (first >= tokens.size() || closes(tokens[first].kind)) return false;
  for (size_t i = first; i < tokens.size(); ++i) {
    if (tokens[i].kind == Tok::Semi) {
      begin = tokens[first].begin, end = tokens[i].end;
      return true;
    }
    if (tokens[i].kind == Tok::LBrace) {
      long close = groupEnd(tokens, i);
      if (close < 0) return false;
      begin = tokens[first].begin, end = tokens[close].end;
      return true;
    }
    if (opens(tokens[i].kind)) {  // a call's or an index's brackets: skip over them
      long close = groupEnd(tokens, i);
      if (close < 0) return false;
      i = (size_t)close;
    } else if (closes(tokens[i].kind)) {
      return false;
    }
  }
  return false;
}

// A random statement of the input, as text (empty if it has none).
std::string randomStatement(const std::string &text, const std::vector<Span> &tokens, std::mt19937 &rng) {
  std::vector<size_t> starts;  // token indices just after a boundary, and the first token
  if (!tokens.empty()) starts.push_back(0);
  for (size_t i = 0; i + 1 < tokens.size(); ++i)
    if (tokens[i].kind == Tok::Semi || tokens[i].kind == Tok::LBrace || tokens[i].kind == Tok::RBrace)
      starts.push_back(i + 1);
  for (int tries = 0; tries < 4 && !starts.empty(); ++tries) {
    size_t begin, end;
    if (statementAt(tokens, starts[rng() % starts.size()], begin, end)) return text.substr(begin, end - begin);
  }
  return "";
}

const char *const interestingNumbers[] = {
    "0", "1", "-1", "2", "3", "7", "8", "16", "65536", "1000000000", "2147483647", "2147483648",
    "-2147483648", "4294967296", "9223372036854775807", "0.0", "-0.0", "0.5", "1e39", "1e308",
    "1e-45", "(0.0 / 0.0)", "(1.0 / 0.0)", "(-1.0 / 0.0)",
};

// One token-level mutation of `text` into `out`; false if the kind drawn does not apply.
bool mutateTokens(const std::string &text, const std::vector<Span> &tokens, std::mt19937 &rng, std::string &out) {
  if (tokens.empty()) return false;
  auto replace = [&](size_t begin, size_t end, const std::string &with) {
    out = text.substr(0, begin) + with + text.substr(end);
    return true;
  };
  auto pick = [&](auto keep) -> long {  // a random token satisfying keep, or -1
    std::vector<size_t> ok;
    for (size_t i = 0; i < tokens.size(); ++i)
      if (keep(tokens[i])) ok.push_back(i);
    return ok.empty() ? -1 : (long)ok[rng() % ok.size()];
  };
  auto tokText = [&](const Span &t) { return text.substr(t.begin, t.end - t.begin); };
  switch (rng() % 7) {
  case 0: {  // a number literal becomes an interesting value
    long i = pick([](const Span &t) { return t.kind == Tok::Int || t.kind == Tok::Float; });
    if (i < 0) return false;
    const size_t n = sizeof(interestingNumbers) / sizeof(*interestingNumbers);
    return replace(tokens[i].begin, tokens[i].end, interestingNumbers[rng() % n]);
  }
  case 1: {  // an identifier becomes another one of the input
    long i = pick([](const Span &t) { return t.kind == Tok::Ident; });
    long j = pick([](const Span &t) { return t.kind == Tok::Ident; });
    if (i < 0 || tokText(tokens[i]) == tokText(tokens[j])) return false;
    return replace(tokens[i].begin, tokens[i].end, tokText(tokens[j]));
  }
  case 2: {  // a token twice
    const Span &t = tokens[rng() % tokens.size()];
    return replace(t.end, t.end, " " + tokText(t));
  }
  case 3: {  // a token deleted
    const Span &t = tokens[rng() % tokens.size()];
    return replace(t.begin, t.end, "");
  }
  case 4:
  case 5: {  // a bracket group twice, or deleted
    long i = pick([](const Span &t) { return opens(t.kind); });
    long close = i < 0 ? -1 : groupEnd(tokens, (size_t)i);
    if (close < 0) return false;
    size_t begin = tokens[i].begin, end = tokens[close].end;
    return replace(begin, end, rng() % 2 ? "" : text.substr(begin, end - begin) + text.substr(begin, end - begin));
  }
  default: {  // a statement copied to another statement boundary
    std::string stmt = randomStatement(text, tokens, rng);
    std::vector<size_t> at = statementBoundaries(tokens);
    if (stmt.empty() || at.empty()) return false;
    size_t where = at[rng() % at.size()];
    return replace(where, where, "\n" + stmt);
  }
  }
}

bool bytesOnly() {
  static const bool only = std::getenv("SHMAPC_FUZZ_BYTES_ONLY") != nullptr;
  return only;
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize, unsigned seed) {
  std::mt19937 rng(seed);
  if (bytesOnly() || rng() % 2) return LLVMFuzzerMutate(data, size, maxSize);
  std::string text(reinterpret_cast<const char *>(data), size);
  // One to three token mutations in a row, each on the tokens of the text before it.
  int rounds = 1 + (int)(rng() % 3), done = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<Span> tokens;
    std::string out;
    if (!tokenize(text, tokens) || !mutateTokens(text, tokens, rng, out) || out.size() > maxSize) continue;
    text = std::move(out);
    ++done;
  }
  if (done == 0) return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

// A statement of the second program inserted at a statement boundary of the first.
extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t *data1, size_t size1, const uint8_t *data2, size_t size2,
                                            uint8_t *out, size_t maxOutSize, unsigned seed) {
  if (bytesOnly()) return 0;
  std::mt19937 rng(seed);
  std::string into(reinterpret_cast<const char *>(data1), size1), from(reinterpret_cast<const char *>(data2), size2);
  std::vector<Span> intoTokens, fromTokens;
  if (!tokenize(into, intoTokens) || !tokenize(from, fromTokens)) return 0;
  std::string stmt = randomStatement(from, fromTokens, rng);
  std::vector<size_t> at = statementBoundaries(intoTokens);
  if (stmt.empty() || at.empty()) return 0;
  size_t where = at[rng() % at.size()];
  std::string result = into.substr(0, where) + "\n" + stmt + into.substr(where);
  if (result.size() > maxOutSize) return 0;
  std::memcpy(out, result.data(), result.size());
  return result.size();
}
