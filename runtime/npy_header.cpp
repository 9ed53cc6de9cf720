// The .npy header's dict literal (npy_header.h).
#include "npy_header.h"

#include "util.h"

#include <cctype>
#include <cstring>
#include <utility>

namespace shm {

namespace {

[[noreturn]] void bad(const std::string &where, const std::string &what) {
  fatalf("%s: %s", where.c_str(), what.c_str());
}

std::string num(int64_t v) { return std::to_string(v); }

// numpy reads a header with ast.literal_eval and then checks it (format.py,
// _read_array_header): a dict whose keys are exactly 'descr', 'fortran_order' and 'shape'
// (any order, either quote, any spacing, a trailing comma, a repeated key's last value wins),
// 'fortran_order' a bool, 'shape' a tuple of ints. This reads the same Python literals (strings,
// integers, True/False/None, tuples, lists, dicts, parentheses, comments) into a Value, then
// checks the dict as numpy does, each defect with its own message.
struct Value {
  enum Kind { Str, Int, Bool, None, Tuple, List, Dict } kind = None;
  std::string text;         // Str
  int64_t integer = 0;      // Int, Bool
  bool overflow = false;    // Int: beyond int64
  std::vector<Value> items; // Tuple, List; Dict: key, value, key, value...
};

const char *kindName(Value::Kind k) {
  switch (k) {
  case Value::Str: return "a string";
  case Value::Int: return "an integer";
  case Value::Bool: return "a bool";
  case Value::None: return "None";
  case Value::Tuple: return "a tuple";
  case Value::List: return "a list";
  case Value::Dict: return "a dict";
  }
  return "?";
}

class HeaderParser {
public:
  HeaderParser(const std::string &where, const std::string &text) : where_(where), s_(text) {}

  NpyHeader parse() {
    Value d = value(0);
    skipSpace();
    if (pos_ < s_.size()) syntax("unexpected text after the header's dict");
    if (d.kind != Value::Dict) fail(std::string("it is ") + kindName(d.kind) + ", not a dict");
    const Value *descr = nullptr, *order = nullptr, *shape = nullptr;
    for (size_t i = 0; i < d.items.size(); i += 2) {
      const Value &k = d.items[i], &v = d.items[i + 1];
      if (k.kind != Value::Str) fail(std::string("a key is ") + kindName(k.kind) + " (numpy's keys are descr, fortran_order and shape)");
      if (k.text == "descr") descr = &v;
      else if (k.text == "fortran_order") order = &v;
      else if (k.text == "shape") shape = &v;
      else fail("unknown key '" + k.text + "' (numpy's keys are descr, fortran_order and shape)");
    }
    for (auto [v, name] : {std::pair{descr, "descr"}, {order, "fortran_order"}, {shape, "shape"}})
      if (!v) fail(std::string("no '") + name + "' key (a header needs descr, fortran_order and shape)");
    NpyHeader h;
    if (shape->kind != Value::Tuple) fail(std::string("'shape' is ") + kindName(shape->kind) + ", not a tuple of integers");
    for (const Value &dim : shape->items) {
      if (dim.kind != Value::Int) fail(std::string("'shape' holds ") + kindName(dim.kind) + ", not only integers");
      if (dim.overflow) fail("a dimension overflows");
      if (dim.integer < 0) fail("'shape' has the negative dimension " + num(dim.integer));
      h.shape.push_back(dim.integer);
    }
    if (h.shape.size() > (size_t)kMaxRank) bad(where_, "the array has more than 16 dimensions");
    if (order->kind != Value::Bool) fail(std::string("'fortran_order' is ") + kindName(order->kind) + ", not True or False");
    h.fortran = order->integer != 0;
    if (descr->kind == Value::List) bad(where_, "structured dtypes (a list descr) are not supported");
    if (descr->kind != Value::Str) fail(std::string("'descr' is ") + kindName(descr->kind) + ", not a dtype string");
    h.descr = descr->text;
    parseDescr(h);
    return h;
  }

private:
  [[noreturn]] void fail(const std::string &what) { bad(where_, "bad .npy header: " + what); }
  [[noreturn]] void syntax(const std::string &what) {
    bad(where_, "bad .npy header: " + what + " at character " + num((int64_t)pos_ + 1) + " of " + shown());
  }
  // The header as a message shows it: padding and newline dropped, at most 200 characters.
  std::string shown() const {
    std::string t = s_;
    while (!t.empty() && (t.back() == ' ' || t.back() == '\n')) t.pop_back();
    if (t.size() > 200) t = t.substr(0, 200) + "...";
    for (char &c : t)
      if ((unsigned char)c < 0x20) c = ' ';
    return t;
  }
  // Python's whitespace between tokens (newlines too: the dict is inside braces) and comments.
  void skipSpace() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') ++pos_;
      else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else break;
    }
  }
  bool peekIs(char c) {
    skipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c, const char *context) {
    if (!peekIs(c)) syntax(std::string("expected '") + c + "' " + context);
    ++pos_;
  }
  static bool isWordChar(char c) { return std::isalnum((unsigned char)c) || c == '_'; }

  Value value(int depth) {
    if (depth > 32) syntax("nested too deeply");
    skipSpace();
    if (pos_ >= s_.size()) syntax("the header ends where a value should come");
    const char c = s_[pos_];
    if (c == '{') return sequence(depth, '}', Value::Dict);
    if (c == '[') return sequence(depth, ']', Value::List);
    if (c == '(') return sequence(depth, ')', Value::Tuple);
    if (c == '\'' || c == '"') return string();
    if ((c == 'u' || c == 'U') && pos_ + 1 < s_.size() && (s_[pos_ + 1] == '\'' || s_[pos_ + 1] == '"')) {
      ++pos_;  // u'<f4': a Python 2 unicode literal, the same string in Python 3
      return string();
    }
    if (c == '-' || c == '+' || std::isdigit((unsigned char)c)) return integer();
    size_t end = pos_;
    while (end < s_.size() && isWordChar(s_[end])) ++end;
    const std::string word = s_.substr(pos_, end - pos_);
    Value v;
    if (word == "True" || word == "False") {
      v.kind = Value::Bool;
      v.integer = word == "True";
    } else if (word == "None") {
      v.kind = Value::None;
    } else {
      syntax(word.empty() ? std::string("unexpected '") + c + "'" : "'" + word + "' is not a Python literal");
    }
    pos_ = end;
    return v;
  }

  // {k: v, ...}, [v, ...] or (v, ...): a trailing comma allowed; (v) without one is v itself.
  Value sequence(int depth, char close, Value::Kind kind) {
    const char open = s_[pos_++];
    Value v;
    v.kind = kind;
    bool comma = false;
    auto unclosed = [&] {
      skipSpace();
      if (pos_ >= s_.size()) syntax(std::string("no '") + close + "' closes the '" + open + "'");
    };
    while (!peekIs(close)) {
      unclosed();
      v.items.push_back(value(depth + 1));
      if (kind == Value::Dict) {
        expect(':', "after a dict key");
        v.items.push_back(value(depth + 1));
      }
      unclosed();
      if (peekIs(close)) break;
      if (!peekIs(',')) syntax(std::string("expected ',' or '") + close + "'");
      ++pos_;
      comma = true;
    }
    ++pos_;
    if (kind == Value::Tuple && !comma && v.items.size() == 1) return v.items[0];  // parentheses
    return v;
  }

  Value string() {
    const char q = s_[pos_++];
    Value v;
    v.kind = Value::Str;
    while (true) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') syntax("unterminated string");
      const char c = s_[pos_++];
      if (c == q) break;
      if (c == '\\') syntax("escape sequences in a header string are not supported");
      v.text += c;
    }
    // Adjacent literals concatenate in Python ('<' 'f4'); rare, but cheap to follow.
    skipSpace();
    if (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"')) v.text += string().text;
    return v;
  }

  // A Python int: decimal (with _ between digits), 0x/0o/0b, a sign; Python 2's L suffix.
  Value integer() {
    Value v;
    v.kind = Value::Int;
    bool negative = false;
    while (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) {
      negative ^= s_[pos_] == '-';
      ++pos_;
      skipSpace();
    }
    int base = 10;
    if (pos_ + 1 < s_.size() && s_[pos_] == '0' && std::strchr("xXoObB", s_[pos_ + 1])) {
      base = std::tolower((unsigned char)s_[pos_ + 1]) == 'x' ? 16 : std::tolower((unsigned char)s_[pos_ + 1]) == 'o' ? 8 : 2;
      pos_ += 2;
    }
    const size_t start = pos_;
    uint64_t magnitude = 0;
    bool digits = false, zeroLead = base == 10 && pos_ < s_.size() && s_[pos_] == '0', nonzero = false;
    for (; pos_ < s_.size(); ++pos_) {
      const char c = s_[pos_];
      if (c == '_' && digits && pos_ + 1 < s_.size() && std::isxdigit((unsigned char)s_[pos_ + 1])) continue;
      int d = std::isdigit((unsigned char)c) ? c - '0' : std::isxdigit((unsigned char)c) ? std::tolower((unsigned char)c) - 'a' + 10 : 99;
      if (d >= base) break;
      digits = true;
      nonzero |= d != 0;
      if (__builtin_mul_overflow(magnitude, (uint64_t)base, &magnitude) ||
          __builtin_add_overflow(magnitude, (uint64_t)d, &magnitude))
        v.overflow = true;
    }
    if (!digits) syntax("expected an integer");
    if (pos_ < s_.size() && (s_[pos_] == 'L' || s_[pos_] == 'l')) ++pos_;  // Python 2's long
    if (pos_ < s_.size() && (isWordChar(s_[pos_]) || s_[pos_] == '.')) {
      pos_ = start;
      syntax("not an integer");
    }
    if (zeroLead && nonzero) {
      pos_ = start;
      syntax("an integer with a leading zero (not a Python literal)");
    }
    if (magnitude > (uint64_t)INT64_MAX + (negative ? 1 : 0)) v.overflow = true;
    v.integer = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return v;
  }

  // numpy's dtype strings for the types shmapc reads: an optional byte order ('<' little,
  // '>' big, '=' native, '|' not applicable; none is native too, as np.dtype('f4')), then a
  // kind and a size in bytes ('f4'), a one-character type code ('f', 'd', '?') or a name
  // ('float32', 'bool').
  void parseDescr(NpyHeader &h) {
    const std::string &d = h.descr;
    std::string body = d;
    h.order = '<';  // native: little-endian here
    if (!body.empty() && std::strchr("<>|=", body[0])) {
      if (body[0] == '>') h.order = '>';
      if (body[0] == '|') h.order = '|';
      body = body.substr(1);
    }
    static const struct {
      const char *name;
      char kind;
      int size;
    } kCodes[] = {{"e", 'f', 2}, {"f", 'f', 4}, {"d", 'f', 8}, {"?", 'b', 1}, {"i", 'i', 4}, {"l", 'i', 8},
                  {"q", 'i', 8}, {"float16", 'f', 2}, {"float32", 'f', 4}, {"float64", 'f', 8}, {"half", 'f', 2},
                  {"single", 'f', 4}, {"double", 'f', 8}, {"bool", 'b', 1}, {"int32", 'i', 4}, {"int64", 'i', 8},
                  {"b1", 'b', 1}};
    for (const auto &c : kCodes)
      if (body == c.name) {
        h.kind = c.kind;
        h.size = c.size;
        return;
      }
    h.size = 0;
    bool ok = body.size() >= 2 && std::isalpha((unsigned char)body[0]);
    for (size_t i = 1; ok && i < body.size(); ++i) {
      if (body[i] < '0' || body[i] > '9' || h.size > 64) ok = false;
      else h.size = h.size * 10 + (body[i] - '0');
    }
    if (!ok || h.size == 0)
      bad(where_, "unsupported dtype '" + d + "' (shmapc reads float16, float32, float64, int32, int64 and bool)");
    h.kind = body[0];
  }

  const std::string &where_;
  const std::string &s_;
  size_t pos_ = 0;
};

} // namespace

NpyHeader parse_npy_header(const std::string &where, const std::string &text) {
  return HeaderParser(where, text).parse();
}

} // namespace shm
