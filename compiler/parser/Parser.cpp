// Recursive-descent parser for grammar/shmap.ebnf. One function per rule; each quotes its
// rule. The first error is fatal: we report what was expected, what was found, and a hint.
#include "parser/Parser.h"

#include <utility>

namespace shmapc {

using namespace ast;

namespace {

// Nesting deeper than this (parentheses, unary operators, blocks, operator chains) is
// rejected, so that neither the parser nor the passes that recurse over the tree can
// overflow the stack on hostile input.
constexpr int kMaxDepth = 256;

class Parser {
public:
  Parser(std::vector<Token> tokens, Diagnostics &diags)
      : toks_(std::move(tokens)), diags_(diags) {}

  Program parseProgram();

private:
  // ---- token helpers ----
  const Token &peek(size_t ahead = 0) const {
    size_t i = pos_ + ahead;
    return i < toks_.size() ? toks_[i] : toks_.back();  // the last token is always Eof
  }
  bool at(Tok k, size_t ahead = 0) const { return peek(ahead).kind == k; }
  bool atIdent(const char *text, size_t ahead = 0) const {
    return at(Tok::Ident, ahead) && peek(ahead).text == text;
  }
  const Token &take() {
    const Token &t = peek();
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(Tok k) {
    if (!at(k)) return false;
    take();
    return true;
  }

  static std::string describe(const Token &t);
  [[noreturn]] void fail(DiagId id, const std::string &expected, const std::string &hint);
  const Token &expect(Tok k, const std::string &context, const std::string &hint = "");
  const Token &expectIdent(const std::string &context);

  // Depth accounting: enter() on every recursive step; the guard restores the depth.
  struct DepthGuard {
    Parser &p;
    int saved;
    explicit DepthGuard(Parser &p) : p(p), saved(p.depth_) {}
    ~DepthGuard() { p.depth_ = saved; }
  };
  void enter();

  // ---- top level ----
  ImportDecl parseImport();
  ArgDecl parseArgDecl();
  MeshDecl parseMesh();
  void parseMeshAxis(MeshDecl &mesh);
  std::unique_ptr<FuncDecl> parseFunc();
  Param parseParam();
  void parseResults(FuncDecl &fn);
  ShmapAttrs parseShmapAttrs();
  JitAttrs parseJitAttrs();
  PipelineAttrs parsePipelineAttrs();
  std::vector<ShardingExpr> parseShardings();
  ShardingExpr parseSharding();
  DimShardingExpr parseDimSharding();
  AxisRefExpr parseAxisRef();
  void parseShmapAttr(ShmapAttrs &attrs, bool &sawMesh, bool &sawIn, bool &sawOut,
                      bool &sawCheck, bool &sawAuto);
  // one | "(" [ one { "," one } [ "," ] ] ")": a single item or a parenthesised tuple of them.
  template <typename T>
  std::vector<T> parseOneOrTuple(T (Parser::*one)(), DiagId id, const char *expected, const char *hint) {
    std::vector<T> out;
    if (!accept(Tok::LParen)) {
      out.push_back((this->*one)());
      return out;
    }
    while (!at(Tok::RParen)) {
      out.push_back((this->*one)());
      if (!accept(Tok::Comma)) break;
    }
    if (!accept(Tok::RParen)) fail(id, expected, hint);
    return out;
  }
  std::vector<PartitionSpecExpr> parseSpecs();
  // "(" [ one { "," one } [ "," ] ] ")" | "{" IDENT ":" one { "," IDENT ":" one } [ "," ] "}":
  // the specs (or shardings) of a tuple's or record's leaves, into `t` (isTree, items, keys).
  template <typename T>
  void parseTree(T &t, T (Parser::*one)(), DiagId id, const std::string &what) {
    const bool record = at(Tok::LBrace);
    const std::string example = record ? "write {w: P(None, \"y\"), b: P()}" : "write (P(\"x\"), P())";
    t.isTree = true;
    t.loc = take().loc;
    const Tok close = record ? Tok::RBrace : Tok::RParen;
    while (!at(close)) {
      if (record) {
        const Token &key = expectIdent("of a field in the record of " + what);
        expect(Tok::Colon, "after the field name '" + key.text + "'", example);
        t.keys.push_back(key.text);
      }
      t.items.push_back((this->*one)());
      if (!accept(Tok::Comma)) break;
    }
    if (!accept(close))
      fail(id, std::string(record ? "',' or '}' in the record of " : "',' or ')' in the tuple of ") + what, example);
  }
  PartitionSpecExpr parseSpec();
  void parseSpecDim(PartitionSpecExpr &spec);
  bool parseBoolLit(const std::string &attr);

  // ---- types ----
  bool atDType() const;
  DTypeName parseDType();
  TypeExpr parseType(const std::string &context);
  void parseShape(TypeExpr &t);

  // ---- statements ----
  Block parseBlock(const std::string &context);
  StmtPtr parseStmt();
  StmtPtr parseLet();
  StmtPtr parseAssign();
  bool atNameList();
  StmtPtr parsePrint();
  StmtPtr parseReturn();
  StmtPtr parseFor();
  StmtPtr parseWhile();
  bool isAtIndex(const Expr &e);
  ExprPtr parseAtUpdate(ExprPtr update);
  StmtPtr parseIf();
  StmtPtr parseExprStmt();
  void expectSemi(const std::string &after);

  // ---- expressions ----
  ExprPtr parseExpr();
  ExprPtr parseOr();
  ExprPtr parseAnd();
  ExprPtr parseCmp();
  ExprPtr parseAdd();
  ExprPtr parseMul();
  ExprPtr parseUnary();
  ExprPtr parsePower();
  ExprPtr parsePostfix();
  IndexItem parseIndexItem();
  ExprPtr parsePrimary();
  ExprPtr parseNameOrCall();
  void parseArgs(Expr &call);
  ExprPtr parseArgValue();
  ExprPtr parseTypeArg();
  ExprPtr parseArrayLit();
  ExprPtr parseParenOrTuple();
  ExprPtr parseRecordLit();
  ExprPtr parseValues(size_t names);

  static ExprPtr makeExpr(Expr::Kind kind, Loc loc);
  static ExprPtr makeBinary(const Token &op, ExprPtr lhs, ExprPtr rhs);

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  Diagnostics &diags_;
};

// ===================================================================== token helpers

// How a token is named in "found ..." messages.
std::string Parser::describe(const Token &t) {
  switch (t.kind) {
  case Tok::Eof: return "end of file";
  case Tok::Ident: return "identifier '" + t.text + "'";
  case Tok::Int:
  case Tok::Float: return "number '" + t.text + "'";
  case Tok::String: return "string \"" + t.text + "\"";
  default: break;
  }
  std::string name = tokName(t.kind);
  if (t.kind >= Tok::KwDef && t.kind <= Tok::KwBool) return "keyword " + name;
  return name;
}

// Reports "expected X, found Y" at the current token.
void Parser::fail(DiagId id, const std::string &expected, const std::string &hint) {
  diags_.fatal(id, peek().loc, "expected " + expected + ", found " + describe(peek()), hint);
}

const Token &Parser::expect(Tok k, const std::string &context, const std::string &hint) {
  if (!at(k)) {
    std::string what = tokName(k);
    fail(DiagId::ExpectedToken, what + (context.empty() ? "" : " " + context),
         hint.empty() ? "add " + what : hint);
  }
  return take();
}

const Token &Parser::expectIdent(const std::string &context) {
  if (!at(Tok::Ident)) {
    std::string hint = "write a name here";
    if (peek().kind >= Tok::KwDef && peek().kind <= Tok::KwBool)
      hint = "'" + peek().text + "' is a keyword and cannot be used as a name";
    fail(DiagId::ExpectedToken, "a name " + context, hint);
  }
  return take();
}

void Parser::enter() {
  if (++depth_ > kMaxDepth)
    diags_.fatal(DiagId::NestingTooDeep, peek().loc,
                 "nesting is too deep (more than " + std::to_string(kMaxDepth) + " levels)",
                 "split the expression or block with 'let' bindings or helper functions");
}

ExprPtr Parser::makeExpr(Expr::Kind kind, Loc loc) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->loc = loc;
  return e;
}

ExprPtr Parser::makeBinary(const Token &op, ExprPtr lhs, ExprPtr rhs) {
  ExprPtr e = makeExpr(Expr::Binary, op.loc);
  e->op = op.text;
  e->items.push_back(std::move(lhs));
  e->items.push_back(std::move(rhs));
  return e;
}

// ===================================================================== top level

// program = { importDecl | meshDecl | argDecl | funcDecl } EOF ;
Program Parser::parseProgram() {
  Program prog;
  while (!at(Tok::Eof)) {
    if (at(Tok::KwImport)) prog.imports.push_back(parseImport());
    else if (atIdent("arg") && peek(1).kind == Tok::Ident) prog.args.push_back(parseArgDecl());
    else if (at(Tok::KwMesh)) prog.meshes.push_back(parseMesh());
    else if (at(Tok::KwDef) || at(Tok::At)) prog.funcs.push_back(parseFunc());
    else
      fail(DiagId::ExpectedToken, "'import', 'mesh', 'def', '@shmap' or '@jit' at top level",
           "statements belong inside a function body, e.g. 'def main() { ... }'");
  }
  return prog;
}

// argDecl = "arg" IDENT ":" ( dtype | "str" ) "=" literal ";" ;   literal: [ "-" ] number,
// true, false, or a string (for str)
ArgDecl Parser::parseArgDecl() {
  take();  // 'arg'
  ArgDecl d;
  const Token &name = expectIdent("for the program argument after 'arg'");
  d.loc = name.loc;
  d.name = name.text;
  const char *shape = "write e.g. arg lr: f32 = 0.1; or arg data: str = \"tokens.npy\";";
  expect(Tok::Colon, "after the argument's name", shape);
  if (atIdent("str")) {
    take();
    d.type = "str";
  } else if (atDType()) {
    d.type = take().text;
  } else {
    fail(DiagId::ExpectedType, "f32, f64, f16, bf16, i32, i64, bool or str", shape);
  }
  expect(Tok::Assign, "and a default value", shape);
  bool negative = d.type != "str" && d.type != "bool" && accept(Tok::Minus);
  const Token &v = peek();
  bool ok = d.type == "str"    ? v.kind == Tok::String
            : d.type == "bool" ? v.kind == Tok::KwTrue || v.kind == Tok::KwFalse
            : d.type == "i32" || d.type == "i64" ? v.kind == Tok::Int
                               : v.kind == Tok::Int || v.kind == Tok::Float;
  if (!ok) fail(DiagId::ExpectedToken, "a default value of type " + d.type, shape);
  d.defaultText = (negative ? "-" : "") + take().text;
  expect(Tok::Semi, "after the program argument", "add ';'");
  return d;
}

// importDecl = "import" IDENT ";" ;
ImportDecl Parser::parseImport() {
  ImportDecl d;
  d.loc = take().loc;
  d.module = expectIdent("of a module after 'import'").text;
  expect(Tok::Semi, "after the import", "add ';'");
  return d;
}

// meshDecl = "mesh" IDENT "=" "<" "[" meshAxis { "," meshAxis } "]" ">" ";" ;
MeshDecl Parser::parseMesh() {
  take();  // 'mesh'
  MeshDecl m;
  const Token &name = expectIdent("for the mesh");
  m.loc = name.loc;
  m.name = name.text;
  expect(Tok::Assign, "after the mesh name", "write 'mesh NAME = <[\"x\"=2]>;'");
  const char *shape = "write the axes as <[\"x\"=2, \"y\"=4]>";
  if (!accept(Tok::Lt)) fail(DiagId::BadMesh, "'<[' to start the mesh axes", shape);
  if (!accept(Tok::LBracket)) fail(DiagId::BadMesh, "'[' after '<'", shape);
  if (at(Tok::RBracket))
    fail(DiagId::BadMesh, "an axis such as \"x\"=2", "a mesh needs at least one axis");
  parseMeshAxis(m);
  while (accept(Tok::Comma)) parseMeshAxis(m);
  if (!accept(Tok::RBracket)) fail(DiagId::BadMesh, "',' or ']' after a mesh axis", shape);
  if (!accept(Tok::Gt)) fail(DiagId::BadMesh, "'>' to close the mesh axes", shape);
  expect(Tok::Semi, "after the mesh declaration", "add ';'");
  return m;
}

// meshAxis = STRING "=" INT ;   (size > 0)
void Parser::parseMeshAxis(MeshDecl &m) {
  const char *shape = "write an axis as \"name\"=size, e.g. \"x\"=2";
  if (!at(Tok::String)) fail(DiagId::BadMesh, "a quoted axis name", shape);
  const Token &axis = take();
  if (!accept(Tok::Assign)) fail(DiagId::BadMesh, "'=' after the axis name", shape);
  if (!at(Tok::Int)) fail(DiagId::BadMesh, "a positive integer axis size", shape);
  const Token &size = take();
  if (size.intValue <= 0)
    diags_.fatal(DiagId::BadMesh, size.loc, "mesh axis size must be positive, found " + size.text,
                 "give axis \"" + axis.text + "\" a size of at least 1");
  m.axes.push_back(axis.text);
  m.sizes.push_back(size.intValue);
  m.axisLocs.push_back(axis.loc);
}

// funcDecl = [ shmapAttrs ] "def" IDENT "(" [ param { "," param } ] ")"
//            [ "->" results ] block ;
std::unique_ptr<FuncDecl> Parser::parseFunc() {
  auto fn = std::make_unique<FuncDecl>();
  if (at(Tok::At) && atIdent("jit", 1)) fn->jit = parseJitAttrs();
  else if (at(Tok::At) && atIdent("pipeline", 1)) fn->pipeline = parsePipelineAttrs();
  else if (at(Tok::At)) fn->shmap = parseShmapAttrs();
  expect(Tok::KwDef, fn->shmap ? "after @shmap(...)" : fn->jit ? "after @jit(...)" : fn->pipeline ? "after @pipeline(...)" : "",
         "an attribute must be followed by a function definition");
  const Token &name = expectIdent("for the function after 'def'");
  fn->loc = name.loc;
  fn->name = name.text;
  expect(Tok::LParen, "after the function name", "write 'def " + name.text + "(...)'");
  if (!at(Tok::RParen)) {
    fn->params.push_back(parseParam());
    while (accept(Tok::Comma)) fn->params.push_back(parseParam());
  }
  expect(Tok::RParen, "after the parameters", "close the parameter list with ')'");
  if (accept(Tok::Arrow)) parseResults(*fn);
  fn->body = parseBlock("for the function body");
  return fn;
}

// param = IDENT [ ":" type ] ;
Param Parser::parseParam() {
  Param p;
  const Token &name = expectIdent("for a parameter");
  p.name = name.text;
  p.loc = name.loc;
  if (accept(Tok::Colon)) p.type = parseType("after ':'");
  return p;
}

// results = type | "(" [ type { "," type } [ "," ] ] ")" ;
void Parser::parseResults(FuncDecl &fn) {
  fn.hasResultArrow = true;
  if (!accept(Tok::LParen)) {
    fn.results.push_back(parseType("after '->'"));
    return;
  }
  while (!at(Tok::RParen)) {
    fn.results.push_back(parseType("in the result list"));
    if (!accept(Tok::Comma)) break;
  }
  expect(Tok::RParen, "to close the result list", "write '-> (f32[4], f32[])'");
}

// shmapAttrs = "@" "shmap" "(" shmapAttr { "," shmapAttr } ")" ;
ShmapAttrs Parser::parseShmapAttrs() {
  ShmapAttrs a;
  a.loc = take().loc;  // '@'
  if (!atIdent("shmap"))
    fail(DiagId::BadShmapAttr, "'shmap', 'jit' or 'pipeline' after '@'",
         "the attributes are @shmap(...), @jit(...) and @pipeline(...)");
  take();
  expect(Tok::LParen, "after '@shmap'", "write '@shmap(mesh=M, in_specs=..., out_specs=...)'");
  bool sawMesh = false, sawIn = false, sawOut = false, sawCheck = false, sawAuto = false;
  parseShmapAttr(a, sawMesh, sawIn, sawOut, sawCheck, sawAuto);
  while (accept(Tok::Comma)) parseShmapAttr(a, sawMesh, sawIn, sawOut, sawCheck, sawAuto);
  if (!at(Tok::RParen))
    fail(DiagId::BadShmapAttr, "',' or ')' in @shmap(...)", "separate attributes with ','");
  Loc close = take().loc;
  const char *missing = !sawMesh ? "mesh" : !sawIn ? "in_specs" : !sawOut ? "out_specs" : nullptr;
  if (missing)
    diags_.fatal(DiagId::BadShmapAttr, close, std::string("@shmap is missing '") + missing + "='",
                 std::string("add ") + missing + "=... (mesh, in_specs and out_specs are required)");
  return a;
}

// shmapAttr = "mesh" "=" IDENT | "in_specs" "=" specs | "out_specs" "=" specs
//           | "check_vma" "=" boolLit | "auto_pbroadcast" "=" boolLit ;
void Parser::parseShmapAttr(ShmapAttrs &a, bool &sawMesh, bool &sawIn, bool &sawOut,
                            bool &sawCheck, bool &sawAuto) {
  const char *known = "the attributes are mesh, in_specs, out_specs, check_vma, auto_pbroadcast";
  // `mesh` is a keyword, but here it names an attribute.
  if (!at(Tok::Ident) && !at(Tok::KwMesh))
    fail(DiagId::BadShmapAttr, "an attribute name in @shmap(...)", known);
  const Token &key = take();
  bool *seen = key.text == "mesh"              ? &sawMesh
               : key.text == "in_specs"        ? &sawIn
               : key.text == "out_specs"       ? &sawOut
               : key.text == "check_vma"       ? &sawCheck
               : key.text == "auto_pbroadcast" ? &sawAuto
                                               : nullptr;
  if (!seen)
    diags_.fatal(DiagId::BadShmapAttr, key.loc, "unknown @shmap attribute '" + key.text + "'",
                 known);
  if (*seen)
    diags_.fatal(DiagId::BadShmapAttr, key.loc, "@shmap attribute '" + key.text + "' given twice",
                 "remove one of them");
  *seen = true;
  expect(Tok::Assign, "after '" + key.text + "'", "write " + key.text + "=...");
  if (seen == &sawMesh) {
    const Token &mesh = expectIdent("of a mesh after 'mesh='");
    a.mesh = mesh.text;
    a.meshLoc = mesh.loc;
  } else if (seen == &sawIn) {
    a.inSpecsLoc = peek().loc;
    a.inSpecs = parseSpecs();
  } else if (seen == &sawOut) {
    a.outSpecsLoc = peek().loc;
    a.outSpecs = parseSpecs();
  } else if (seen == &sawCheck) {
    a.checkVma = parseBoolLit(key.text);
  } else {
    a.autoPbroadcast = parseBoolLit(key.text);
  }
}

// jitAttrs = "@" "jit" "(" jitAttr { "," jitAttr } ")" ;
// jitAttr = "mesh" "=" IDENT | "in_shardings" "=" shardings | "out_shardings" "=" shardings ;
JitAttrs Parser::parseJitAttrs() {
  JitAttrs a;
  a.loc = take().loc;  // '@'
  take();              // 'jit'
  const char *known = "the attributes are mesh, in_shardings, out_shardings";
  expect(Tok::LParen, "after '@jit'", "write '@jit(mesh=M, in_shardings=..., out_shardings=...)'");
  bool sawMesh = false;
  do {
    if (!at(Tok::Ident) && !at(Tok::KwMesh)) fail(DiagId::BadJitAttr, "an attribute name in @jit(...)", known);
    const Token &key = take();
    bool *seen = key.text == "mesh" ? &sawMesh : key.text == "in_shardings" ? &a.hasIn
                 : key.text == "out_shardings" ? &a.hasOut : nullptr;
    if (!seen) diags_.fatal(DiagId::BadJitAttr, key.loc, "unknown @jit attribute '" + key.text + "'", known);
    if (*seen) diags_.fatal(DiagId::BadJitAttr, key.loc, "@jit attribute '" + key.text + "' given twice", "remove one of them");
    *seen = true;
    expect(Tok::Assign, "after '" + key.text + "'", "write " + key.text + "=...");
    if (seen == &sawMesh) {
      const Token &mesh = expectIdent("of a mesh after 'mesh='");
      a.mesh = mesh.text;
      a.meshLoc = mesh.loc;
    } else if (seen == &a.hasIn) {
      a.inLoc = peek().loc;
      a.inShardings = parseShardings();
    } else {
      a.outLoc = peek().loc;
      a.outShardings = parseShardings();
    }
  } while (accept(Tok::Comma));
  if (!at(Tok::RParen)) fail(DiagId::BadJitAttr, "',' or ')' in @jit(...)", "separate attributes with ','");
  Loc close = take().loc;
  if (!sawMesh) diags_.fatal(DiagId::BadJitAttr, close, "@jit is missing 'mesh='", "add mesh=M: the mesh its shardings use");
  return a;
}

// pipelineAttrs = "@" "pipeline" "(" pipelineAttr { "," pipelineAttr } ")" ;
// pipelineAttr = "mesh" "=" IDENT | "axis" "=" STRING | "microbatches" "=" INT
//              | "schedule" "=" STRING | "virtual_stages" "=" INT | "remat" "=" boolLit
//              | "batch" "=" ( IDENT | "(" IDENT { "," IDENT } [ "," ] ")" )
//              | "placement" "=" "(" ( INT | IDENT ) { "," ( INT | IDENT ) } [ "," ] ")"
//              | "order" "=" "(" STRING { "," STRING } [ "," ] ")" ;
PipelineAttrs Parser::parsePipelineAttrs() {
  PipelineAttrs a;
  a.loc = take().loc;  // '@'
  take();              // 'pipeline'
  const char *known =
      "the attributes are mesh, axis, microbatches, schedule, virtual_stages, batch, remat, placement, order";
  const char *shape = "write '@pipeline(mesh=M, axis=\"stage\", microbatches=8, schedule=\"1f1b\", batch=(x, y))'";
  expect(Tok::LParen, "after '@pipeline'", shape);
  bool sawMesh = false, sawAxis = false, sawMb = false, sawSchedule = false, sawVirtual = false, sawBatch = false,
       sawRemat = false, sawPlacement = false, sawOrder = false;
  do {
    if (!at(Tok::Ident) && !at(Tok::KwMesh)) fail(DiagId::BadPipelineAttr, "an attribute name in @pipeline(...)", known);
    const Token &key = take();
    bool *seen = key.text == "mesh" ? &sawMesh : key.text == "axis" ? &sawAxis : key.text == "microbatches" ? &sawMb
                 : key.text == "schedule" ? &sawSchedule : key.text == "virtual_stages" ? &sawVirtual
                 : key.text == "batch" ? &sawBatch : key.text == "remat" ? &sawRemat
                 : key.text == "placement" ? &sawPlacement : key.text == "order" ? &sawOrder : nullptr;
    if (!seen) diags_.fatal(DiagId::BadPipelineAttr, key.loc, "unknown @pipeline attribute '" + key.text + "'", known);
    if (*seen)
      diags_.fatal(DiagId::BadPipelineAttr, key.loc, "@pipeline attribute '" + key.text + "' given twice", "remove one of them");
    *seen = true;
    expect(Tok::Assign, "after '" + key.text + "'", "write " + key.text + "=...");
    if (seen == &sawMesh) {
      const Token &mesh = expectIdent("of a mesh after 'mesh='");
      a.mesh = mesh.text;
      a.meshLoc = mesh.loc;
    } else if (seen == &sawAxis || seen == &sawSchedule) {
      if (!at(Tok::String))
        fail(DiagId::BadPipelineAttr, "a string after '" + key.text + "='",
             seen == &sawAxis ? "name the stage axis: axis=\"stage\"" : "schedule=\"gpipe\", \"1f1b\", \"interleaved\", \"zb-h1\" or \"inference\"");
      const Token &t = take();
      (seen == &sawAxis ? a.axis : a.schedule) = t.text;
      (seen == &sawAxis ? a.axisLoc : a.scheduleLoc) = t.loc;
    } else if (seen == &sawRemat) {
      a.remat = parseBoolLit(key.text);
    } else if (seen == &sawMb || seen == &sawVirtual) {
      if (!at(Tok::Int)) fail(DiagId::BadPipelineAttr, "an integer after '" + key.text + "='", "write " + key.text + "=4");
      const Token &t = take();
      if (t.intValue < 1)
        diags_.fatal(DiagId::BadPipelineAttr, t.loc, key.text + " must be at least 1", "write " + key.text + "=4");
      (seen == &sawMb ? a.microbatches : a.virtualStages) = t.intValue;
      (seen == &sawMb ? a.microbatchesLoc : a.virtualStagesLoc) = t.loc;
    } else if (seen == &sawPlacement || seen == &sawOrder) {
      const bool placement = seen == &sawPlacement;
      const char *example = placement ? "write placement=(0, 1, 1, 0), the device group of each stage, or placement=(a, b), "
                                        "the mesh of each stage"
                                      : "write order=(\"F0.0 F0.1 B0.0 B0.1\", ...): each device group's steps";
      (placement ? a.placementLoc : a.orderLoc) = peek().loc;
      if (!accept(Tok::LParen)) fail(DiagId::BadPipelineAttr, "'(' after '" + key.text + "='", example);
      do {
        if (at(Tok::RParen)) break;
        const bool name = placement && at(Tok::Ident);
        if (!at(placement ? Tok::Int : Tok::String) && !name)
          fail(DiagId::BadPipelineAttr,
               placement ? "a device group's number or a mesh in placement=(...)" : "a string in order=(...)", example);
        const Token &t = take();
        if (placement) {
          a.placement.push_back(name ? 0 : t.intValue);
          a.placementMeshes.push_back(name ? t.text : "");
          a.placementLocs.push_back(t.loc);
        } else {
          a.order.push_back(t.text);
          a.orderLocs.push_back(t.loc);
        }
      } while (accept(Tok::Comma));
      expect(Tok::RParen, "to close " + key.text + "=(...)", example);
    } else {
      a.batchLoc = peek().loc;
      bool paren = accept(Tok::LParen);
      do {
        if (paren && at(Tok::RParen)) break;
        const Token &name = expectIdent("naming a parameter in batch=");
        a.batch.push_back(name.text);
        a.batchLocs.push_back(name.loc);
      } while (paren && accept(Tok::Comma));
      if (paren) expect(Tok::RParen, "to close batch=(...)", "write batch=(x, y)");
    }
  } while (accept(Tok::Comma));
  if (!at(Tok::RParen)) fail(DiagId::BadPipelineAttr, "',' or ')' in @pipeline(...)", "separate attributes with ','");
  Loc close = take().loc;
  // (placement= with meshes says where the stages run instead of mesh= and axis=)
  const bool onMeshes = !a.placementMeshes.empty() && !a.placementMeshes[0].empty();
  const char *missing = !sawMesh && !onMeshes ? "mesh" : !sawAxis && !onMeshes ? "axis" : !sawBatch ? "batch" : nullptr;
  if (missing)
    diags_.fatal(DiagId::BadPipelineAttr, close, std::string("@pipeline is missing '") + missing + "='",
                 "add mesh=M, axis=\"stage\" (the mesh axis whose slices are the stages) and batch=(x, ...) (the "
                 "arguments split into micro-batches)");
  return a;
}

// shardings = sharding | "(" [ sharding { "," sharding } [ "," ] ] ")" ;
std::vector<ShardingExpr> Parser::parseShardings() {
  return parseOneOrTuple(&Parser::parseSharding, DiagId::BadSharding, "',' or ')' in the tuple of shardings",
                         "write a tuple of shardings as (P(\"x\"), P())");
}

// sharding = spec
//          | "sharding" "<" "@" IDENT "," "[" [ dimSharding { "," dimSharding } ] "]"
//            [ "," "replicated" "=" "{" [ axisRef { "," axisRef } ] "}" ] ">" ;
ShardingExpr Parser::parseSharding() {
  if (atIdent("P")) return shardingOfSpec(parseSpec());  // the shorthand: closed dimensions
  ShardingExpr s;
  if (at(Tok::LParen) || at(Tok::LBrace)) {  // the sharding of a tuple or record, leaf by leaf
    parseTree(s, &Parser::parseSharding, DiagId::BadSharding, "shardings");
    return s;
  }
  const char *shape = "write sharding<@m, [{\"x\"}, {}]> or P(\"x\", None)";
  if (!atIdent("sharding")) fail(DiagId::BadSharding, "a sharding: sharding<...> or P(...)", shape);
  s.loc = take().loc;
  if (!accept(Tok::Lt)) fail(DiagId::BadSharding, "'<' after 'sharding'", shape);
  if (!accept(Tok::At)) fail(DiagId::BadSharding, "'@' and the mesh's name", shape);
  const Token &mesh = expectIdent("of a mesh after '@'");
  s.mesh = mesh.text;
  s.meshLoc = mesh.loc;
  if (!accept(Tok::Comma)) fail(DiagId::BadSharding, "',' after the mesh", shape);
  if (!accept(Tok::LBracket)) fail(DiagId::BadSharding, "'[' to start the dimension shardings", shape);
  while (!at(Tok::RBracket)) {
    s.dims.push_back(parseDimSharding());
    if (!accept(Tok::Comma)) break;
  }
  if (!accept(Tok::RBracket)) fail(DiagId::BadSharding, "',' or ']' after a dimension sharding", shape);
  if (accept(Tok::Comma)) {
    if (!atIdent("replicated")) fail(DiagId::BadSharding, "'replicated={...}' or '>'", shape);
    s.replicatedLoc = take().loc;
    if (!accept(Tok::Assign) || !accept(Tok::LBrace))
      fail(DiagId::BadSharding, "'={' after 'replicated'", "write replicated={\"y\"}");
    while (at(Tok::String)) {
      s.replicated.push_back(parseAxisRef());
      if (!accept(Tok::Comma)) break;
    }
    if (!accept(Tok::RBrace)) fail(DiagId::BadSharding, "an axis name or '}' in replicated={...}", "write replicated={\"y\"}");
  }
  if (!accept(Tok::Gt)) fail(DiagId::BadSharding, "'>' to close the sharding", shape);
  return s;
}

// dimSharding = "{" [ axisRef { "," axisRef } ] [ [ "," ] "?" ] "}" [ PRIORITY ] ;  PRIORITY: p0, p1, ...
DimShardingExpr Parser::parseDimSharding() {
  DimShardingExpr d;
  const char *hint = "a dimension is {} (unsharded), {\"x\", \"y\"} (closed) or {\"x\", ?} (open), maybe with a priority: {\"x\"}p1";
  d.loc = peek().loc;
  if (!accept(Tok::LBrace)) fail(DiagId::BadSharding, "'{' to start a dimension sharding", hint);
  while (at(Tok::String)) {
    d.axes.push_back(parseAxisRef());
    if (!accept(Tok::Comma)) break;
  }
  if (accept(Tok::Question)) d.open = true;
  if (!accept(Tok::RBrace)) fail(DiagId::BadSharding, "an axis name, '?' or '}' in a dimension sharding", hint);
  if (at(Tok::Ident) && peek().text.size() > 1 && peek().text[0] == 'p') {
    const std::string digits = peek().text.substr(1);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9)
      fail(DiagId::BadSharding, "a priority p0, p1, ... after the dimension", hint);
    d.priorityLoc = take().loc;
    d.priority = std::stoll(digits);
  }
  return d;
}

// axisRef = STRING [ ":" "(" INT ")" INT ] ;
AxisRefExpr Parser::parseAxisRef() {
  AxisRefExpr a;
  a.loc = peek().loc;
  a.name = take().text;
  if (!accept(Tok::Colon)) return a;
  const char *sub = "write a sub-axis as \"x\":(m)k: the part of size k after sub-axes of total size m";
  if (!accept(Tok::LParen) || !at(Tok::Int)) fail(DiagId::BadSharding, "'(' and the sub-axis's pre-size", sub);
  a.preSize = take().intValue;
  if (!accept(Tok::RParen) || !at(Tok::Int)) fail(DiagId::BadSharding, "')' and the sub-axis's size", sub);
  a.size = take().intValue;
  return a;
}

// boolLit = "true" | "false" ;
bool Parser::parseBoolLit(const std::string &attr) {
  if (accept(Tok::KwTrue)) return true;
  if (accept(Tok::KwFalse)) return false;
  fail(DiagId::BadShmapAttr, "'true' or 'false' for " + attr, "write " + attr + "=false");
}

// specs = spec | "(" [ spec { "," spec } [ "," ] ] ")" ;
std::vector<PartitionSpecExpr> Parser::parseSpecs() {
  return parseOneOrTuple(&Parser::parseSpec, DiagId::BadSpec, "',' or ')' in the tuple of partition specs",
                         "write a tuple of specs as (P(\"x\"), P())");
}

// spec = "P" "(" [ specDim { "," specDim } ] ")"
//      | "(" [ spec { "," spec } [ "," ] ] ")" | "{" IDENT ":" spec { "," IDENT ":" spec } [ "," ] "}" ;
// (the last two: the spec of a tuple or record argument, leaf by leaf)
PartitionSpecExpr Parser::parseSpec() {
  PartitionSpecExpr spec;
  if (at(Tok::LParen) || at(Tok::LBrace)) {
    parseTree(spec, &Parser::parseSpec, DiagId::BadSpec, "specs");
    return spec;
  }
  if (!atIdent("P"))
    fail(DiagId::BadSpec, "a partition spec P(...)",
         "write P() for a replicated value or P(\"x\", None); a tree argument takes a tuple (P(), P(\"x\")) "
         "or record {w: P(), b: P(\"x\")} of specs");
  spec.loc = take().loc;
  if (!accept(Tok::LParen)) fail(DiagId::BadSpec, "'(' after 'P'", "write P(...)");
  if (!at(Tok::RParen)) {
    parseSpecDim(spec);
    while (accept(Tok::Comma)) parseSpecDim(spec);
  }
  if (!accept(Tok::RParen))
    fail(DiagId::BadSpec, "',' or ')' in P(...)", "separate the dimensions with ','");
  return spec;
}

// specDim = "None" | STRING | "(" [ STRING { "," STRING } [ "," ] ] ")" ;
void Parser::parseSpecDim(PartitionSpecExpr &spec) {
  std::vector<std::string> names;
  std::vector<Loc> locs;
  const char *hint = "each dimension is None, an axis name \"x\", or a tuple (\"x\", \"y\")";
  if (accept(Tok::KwNone)) {
    // an unsplit dimension: no axes
  } else if (at(Tok::String)) {
    names.push_back(peek().text);
    locs.push_back(take().loc);
  } else if (accept(Tok::LParen)) {
    while (at(Tok::String)) {
      names.push_back(peek().text);
      locs.push_back(take().loc);
      if (!accept(Tok::Comma)) break;
    }
    if (!accept(Tok::RParen)) fail(DiagId::BadSpec, "an axis name or ')' in the axis tuple", hint);
  } else {
    fail(DiagId::BadSpec, "None, an axis name or a tuple of axis names", hint);
  }
  spec.dims.push_back(std::move(names));
  spec.dimLocs.push_back(std::move(locs));
}

// ===================================================================== types

// dtype = "f32" | "f64" | "i32" | "bool" | "i64" | "f16" | "bf16" ;
bool Parser::atDType() const {
  return at(Tok::KwF32) || at(Tok::KwF64) || at(Tok::KwI32) || at(Tok::KwBool) || at(Tok::KwI64) ||
         at(Tok::KwF16) || at(Tok::KwBF16);
}

DTypeName Parser::parseDType() {
  switch (take().kind) {
  case Tok::KwF64: return DTypeName::F64;
  case Tok::KwI32: return DTypeName::I32;
  case Tok::KwBool: return DTypeName::Bool;
  case Tok::KwI64: return DTypeName::I64;
  case Tok::KwF16: return DTypeName::F16;
  case Tok::KwBF16: return DTypeName::BF16;
  default: return DTypeName::F32;
  }
}

// type = dtype "[" [ INT { "," INT } ] "]" ;
TypeExpr Parser::parseType(const std::string &context) {
  TypeExpr t;
  t.loc = peek().loc;
  if (!atDType())
    fail(DiagId::ExpectedType, "a type such as f32[4] " + context,
         "types are f32, f64, i32, i64, f16, bf16 or bool followed by a shape, e.g. f32[8,4] "
         "or i32[]");
  t.dtype = parseDType();
  if (!at(Tok::LBracket))
    fail(DiagId::ExpectedType, "'[' and a shape after the dtype",
         "write the shape in brackets, e.g. f32[4] (or f32[] for a scalar)");
  parseShape(t);
  return t;
}

// The "[" [ dim { "," dim } ] "]" part of `type`: dim = INT | expr (a static integer
// expression, evaluated by sema).
void Parser::parseShape(TypeExpr &t) {
  take();  // '['
  const char *hint = "shapes are static: write integers, e.g. f32[8,4] or f32[x.shape[0], 4]";
  if (accept(Tok::RBracket)) return;  // a scalar: f32[]
  do {
    if (at(Tok::RBracket) || at(Tok::Comma)) fail(DiagId::ExpectedType, "a dimension size", hint);
    if (at(Tok::Int) && (peek(1).kind == Tok::Comma || peek(1).kind == Tok::RBracket)) {
      t.shape.push_back(take().intValue);
      t.dims.push_back(nullptr);
    } else {
      t.shape.push_back(0);
      t.dims.push_back(std::shared_ptr<Expr>(parseExpr().release()));
    }
  } while (accept(Tok::Comma));
  if (!accept(Tok::RBracket)) fail(DiagId::ExpectedType, "',' or ']' in the shape", hint);
}

// ===================================================================== statements

// block = "{" { stmt } "}" ;
Block Parser::parseBlock(const std::string &context) {
  DepthGuard guard(*this);
  enter();
  expect(Tok::LBrace, context, "add '{'");
  Block b;
  while (!at(Tok::RBrace)) {
    if (at(Tok::Eof))
      fail(DiagId::ExpectedToken, "'}' to close the block", "add '}'");
    b.push_back(parseStmt());
  }
  take();
  return b;
}

// stmt = letStmt | returnStmt | forStmt | whileStmt | ifStmt | printStmt | assignStmt | exprStmt ;
StmtPtr Parser::parseStmt() {
  DepthGuard guard(*this);
  enter();  // `else if` chains recurse through here
  switch (peek().kind) {
  case Tok::KwLet: return parseLet();
  case Tok::KwReturn: return parseReturn();
  case Tok::KwFor: return parseFor();
  case Tok::KwWhile: return parseWhile();
  case Tok::KwIf: return parseIf();
  default: break;
  }
  if (at(Tok::Ident) && (at(Tok::Assign, 1) || atNameList())) return parseAssign();
  if (atIdent("print") && at(Tok::LParen, 1)) return parsePrint();
  return parseExprStmt();
}

void Parser::expectSemi(const std::string &after) {
  expect(Tok::Semi, "after " + after, "add ';'");
}

// letStmt = "let" IDENT { "," IDENT } "=" expr ";" ;
StmtPtr Parser::parseLet() {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::Let;
  s->loc = take().loc;
  do {
    const Token &name = expectIdent("after 'let'");
    s->names.push_back(name.text);
    s->nameLocs.push_back(name.loc);
  } while (accept(Tok::Comma));
  expect(Tok::Assign, "in 'let' binding", "write 'let name = value;'");
  s->value = parseValues(s->names.size());
  expectSemi("the 'let' statement");
  return s;
}

// The value of `let a, b = ...;` / `a, b = ...;`: one expression, or for several names a list
// of them, `x, y` (a tuple, which the names destructure: `let k, v = f(h), g(h);`).
ExprPtr Parser::parseValues(size_t names) {
  ExprPtr first = parseExpr();
  if (names < 2 || !at(Tok::Comma)) return first;
  ExprPtr tuple = makeExpr(Expr::TupleLit, first->loc);
  tuple->items.push_back(std::move(first));
  while (accept(Tok::Comma)) tuple->items.push_back(parseExpr());
  return tuple;
}

// `a, b =` ahead: the start of a multiple assignment.
bool Parser::atNameList() {
  int i = 0;
  while (at(Tok::Ident, i) && at(Tok::Comma, i + 1)) i += 2;
  return i > 0 && at(Tok::Ident, i) && at(Tok::Assign, i + 1);
}

// assignStmt = IDENT { "," IDENT } "=" expr ";" ;
StmtPtr Parser::parseAssign() {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::Assign;
  s->loc = peek().loc;
  do {
    const Token &name = take();
    s->names.push_back(name.text);
    s->nameLocs.push_back(name.loc);
  } while (accept(Tok::Comma));
  take();  // '='
  s->value = parseValues(s->names.size());
  expectSemi("the assignment");
  return s;
}

// printStmt = "print" "(" [ STRING "," ] expr ")" ";" ;
StmtPtr Parser::parsePrint() {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::Print;
  s->loc = take().loc;
  take();  // '('
  if (at(Tok::String) && at(Tok::Comma, 1)) {
    s->label = take().text;
    take();
  }
  s->value = parseExpr();
  expect(Tok::RParen, "after the printed value",
         "print takes one value, optionally after a label: print(\"label\", x)");
  expectSemi("the print statement");
  return s;
}

// returnStmt = "return" [ expr { "," expr } ] ";" ;
StmtPtr Parser::parseReturn() {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::Return;
  s->loc = take().loc;
  if (!at(Tok::Semi)) {
    s->values.push_back(parseExpr());
    while (accept(Tok::Comma)) s->values.push_back(parseExpr());
  }
  expectSemi("the return statement");
  return s;
}

// forStmt = "for" IDENT "in" "range" "(" expr [ "," expr ] ")" block ;   (static integers,
// evaluated by sema: literals, x.shape[d], axis_size(...), and arithmetic on them)
StmtPtr Parser::parseFor() {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::For;
  s->loc = take().loc;
  const Token &var = expectIdent("for the loop variable after 'for'");
  s->names.push_back(var.text);
  s->nameLocs.push_back(var.loc);
  expect(Tok::KwIn, "after the loop variable", "write 'for i in range(N) { ... }'");
  if (!atIdent("range"))
    fail(DiagId::ExpectedToken, "'range' after 'in'", "loops run over range(N) or range(A, B)");
  take();
  expect(Tok::LParen, "after 'range'", "write range(N)");
  ExprPtr first = parseExpr();
  if (accept(Tok::Comma)) {
    s->values.push_back(std::move(first));
    s->values.push_back(parseExpr());
  } else {
    ExprPtr zero = makeExpr(Expr::IntLit, first->loc);
    zero->intValue = 0;
    s->values.push_back(std::move(zero));
    s->values.push_back(std::move(first));
  }
  expect(Tok::RParen, "to close range(...)", "range takes one or two static integers");
  s->body = parseBlock("for the loop body");
  return s;
}

// whileStmt = "while" expr block ;   (the condition is evaluated before every iteration)
StmtPtr Parser::parseWhile() {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::While;
  s->loc = take().loc;
  s->value = parseExpr();
  s->body = parseBlock("after the 'while' condition");
  return s;
}

// ifStmt = "if" expr block [ "else" ( ifStmt | block ) ] ;
StmtPtr Parser::parseIf() {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::If;
  s->loc = take().loc;
  s->value = parseExpr();
  s->body = parseBlock("after the 'if' condition");
  if (!accept(Tok::KwElse)) return s;
  if (at(Tok::KwIf)) s->elseBody.push_back(parseStmt());
  else s->elseBody = parseBlock("after 'else'");
  return s;
}

// exprStmt = call ";" ;
StmtPtr Parser::parseExprStmt() {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::ExprStmt;
  s->loc = peek().loc;
  s->value = parseExpr();
  if (at(Tok::Assign))
    diags_.fatal(DiagId::BadStatement, peek().loc, "only a plain name can be assigned to",
                 "arrays are immutable: build a new one (e.g. dynamic_update_slice) and bind "
                 "it with 'let'");
  if (s->value->kind != Expr::Call)
    diags_.fatal(DiagId::BadStatement, s->loc, "this expression's value is unused",
                 "bind it with 'let name = ...;' or remove it");
  expectSemi("the call");
  return s;
}

// ===================================================================== expressions

// expr = orExpr ;
ExprPtr Parser::parseExpr() { return parseOr(); }

// orExpr = andExpr { "||" andExpr } ;
ExprPtr Parser::parseOr() {
  DepthGuard guard(*this);
  ExprPtr lhs = parseAnd();
  while (at(Tok::OrOr)) {
    enter();  // a long chain builds a deep left spine
    const Token &op = take();
    lhs = makeBinary(op, std::move(lhs), parseAnd());
  }
  return lhs;
}

// andExpr = cmpExpr { "&&" cmpExpr } ;
ExprPtr Parser::parseAnd() {
  DepthGuard guard(*this);
  ExprPtr lhs = parseCmp();
  while (at(Tok::AndAnd)) {
    enter();
    const Token &op = take();
    lhs = makeBinary(op, std::move(lhs), parseCmp());
  }
  return lhs;
}

static bool isCmpOp(Tok k) {
  return k == Tok::EqEq || k == Tok::NotEq || k == Tok::Lt || k == Tok::Le || k == Tok::Gt ||
         k == Tok::Ge;
}

// cmpExpr = addExpr [ cmpOp addExpr ] ;   (non-associative)
ExprPtr Parser::parseCmp() {
  ExprPtr lhs = parseAdd();
  if (!isCmpOp(peek().kind)) return lhs;
  const Token &op = take();
  lhs = makeBinary(op, std::move(lhs), parseAdd());
  if (isCmpOp(peek().kind))
    diags_.fatal(DiagId::ExpectedToken, peek().loc,
                 "comparisons cannot be chained: found " + describe(peek()) +
                     " after a comparison",
                 "parenthesise, or combine with '&&': (a < b) && (b < c)");
  return lhs;
}

// addExpr = mulExpr { ( "+" | "-" ) mulExpr } ;
ExprPtr Parser::parseAdd() {
  DepthGuard guard(*this);
  ExprPtr lhs = parseMul();
  while (at(Tok::Plus) || at(Tok::Minus)) {
    enter();
    const Token &op = take();
    lhs = makeBinary(op, std::move(lhs), parseMul());
  }
  return lhs;
}

// mulExpr = unaryExpr { ( "*" | "/" | "//" | "%" | "@" ) unaryExpr } ;
ExprPtr Parser::parseMul() {
  DepthGuard guard(*this);
  ExprPtr lhs = parseUnary();
  while (at(Tok::Star) || at(Tok::Slash) || at(Tok::SlashSlash) || at(Tok::Percent) ||
         at(Tok::At)) {
    enter();
    const Token &op = take();
    lhs = makeBinary(op, std::move(lhs), parseUnary());
  }
  return lhs;
}

// unaryExpr = ( "-" | "!" ) unaryExpr | powerExpr ;
ExprPtr Parser::parseUnary() {
  DepthGuard guard(*this);
  enter();  // every nested expression passes through here
  if (!at(Tok::Minus) && !at(Tok::Bang)) return parsePower();
  const Token &op = take();
  ExprPtr e = makeExpr(Expr::Unary, op.loc);
  e->op = op.text;
  e->items.push_back(parseUnary());
  return e;
}

// powerExpr = postfixExpr [ "**" unaryExpr ] ;   as Python: -x ** 2 is -(x ** 2), and
// a ** b ** c is a ** (b ** c)
ExprPtr Parser::parsePower() {
  DepthGuard guard(*this);
  ExprPtr base = parsePostfix();
  if (!at(Tok::StarStar)) return base;
  const Token &op = take();
  return makeBinary(op, std::move(base), parseUnary());
}

// postfixExpr = primary { "[" indexItem { "," indexItem } "]" | "(" [ arg { "," arg } ] ")"
//                       | "." IDENT } ;
// An argument list after a call applies the function it returns: grad(f)(x). `.name` reads a
// record's field (`p.layers[0].w`; a plain `p.w` is parsed as a qualified name).
ExprPtr Parser::parsePostfix() {
  DepthGuard guard(*this);
  ExprPtr base = parsePrimary();
  while (at(Tok::LBracket) || at(Tok::Dot) || (at(Tok::LParen) && base->kind == Expr::Call)) {
    if (at(Tok::Dot)) {
      enter();
      take();
      const Token &field = expectIdent("of a field after '.'");
      ExprPtr e = makeExpr(Expr::Field, field.loc);
      e->name = field.text;
      e->items.push_back(std::move(base));
      base = std::move(e);
      continue;
    }
    if (at(Tok::LParen)) {
      enter();
      take();  // '(': the application is located at its function, like a call at its name
      ExprPtr e = makeExpr(Expr::Call, base->loc);
      e->name = base->name;
      e->callee = std::move(base);
      if (!at(Tok::RParen)) parseArgs(*e);
      expect(Tok::RParen, "to close the argument list", "separate arguments with ',' and close with ')'");
      base = std::move(e);
      continue;
    }
    enter();
    ExprPtr e = makeExpr(Expr::Index, take().loc);
    e->items.push_back(std::move(base));
    if (at(Tok::RBracket))
      fail(DiagId::ExpectedExpr, "an index inside '[]'", "write x[0], x[1:3] or x[:, None]");
    e->indices.push_back(parseIndexItem());
    while (accept(Tok::Comma)) e->indices.push_back(parseIndexItem());
    expect(Tok::RBracket, "to close the index", "separate indices with ',' and close with ']'");
    base = std::move(e);
    if (isAtIndex(*base)) base = parseAtUpdate(std::move(base));
  }
  return base;
}

// `x.at[...]`: an index of the name `at` of x (parsed as the qualified name x.at).
bool Parser::isAtIndex(const Expr &e) {
  return e.kind == Expr::Index && e.items[0]->kind == Expr::Name && e.items[0]->name == "at" &&
         !e.items[0]->module.empty();
}

// JAX's `x.at[idx].add(v)` and `x.at[:, idx].add(v)` (leading ':' select the axis): sugar for
// scatter_add(x, idx, v, axis=k).
ExprPtr Parser::parseAtUpdate(ExprPtr update) {
  const char *form = "write x.at[idx].add(v), or x.at[:, idx].add(v) for axis 1";
  if (!at(Tok::Dot))
    diags_.fatal(DiagId::BadAtUpdate, peek().loc, "x.at[...] must be followed by .add(v)", form);
  take();
  const Token &method = expectIdent("after 'x.at[...].'");
  if (method.text != "add")
    diags_.fatal(DiagId::BadAtUpdate, method.loc,
                 "x.at[...]." + method.text + "(...) is not supported; only .add(v) is",
                 method.text == "set" ? "build the new array with where(...) or "
                                        "dynamic_update_slice(...)"
                                      : form);
  size_t axis = 0;
  const std::vector<IndexItem> &items = update->indices;
  for (; axis + 1 < items.size(); ++axis)
    if (items[axis].kind != IndexItem::Slice || items[axis].start || items[axis].stop ||
        items[axis].step)
      diags_.fatal(DiagId::BadAtUpdate, items[axis].loc,
                   "x.at[...] takes ':' for the axes before the index array, then the index", form);
  if (items.back().kind != IndexItem::Index)
    diags_.fatal(DiagId::BadAtUpdate, items.back().loc, "x.at[...] needs an index array last",
                 form);
  expect(Tok::LParen, "after 'add'", form);
  ExprPtr call = makeExpr(Expr::Call, method.loc);
  call->name = "scatter_add";
  ExprPtr x = makeExpr(Expr::Name, update->items[0]->loc);
  x->name = update->items[0]->module;
  call->items.push_back(std::move(x));
  call->items.push_back(std::move(update->indices.back().index));
  call->items.push_back(parseExpr());
  expect(Tok::RParen, "to close .add(...)", "x.at[idx].add(v) takes one value");
  ExprPtr axisLit = makeExpr(Expr::IntLit, items.back().loc);
  axisLit->intValue = (int64_t)axis;
  call->kwargs.push_back(Expr::KwArg{"axis", items.back().loc, std::move(axisLit)});
  return call;
}

static bool endsSliceField(Tok k) { return k == Tok::Colon || k == Tok::Comma || k == Tok::RBracket; }

// As in Python, a None slice field means the field is omitted: x[None:2] is x[:2].
static ExprPtr omitNone(ExprPtr e) {
  if (e && e->kind == Expr::NoneLit) return nullptr;
  return e;
}

// indexItem = "None" | [ expr ] ":" [ expr ] [ ":" [ expr ] ] | expr ;
IndexItem Parser::parseIndexItem() {
  IndexItem item;
  item.loc = peek().loc;
  if (at(Tok::KwNone) && (at(Tok::Comma, 1) || at(Tok::RBracket, 1))) {
    take();
    item.kind = IndexItem::NewAxis;
    return item;
  }
  ExprPtr first;
  if (!at(Tok::Colon)) first = parseExpr();
  if (!accept(Tok::Colon)) {
    item.kind = IndexItem::Index;
    item.index = std::move(first);
    return item;
  }
  item.kind = IndexItem::Slice;
  item.start = omitNone(std::move(first));
  if (!endsSliceField(peek().kind)) item.stop = omitNone(parseExpr());
  if (accept(Tok::Colon) && !endsSliceField(peek().kind)) item.step = omitNone(parseExpr());
  return item;
}

// primary = INT | FLOAT | "true" | "false" | "None" | STRING
//         | call
//         | qualName
//         | "[" [ expr { "," expr } [ "," ] ] "]"
//         | "(" expr ")"
//         | "(" [ expr "," { expr "," } [ expr ] ] ")" ;
ExprPtr Parser::parsePrimary() {
  const Token &t = peek();
  switch (t.kind) {
  case Tok::Int: {
    ExprPtr e = makeExpr(Expr::IntLit, take().loc);
    e->intValue = t.intValue;
    return e;
  }
  case Tok::Float: {
    ExprPtr e = makeExpr(Expr::FloatLit, take().loc);
    e->floatValue = t.floatValue;
    return e;
  }
  case Tok::KwTrue:
  case Tok::KwFalse: {
    ExprPtr e = makeExpr(Expr::BoolLit, take().loc);
    e->boolValue = t.kind == Tok::KwTrue;
    return e;
  }
  case Tok::KwNone: return makeExpr(Expr::NoneLit, take().loc);
  case Tok::String: {
    ExprPtr e = makeExpr(Expr::StringLit, take().loc);
    e->name = t.text;
    return e;
  }
  case Tok::Ident:
    // (JAX users write grad(lambda w: ...): say what to write instead of "expected ')'")
    if (t.text == "lambda" && (at(Tok::Ident, 1) || at(Tok::Colon, 1)))
      diags_.fatal(DiagId::NoLambda, t.loc, "lambda expressions are not part of the language",
                   "define it with def and pass its name, e.g. grad(loss)(w, x): a function's other inputs "
                   "are its arguments, and argnums= picks which to differentiate");
    if (t.text == "sharding" && at(Tok::Lt, 1) && at(Tok::At, 2)) {
      ExprPtr e = makeExpr(Expr::ShardingLit, t.loc);
      e->sharding = std::make_shared<ShardingExpr>(parseSharding());
      return e;
    }
    return parseNameOrCall();
  case Tok::LBracket: return parseArrayLit();
  case Tok::LParen: return parseParenOrTuple();
  case Tok::LBrace:
    if (at(Tok::Ident, 1) && at(Tok::Colon, 2)) return parseRecordLit();
    fail(DiagId::ExpectedExpr, "an expression",
         "a record is written {w: value, b: value}; a block '{' follows a condition (if x > 0 { ... })");
  default: break;
  }
  if (atDType())
    fail(DiagId::ExpectedExpr, "an expression",
         "a type is only allowed as a call argument, e.g. zeros(f32[4])");
  fail(DiagId::ExpectedExpr, "an expression", "write a value, a name or a call here");
}

// qualName = IDENT [ "." IDENT ] ;
// call     = qualName "(" [ arg { "," arg } ] ")" ;
ExprPtr Parser::parseNameOrCall() {
  const Token &first = take();
  ExprPtr e = makeExpr(Expr::Name, first.loc);
  e->name = first.text;
  if (accept(Tok::Dot)) {
    e->module = first.text;
    e->name = expectIdent("after '" + first.text + ".'").text;
  }
  if (!accept(Tok::LParen)) return e;
  e->kind = Expr::Call;
  if (!at(Tok::RParen)) parseArgs(*e);
  expect(Tok::RParen, "to close the argument list of '" + e->name + "'",
         "separate arguments with ',' and close with ')'");
  return e;
}

// The `arg { "," arg }` part of `call`;  arg = [ IDENT "=" ] ( typeArg | expr ) ;
void Parser::parseArgs(Expr &call) {
  do {
    if (at(Tok::Ident) && at(Tok::Assign, 1)) {
      const Token &key = take();
      take();  // '='
      call.kwargs.push_back(Expr::KwArg{key.text, key.loc, parseArgValue()});
      continue;
    }
    if (!call.kwargs.empty())
      diags_.fatal(DiagId::ExpectedToken, peek().loc,
                   "positional argument after keyword argument '" + call.kwargs.back().name + "'",
                   "put positional arguments before keyword arguments");
    call.items.push_back(parseArgValue());
  } while (accept(Tok::Comma));
}

ExprPtr Parser::parseArgValue() {
  if (atDType()) return parseTypeArg();
  return parseExpr();
}

// typeArg = type | dtype ;   (a bare dtype has an empty shape: `cast(x, f64)`)
ExprPtr Parser::parseTypeArg() {
  ExprPtr e = makeExpr(Expr::TypeArg, peek().loc);
  TypeExpr t;
  t.loc = e->loc;
  t.dtype = parseDType();
  if (at(Tok::LBracket)) parseShape(t);
  e->type = std::move(t);
  return e;
}

// "[" [ expr { "," expr } [ "," ] ] "]"
ExprPtr Parser::parseArrayLit() {
  ExprPtr e = makeExpr(Expr::ArrayLit, take().loc);
  while (!at(Tok::RBracket)) {
    e->items.push_back(parseExpr());
    if (!accept(Tok::Comma)) break;
  }
  expect(Tok::RBracket, "to close the array literal",
         "separate elements with ',' and close with ']'");
  return e;
}

// record = "{" IDENT ":" expr { "," IDENT ":" expr } [ "," ] "}" ;
ExprPtr Parser::parseRecordLit() {
  ExprPtr e = makeExpr(Expr::RecordLit, take().loc);
  const char *form = "write a record as {w: value, b: value}";
  do {
    if (at(Tok::RBrace)) break;  // a trailing comma (the first field is known to be there)
    if (!at(Tok::Ident)) fail(DiagId::ExpectedToken, "a field name", form);
    const Token &key = take();
    expect(Tok::Colon, "after the field name '" + key.text + "'", form);
    e->kwargs.push_back(Expr::KwArg{key.text, key.loc, parseExpr()});
  } while (accept(Tok::Comma));
  expect(Tok::RBrace, "to close the record", "separate fields with ',' and close with '}'");
  return e;
}

// "(" expr ")"  |  "(" [ expr "," { expr "," } [ expr ] ] ")"
// A comma makes a tuple: (a) is a, (a,) is a 1-tuple, () is the empty tuple.
ExprPtr Parser::parseParenOrTuple() {
  Loc open = take().loc;
  if (accept(Tok::RParen)) return makeExpr(Expr::TupleLit, open);
  ExprPtr first = parseExpr();
  if (accept(Tok::RParen)) return first;
  if (!at(Tok::Comma))
    fail(DiagId::ExpectedToken, "')' or ','", "close the parenthesis with ')'");
  ExprPtr tuple = makeExpr(Expr::TupleLit, open);
  tuple->items.push_back(std::move(first));
  while (accept(Tok::Comma) && !at(Tok::RParen)) tuple->items.push_back(parseExpr());
  expect(Tok::RParen, "to close the tuple", "separate elements with ',' and close with ')'");
  return tuple;
}

} // namespace

ast::Program parseProgram(int fileId, const SourceManager &sm, Diagnostics &diags) {
  ast::Program prog = Parser(lex(fileId, sm, diags), diags).parseProgram();
  prog.file = fileId;
  return prog;
}

} // namespace shmapc
