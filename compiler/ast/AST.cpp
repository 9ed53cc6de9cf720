// printAST: an indented S-expression dump of a Program. Declarations and statements get
// one line each (blocks indent by two spaces); expressions print on one line, so operator
// precedence is visible as explicit nesting: `a + b * c` prints as (+ a (* b c)).
// Locations are not printed: golden files stay stable when whitespace changes.
#include "ast/AST.h"

#include <charconv>
#include <sstream>

namespace shmapc::ast {

namespace {

const char *dtypeName(DTypeName d) {
  switch (d) {
  case DTypeName::F32: return "f32";
  case DTypeName::F64: return "f64";
  case DTypeName::I32: return "i32";
  case DTypeName::Bool: return "bool";
  case DTypeName::I64: return "i64";
  case DTypeName::F16: return "f16";
  case DTypeName::BF16: return "bf16";
  }
  return "?";
}

std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Shortest text that reads back as the same double, always recognisable as a float.
std::string floatText(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // 2 -> 2.0; keep inf/nan/1e+20
  return s;
}

std::string exprText(const Expr &e);

std::string typeText(const TypeExpr &t) {
  std::string s = dtypeName(t.dtype);
  s += "[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ",";
    s += i < t.dims.size() && t.dims[i] ? "(" + exprText(*t.dims[i]) + ")" : std::to_string(t.shape[i]);
  }
  return s + "]";
}

// P("x", None, ("x","y")) as written (normalised spacing); a tree spec as (P(), ...) or
// {w: P(), ...}.
std::string specText(const PartitionSpecExpr &spec) {
  if (spec.isTree) {
    std::string s = spec.keys.empty() ? "(" : "{";
    for (size_t i = 0; i < spec.items.size(); ++i)
      s += (i ? ", " : "") + (spec.keys.empty() ? "" : spec.keys[i] + ": ") + specText(spec.items[i]);
    if (spec.keys.empty() && spec.items.size() == 1) s += ",";
    return s + (spec.keys.empty() ? ")" : "}");
  }
  std::string s = "P(";
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    if (d) s += ", ";
    const auto &names = spec.dims[d];
    if (names.empty()) {
      s += "None";
    } else if (names.size() == 1) {
      s += quoted(names[0]);
    } else {
      s += "(";
      for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + quoted(names[i]);
      s += ")";
    }
  }
  return s + ")";
}

class Printer {
public:
  std::string run(const Program &p) {
    line(0, "(program");
    for (const ImportDecl &d : p.imports) line(1, "(import " + d.module + ")");
    for (const MeshDecl &m : p.meshes) mesh(m);
    for (const auto &f : p.funcs) func(*f);
    out_ << ")\n";
    return out_.str();
  }

private:
  // Starts a new line at `depth`; the closing parens of a node follow its last line.
  void line(int depth, const std::string &text) {
    if (!first_) out_ << "\n";
    first_ = false;
    out_ << std::string(2 * depth, ' ') << text;
  }

  void mesh(const MeshDecl &m) {
    std::string s = "(mesh " + m.name;
    for (size_t i = 0; i < m.axes.size(); ++i)
      s += " (" + quoted(m.axes[i]) + " " + std::to_string(m.sizes[i]) + ")";
    line(1, s + ")");
  }

  void shmap(const ShmapAttrs &a) {
    std::string s = "(shmap (mesh " + a.mesh + ") (in_specs";
    for (const auto &spec : a.inSpecs) s += " " + specText(spec);
    s += ") (out_specs";
    for (const auto &spec : a.outSpecs) s += " " + specText(spec);
    s += ") (check_vma " + std::string(a.checkVma ? "true" : "false") + ")";
    s += " (auto_pbroadcast " + std::string(a.autoPbroadcast ? "true" : "false") + "))";
    line(2, s);
  }

  static std::string shardingText(const ShardingExpr &sh) {
    if (sh.isTree) {
      std::string s = sh.keys.empty() ? "(tuple" : "(record";
      for (size_t i = 0; i < sh.items.size(); ++i)
        s += " " + (sh.keys.empty() ? "" : "(" + sh.keys[i] + " ") + shardingText(sh.items[i]) +
             (sh.keys.empty() ? "" : ")");
      return s + ")";
    }
    auto ref = axisRefText;
    std::string s = "(sharding " + (sh.mesh.empty() ? "P" : "@" + sh.mesh);
    for (const DimShardingExpr &d : sh.dims) {
      s += " {";
      for (size_t i = 0; i < d.axes.size(); ++i) s += (i ? " " : "") + ref(d.axes[i]);
      s += d.open ? (d.axes.empty() ? "?}" : " ?}") : "}";
      if (d.priority >= 0) s += "p" + std::to_string(d.priority);
    }
    if (!sh.replicated.empty()) {
      s += " (replicated";
      for (const AxisRefExpr &a : sh.replicated) s += " " + ref(a);
      s += ")";
    }
    return s + ")";
  }

  void jit(const JitAttrs &a) {
    std::string s = "(jit (mesh " + a.mesh + ")";
    if (a.hasIn) {
      s += " (in_shardings";
      for (const ShardingExpr &sh : a.inShardings) s += " " + shardingText(sh);
      s += ")";
    }
    if (a.hasOut) {
      s += " (out_shardings";
      for (const ShardingExpr &sh : a.outShardings) s += " " + shardingText(sh);
      s += ")";
    }
    line(2, s + ")");
  }

  void func(const FuncDecl &f) {
    line(1, "(def " + (f.module.empty() ? "" : f.module + ".") + f.name);
    if (f.shmap) shmap(*f.shmap);
    if (f.jit) jit(*f.jit);
    std::string params = "(params";
    for (const Param &p : f.params)
      params += p.type ? " (" + p.name + " " + typeText(*p.type) + ")" : " " + p.name;
    line(2, params + ")");
    if (f.hasResultArrow) {
      std::string results = "(results";
      for (const TypeExpr &t : f.results) results += " " + typeText(t);
      line(2, results + ")");
    }
    block(2, "body", f.body);
    out_ << ")";
  }

  void block(int depth, const char *tag, const Block &b) {
    line(depth, std::string("(") + tag);
    for (const StmtPtr &s : b) stmt(depth + 1, *s);
    out_ << ")";
  }

  void stmt(int depth, const Stmt &s) {
    switch (s.kind) {
    case Stmt::Let: {
      std::string names;
      for (size_t i = 0; i < s.names.size(); ++i) names += (i ? " " : "") + s.names[i];
      line(depth, "(let (" + names + ") " + expr(*s.value) + ")");
      return;
    }
    case Stmt::Assign: {
      std::string names = s.names[0];  // one name prints bare, several as a list
      if (s.names.size() > 1) {
        names = "(";
        for (size_t i = 0; i < s.names.size(); ++i) names += (i ? " " : "") + s.names[i];
        names += ")";
      }
      line(depth, "(assign " + names + " " + expr(*s.value) + ")");
      return;
    }
    case Stmt::Print:
      line(depth, "(print " + (s.label.empty() ? "" : quoted(s.label) + " ") + expr(*s.value) +
                      ")");
      return;
    case Stmt::Return: {
      std::string text = "(return";
      for (const ExprPtr &v : s.values) text += " " + expr(*v);
      line(depth, text + ")");
      return;
    }
    case Stmt::ExprStmt:
      line(depth, "(expr " + expr(*s.value) + ")");
      return;
    case Stmt::For:
      line(depth, "(for " + s.names[0] + " " + expr(*s.values[0]) + " " + expr(*s.values[1]));
      block(depth + 1, "body", s.body);
      out_ << ")";
      return;
    case Stmt::While:
      line(depth, "(while " + expr(*s.value));
      block(depth + 1, "body", s.body);
      out_ << ")";
      return;
    case Stmt::If:
      line(depth, "(if " + expr(*s.value));
      block(depth + 1, "then", s.body);
      if (!s.elseBody.empty()) block(depth + 1, "else", s.elseBody);
      out_ << ")";
      return;
    }
  }

  static std::string opt(const ExprPtr &e) { return e ? expr(*e) : "_"; }

  static std::string indexItem(const IndexItem &it) {
    switch (it.kind) {
    case IndexItem::Index: return expr(*it.index);
    case IndexItem::NewAxis: return "newaxis";
    case IndexItem::Slice:
      return "(slice " + opt(it.start) + " " + opt(it.stop) + " " + opt(it.step) + ")";
    }
    return "?";
  }

  static std::string list(const char *head, const std::vector<ExprPtr> &items) {
    std::string s = std::string("(") + head;
    for (const ExprPtr &e : items) s += " " + expr(*e);
    return s + ")";
  }

public:  // also used by typeText
  static std::string expr(const Expr &e) {
    switch (e.kind) {
    case Expr::IntLit: return std::to_string(e.intValue);
    case Expr::FloatLit: return floatText(e.floatValue);
    case Expr::BoolLit: return e.boolValue ? "true" : "false";
    case Expr::StringLit: return quoted(e.name);
    case Expr::NoneLit: return "None";
    case Expr::Name: return (e.module.empty() ? "" : e.module + ".") + e.name;
    case Expr::ArrayLit: return list("array", e.items);
    case Expr::TupleLit: return list("tuple", e.items);
    case Expr::TypeArg: return "(type " + typeText(*e.type) + ")";
    case Expr::Unary: return "(" + e.op + " " + expr(*e.items[0]) + ")";
    case Expr::Binary: return "(" + e.op + " " + expr(*e.items[0]) + " " + expr(*e.items[1]) + ")";
    case Expr::Call: {
      std::string s = e.callee ? "(apply " + expr(*e.callee)
                               : "(call " + (e.module.empty() ? "" : e.module + ".") + e.name;
      for (const ExprPtr &a : e.items) s += " " + expr(*a);
      for (const Expr::KwArg &kw : e.kwargs) s += " (kw " + kw.name + " " + expr(*kw.value) + ")";
      return s + ")";
    }
    case Expr::ShardingLit: return shardingText(*e.sharding);
    case Expr::RecordLit: {
      std::string s = "(record";
      for (const Expr::KwArg &kw : e.kwargs) s += " (" + kw.name + " " + expr(*kw.value) + ")";
      return s + ")";
    }
    case Expr::Field: return "(field " + expr(*e.items[0]) + " " + e.name + ")";
    case Expr::Index: {
      std::string s = "(index " + expr(*e.items[0]);
      for (const IndexItem &it : e.indices) s += " " + indexItem(it);
      return s + ")";
    }
    }
    return "?";
  }

  std::ostringstream out_;
  bool first_ = true;
};

std::string exprText(const Expr &e) { return Printer::expr(e); }

} // namespace

std::string printAST(const Program &program) { return Printer().run(program); }

std::string axisRefText(const AxisRefExpr &a) {
  return quoted(a.name) + (a.size ? ":(" + std::to_string(a.preSize) + ")" + std::to_string(a.size) : "");
}

ShardingExpr shardingOfSpec(const PartitionSpecExpr &spec) {
  ShardingExpr s;
  s.loc = spec.loc;
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    DimShardingExpr dim;
    dim.loc = spec.loc;
    for (size_t j = 0; j < spec.dims[d].size(); ++j) dim.axes.push_back({spec.dimLocs[d][j], spec.dims[d][j], 0, 0});
    s.dims.push_back(std::move(dim));
  }
  return s;
}

} // namespace shmapc::ast
