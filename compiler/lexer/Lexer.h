// Turns a source file into tokens. Reports bad characters, unterminated strings and
// malformed numbers through Diagnostics (fatal: throws CompileError).
#pragma once
#include "source/Diagnostics.h"

#include <string>
#include <vector>

namespace shmapc {

enum class Tok {
  Eof, Ident, Int, Float, String,
  // keywords
  KwDef, KwLet, KwReturn, KwFor, KwWhile, KwIn, KwIf, KwElse, KwMesh, KwImport, KwTrue, KwFalse,
  KwNone, KwF32, KwF64, KwI32, KwBool, KwI64, KwF16, KwBF16,
  // punctuation / operators
  LParen, RParen, LBracket, RBracket, LBrace, RBrace, Comma, Semi, Colon, Dot, At, Arrow,
  Assign, Plus, Minus, Star, StarStar, Slash, SlashSlash, Percent, EqEq, NotEq, Lt, Le, Gt, Ge, AndAnd, OrOr, Bang,
  Question,  // `?`: an open dimension of a sharding
};
const char *tokName(Tok t);  // for messages: "'('", "identifier", ...

struct Token {
  Tok kind = Tok::Eof;
  std::string text;      // the source text (for String: the contents without quotes)
  Loc loc;
  int64_t intValue = 0;
  double floatValue = 0;
};

std::vector<Token> lex(int fileId, const SourceManager &sm, Diagnostics &diags);
std::string printTokens(const std::vector<Token> &tokens);  // --emit=tokens, one per line
} // namespace shmapc
