// The lexer: one pass over the bytes of a file, producing tokens with 1-based line/column
// locations. Every malformed input ends in a fatal diagnostic (CompileError).
#include "lexer/Lexer.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace shmapc {

const char *tokName(Tok t) {
  switch (t) {
  case Tok::Eof: return "end of file";
  case Tok::Ident: return "identifier";
  case Tok::Int: return "integer literal";
  case Tok::Float: return "float literal";
  case Tok::String: return "string literal";
  case Tok::KwDef: return "'def'";
  case Tok::KwLet: return "'let'";
  case Tok::KwReturn: return "'return'";
  case Tok::KwFor: return "'for'";
  case Tok::KwWhile: return "'while'";
  case Tok::KwIn: return "'in'";
  case Tok::KwIf: return "'if'";
  case Tok::KwElse: return "'else'";
  case Tok::KwMesh: return "'mesh'";
  case Tok::KwImport: return "'import'";
  case Tok::KwTrue: return "'true'";
  case Tok::KwFalse: return "'false'";
  case Tok::KwNone: return "'None'";
  case Tok::KwF32: return "'f32'";
  case Tok::KwF64: return "'f64'";
  case Tok::KwI32: return "'i32'";
  case Tok::KwBool: return "'bool'";
  case Tok::KwI64: return "'i64'";
  case Tok::KwF16: return "'f16'";
  case Tok::KwBF16: return "'bf16'";
  case Tok::LParen: return "'('";
  case Tok::RParen: return "')'";
  case Tok::LBracket: return "'['";
  case Tok::RBracket: return "']'";
  case Tok::LBrace: return "'{'";
  case Tok::RBrace: return "'}'";
  case Tok::Comma: return "','";
  case Tok::Semi: return "';'";
  case Tok::Colon: return "':'";
  case Tok::Dot: return "'.'";
  case Tok::At: return "'@'";
  case Tok::Question: return "'?'";
  case Tok::Arrow: return "'->'";
  case Tok::Assign: return "'='";
  case Tok::Plus: return "'+'";
  case Tok::Minus: return "'-'";
  case Tok::Star: return "'*'";
  case Tok::StarStar: return "'**'";
  case Tok::Slash: return "'/'";
  case Tok::SlashSlash: return "'//'";
  case Tok::Percent: return "'%'";
  case Tok::EqEq: return "'=='";
  case Tok::NotEq: return "'!='";
  case Tok::Lt: return "'<'";
  case Tok::Le: return "'<='";
  case Tok::Gt: return "'>'";
  case Tok::Ge: return "'>='";
  case Tok::AndAnd: return "'&&'";
  case Tok::OrOr: return "'||'";
  case Tok::Bang: return "'!'";
  }
  return "token";
}

// The enum spelling, used by --emit=tokens (stable, grep-friendly).
static const char *kindName(Tok t) {
  switch (t) {
  case Tok::Eof: return "Eof";
  case Tok::Ident: return "Ident";
  case Tok::Int: return "Int";
  case Tok::Float: return "Float";
  case Tok::String: return "String";
  case Tok::KwDef: return "KwDef";
  case Tok::KwLet: return "KwLet";
  case Tok::KwReturn: return "KwReturn";
  case Tok::KwFor: return "KwFor";
  case Tok::KwWhile: return "KwWhile";
  case Tok::KwIn: return "KwIn";
  case Tok::KwIf: return "KwIf";
  case Tok::KwElse: return "KwElse";
  case Tok::KwMesh: return "KwMesh";
  case Tok::KwImport: return "KwImport";
  case Tok::KwTrue: return "KwTrue";
  case Tok::KwFalse: return "KwFalse";
  case Tok::KwNone: return "KwNone";
  case Tok::KwF32: return "KwF32";
  case Tok::KwF64: return "KwF64";
  case Tok::KwI32: return "KwI32";
  case Tok::KwBool: return "KwBool";
  case Tok::KwI64: return "KwI64";
  case Tok::KwF16: return "KwF16";
  case Tok::KwBF16: return "KwBF16";
  case Tok::LParen: return "LParen";
  case Tok::RParen: return "RParen";
  case Tok::LBracket: return "LBracket";
  case Tok::RBracket: return "RBracket";
  case Tok::LBrace: return "LBrace";
  case Tok::RBrace: return "RBrace";
  case Tok::Comma: return "Comma";
  case Tok::Semi: return "Semi";
  case Tok::Colon: return "Colon";
  case Tok::Dot: return "Dot";
  case Tok::At: return "At";
  case Tok::Question: return "Question";
  case Tok::Arrow: return "Arrow";
  case Tok::Assign: return "Assign";
  case Tok::Plus: return "Plus";
  case Tok::Minus: return "Minus";
  case Tok::Star: return "Star";
  case Tok::StarStar: return "StarStar";
  case Tok::Slash: return "Slash";
  case Tok::SlashSlash: return "SlashSlash";
  case Tok::Percent: return "Percent";
  case Tok::EqEq: return "EqEq";
  case Tok::NotEq: return "NotEq";
  case Tok::Lt: return "Lt";
  case Tok::Le: return "Le";
  case Tok::Gt: return "Gt";
  case Tok::Ge: return "Ge";
  case Tok::AndAnd: return "AndAnd";
  case Tok::OrOr: return "OrOr";
  case Tok::Bang: return "Bang";
  }
  return "?";
}

namespace {

struct Keyword {
  const char *text;
  Tok kind;
};

const Keyword keywords[] = {
    {"def", Tok::KwDef},       {"let", Tok::KwLet},       {"return", Tok::KwReturn},
    {"for", Tok::KwFor},       {"in", Tok::KwIn},         {"if", Tok::KwIf},
    {"else", Tok::KwElse},     {"mesh", Tok::KwMesh},     {"import", Tok::KwImport},
    {"true", Tok::KwTrue},     {"false", Tok::KwFalse},   {"None", Tok::KwNone},
    {"f32", Tok::KwF32},       {"f64", Tok::KwF64},       {"i32", Tok::KwI32},
    {"bool", Tok::KwBool},     {"while", Tok::KwWhile},   {"i64", Tok::KwI64},
    {"f16", Tok::KwF16},       {"bf16", Tok::KwBF16},
};

// Punctuation, longest spellings first so `->` wins over `-` and `==` over `=`.
const Keyword puncts[] = {
    {"->", Tok::Arrow},  {"==", Tok::EqEq},     {"!=", Tok::NotEq},    {"<=", Tok::Le},
    {">=", Tok::Ge},     {"&&", Tok::AndAnd},   {"||", Tok::OrOr},     {"//", Tok::SlashSlash},
    {"**", Tok::StarStar},
    {"(", Tok::LParen},  {")", Tok::RParen},    {"[", Tok::LBracket},  {"]", Tok::RBracket},
    {"{", Tok::LBrace},  {"}", Tok::RBrace},    {",", Tok::Comma},     {";", Tok::Semi},
    {":", Tok::Colon},   {".", Tok::Dot},       {"@", Tok::At},        {"=", Tok::Assign},
    {"+", Tok::Plus},    {"-", Tok::Minus},     {"*", Tok::Star},      {"/", Tok::Slash},
    {"%", Tok::Percent}, {"<", Tok::Lt},        {">", Tok::Gt},        {"!", Tok::Bang},
    {"?", Tok::Question},
};

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

class Lexer {
public:
  Lexer(int fileId, const SourceManager &sm, Diagnostics &diags)
      : fileId_(fileId), src_(sm.file(fileId).text), diags_(diags) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skipSpaceAndComments();
      if (pos_ >= src_.size()) break;
      out.push_back(next());
    }
    Token eof;
    eof.kind = Tok::Eof;
    eof.loc = here();
    out.push_back(eof);
    return out;
  }

private:
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }

  Loc here() const { return Loc{fileId_, line_, col_}; }

  // Moves one byte forward, keeping line/column up to date.
  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void skipSpaceAndComments() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') advance();
      } else {
        return;
      }
    }
  }

  Token next() {
    char c = peek();
    if (isIdentStart(c)) return identOrKeyword();
    if (isDigit(c)) return number();
    if (c == '"') return string();
    return punct();
  }

  Token identOrKeyword() {
    Token t;
    t.loc = here();
    size_t begin = pos_;
    while (pos_ < src_.size() && isIdentChar(src_[pos_])) advance();
    t.text = src_.substr(begin, pos_ - begin);
    t.kind = Tok::Ident;
    for (const Keyword &k : keywords)
      if (t.text == k.text) t.kind = k.kind;
    return t;
  }

  void skipDigits() {
    while (isDigit(peek())) advance();
  }

  // `12` is an Int; `1.5`, `2.`, `1e-3`, `1.5e3` are Floats. A number running straight into
  // a letter (`12abc`, `1e`) is malformed rather than two tokens.
  Token number() {
    Token t;
    t.loc = here();
    size_t begin = pos_;
    bool isFloat = false;
    skipDigits();
    if (peek() == '.') {
      isFloat = true;
      advance();
      skipDigits();
    }
    if (peek() == 'e' || peek() == 'E') {
      isFloat = true;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      if (!isDigit(peek())) {
        t.text = src_.substr(begin, pos_ - begin);
        diags_.fatal(DiagId::BadNumber, t.loc, "malformed number '" + t.text + "': exponent has no digits",
                     "write the exponent as digits, e.g. '1e-3'");
      }
      skipDigits();
    }
    if (isIdentChar(peek())) {
      while (isIdentChar(peek())) advance();
      t.text = src_.substr(begin, pos_ - begin);
      diags_.fatal(DiagId::BadNumber, t.loc, "malformed number '" + t.text + "'",
                   "separate the number from the name that follows it");
    }
    t.text = src_.substr(begin, pos_ - begin);
    t.kind = isFloat ? Tok::Float : Tok::Int;
    errno = 0;
    if (isFloat) {
      t.floatValue = std::strtod(t.text.c_str(), nullptr);
      if (errno == ERANGE && (t.floatValue > 1 || t.floatValue < -1))
        diags_.fatal(DiagId::BadNumber, t.loc, "float literal '" + t.text + "' is too large",
                     "use a value that fits in a double");
    } else {
      t.intValue = std::strtoll(t.text.c_str(), nullptr, 10);
      if (errno == ERANGE)
        diags_.fatal(DiagId::BadNumber, t.loc, "integer literal '" + t.text + "' is too large",
                     "use a value below 2^63");
    }
    return t;
  }

  // "..." on one line; `\"` and `\\` are the only escapes (axis names and labels need no
  // more).
  Token string() {
    Token t;
    t.kind = Tok::String;
    t.loc = here();
    advance();  // opening quote
    for (;;) {
      char c = peek();
      if (pos_ >= src_.size() || c == '\n')
        diags_.fatal(DiagId::UnterminatedString, t.loc, "unterminated string literal",
                     "close the string with '\"' on the same line");
      if (c == '"') break;
      if (c == '\0')  // (the runtime takes strings as C strings: a label or path would end here)
        diags_.fatal(DiagId::UnexpectedChar, here(), "NUL byte in a string literal",
                     "remove it: a string cannot hold a NUL byte");
      if (c == '\\') {
        Loc escLoc = here();
        char e = peek(1);
        if (e != '"' && e != '\\')
          diags_.fatal(DiagId::UnexpectedChar, escLoc, "unknown escape sequence in string",
                       "only '\\\"' and '\\\\' are allowed in strings");
        advance();
        c = e;
      }
      t.text += c;
      advance();
    }
    advance();  // closing quote
    return t;
  }

  Token punct() {
    Token t;
    t.loc = here();
    for (const Keyword &p : puncts) {
      size_t n = std::char_traits<char>::length(p.text);
      if (src_.compare(pos_, n, p.text) == 0) {
        t.kind = p.kind;
        t.text = p.text;
        for (size_t i = 0; i < n; ++i) advance();
        return t;
      }
    }
    unexpectedChar();
  }

  [[noreturn]] void unexpectedChar() {
    unsigned char c = (unsigned char)peek();
    std::string hint = "remove it";
    if (c == '&') hint = "did you mean '&&'?";
    else if (c == '|') hint = "did you mean '||'?";
    else if (c == '\'') hint = "strings use double quotes: \"...\"";
    std::string shown;
    if (c >= 0x20 && c < 0x7f) {
      shown = std::string("'") + (char)c + "'";
    } else {
      static const char hex[] = "0123456789abcdef";
      shown = std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
    }
    diags_.fatal(DiagId::UnexpectedChar, here(), "unexpected character " + shown, hint);
  }

  int fileId_;
  const std::string &src_;
  Diagnostics &diags_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

// Strings are shown quoted (with their escapes) so the dump reads like the source.
std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

} // namespace

std::vector<Token> lex(int fileId, const SourceManager &sm, Diagnostics &diags) {
  return Lexer(fileId, sm, diags).run();
}

std::string printTokens(const std::vector<Token> &tokens) {
  std::ostringstream os;
  for (const Token &t : tokens) {
    os << t.loc.line << ":" << t.loc.col << " " << kindName(t.kind);
    if (t.kind == Tok::String) os << " " << quoted(t.text);
    else if (!t.text.empty()) os << " " << t.text;
    os << "\n";
  }
  return os.str();
}

} // namespace shmapc
