// Front-end unit tests: lexer tokens and locations, parser constructs (checked through
// printAST), node locations, every error path (DiagId + line:col), and a mutation fuzz test
// that only ever expects success or CompileError.
#include "parser/Parser.h"

#include <catch2/catch.hpp>

#include <sstream>

using namespace shmapc;

namespace {

// ---------------------------------------------------------------- helpers

std::vector<Token> lexString(const std::string &src) {
  SourceManager sm;
  int id = sm.addBuffer("t.smp", src);
  std::ostringstream err;
  Diagnostics diags(sm, err);
  return lex(id, sm, diags);
}

std::vector<Tok> kinds(const std::vector<Token> &toks) {
  std::vector<Tok> out;
  for (const Token &t : toks) out.push_back(t.kind);
  return out;
}

// Parses `src`; the SourceManager must outlive nothing (the AST keeps no pointers into it).
ast::Program parse(const std::string &src) {
  SourceManager sm;
  int id = sm.addBuffer("t.smp", src);
  std::ostringstream err;
  Diagnostics diags(sm, err);
  try {
    return parseProgram(id, sm, diags);
  } catch (CompileError &) {
    FAIL("unexpected error:\n" << err.str());
    throw;
  }
}

std::string dump(const std::string &src) { return ast::printAST(parse(src)); }

// The printed form of the expression in `def f() { return EXPR; }`.
std::string exprDump(const std::string &expr) {
  std::string text = dump("def f() { return " + expr + "; }");
  size_t begin = text.find("(return ");
  REQUIRE(begin != std::string::npos);
  begin += 8;
  int depth = 0;
  bool inString = false;
  for (size_t i = begin; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\') ++i;
      else if (c == '"') inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      if (depth == 0) return text.substr(begin, i - begin);
      --depth;
    }
  }
  FAIL("unbalanced dump: " << text);
  return "";
}

// What a failing compile reported: the diagnostic name, where, and the full text.
struct Failure {
  bool failed = false;
  std::string name;
  int line = 0, col = 0;
  std::string text;
  int errors = 0;
};

Failure failure(const std::string &src) {
  SourceManager sm;
  int id = sm.addBuffer("t.smp", src);
  std::ostringstream err;
  Diagnostics diags(sm, err);
  Failure f;
  try {
    parseProgram(id, sm, diags);
  } catch (CompileError &) {
    f.failed = true;
  }
  f.text = err.str();
  f.errors = diags.errorCount();
  // First line: t.smp:LINE:COL: error: message [name]
  if (std::sscanf(f.text.c_str(), "t.smp:%d:%d:", &f.line, &f.col) != 2) f.line = f.col = -1;
  size_t open = f.text.find('['), close = f.text.find("]\n");
  if (open != std::string::npos && close != std::string::npos) {
    // the name is the last [...] on the first line
    std::string first = f.text.substr(0, f.text.find('\n'));
    size_t o = first.rfind('['), c = first.rfind(']');
    if (o != std::string::npos && c != std::string::npos && c > o)
      f.name = first.substr(o + 1, c - o - 1);
  }
  return f;
}

void expectError(const std::string &src, DiagId id, int line, int col) {
  INFO("source: " << src);
  Failure f = failure(src);
  INFO("output: " << f.text);
  REQUIRE(f.failed);
  CHECK(f.errors == 1);
  CHECK(f.name == diagName(id));
  CHECK(f.line == line);
  CHECK(f.col == col);
  CHECK(f.text.find("help: ") != std::string::npos);
}

const char *kExample = R"(import nn;
mesh xy = <["x"=2, "y"=4]>;

@shmap(mesh=xy, in_specs=(P(("x","y")),), out_specs=P())
def slice_and_average(x: f32[64]) -> f32[4] {
  return pmean(x[:4], ("x", "y"));
}

@shmap(mesh=xy, in_specs=(P("x", "y"), P(None, "y")), out_specs=P("x", "y"))
def collective_matmul(lhs: f32[4, 2], rhs: f32[8, 4]) -> f32[4, 4] {
  let n = 4;
  let accum = zeros(f32[4, 4]);
  for i in range(3) {
    let j = (axis_index("y") + i) % n;
    let chunk = dynamic_slice(rhs, [j * 2, 0], [2, 4]);
    accum = accum + lhs @ chunk;
    lhs = ppermute(lhs, "y", perm=[(0, 3), (1, 0), (2, 1), (3, 2)]);
  }
  return accum + lhs @ dynamic_slice(rhs, [((axis_index("y") + 3) % n) * 2, 0], [2, 4]);
}

def main() {
  let x = iota(f32[512]);
  print("avg", slice_and_average(x));
  let w = random_normal(f32[8, 16], seed=0);
  if sum(w) > 0.0 { w = -w; } else { w = w * 2.0; }
  print(nn.relu(w)[0, 1:3]);
}
)";

const char *kExampleAST = R"((program
  (import nn)
  (mesh xy ("x" 2) ("y" 4))
  (def slice_and_average
    (shmap (mesh xy) (in_specs P(("x", "y"))) (out_specs P()) (check_vma true) (auto_pbroadcast true))
    (params (x f32[64]))
    (results f32[4])
    (body
      (return (call pmean (index x (slice _ 4 _)) (tuple "x" "y")))))
  (def collective_matmul
    (shmap (mesh xy) (in_specs P("x", "y") P(None, "y")) (out_specs P("x", "y")) (check_vma true) (auto_pbroadcast true))
    (params (lhs f32[4,2]) (rhs f32[8,4]))
    (results f32[4,4])
    (body
      (let (n) 4)
      (let (accum) (call zeros (type f32[4,4])))
      (for i 0 3
        (body
          (let (j) (% (+ (call axis_index "y") i) n))
          (let (chunk) (call dynamic_slice rhs (array (* j 2) 0) (array 2 4)))
          (assign accum (+ accum (@ lhs chunk)))
          (assign lhs (call ppermute lhs "y" (kw perm (array (tuple 0 3) (tuple 1 0) (tuple 2 1) (tuple 3 2)))))))
      (return (+ accum (@ lhs (call dynamic_slice rhs (array (* (% (+ (call axis_index "y") 3) n) 2) 0) (array 2 4)))))))
  (def main
    (params)
    (body
      (let (x) (call iota (type f32[512])))
      (print "avg" (call slice_and_average x))
      (let (w) (call random_normal (type f32[8,16]) (kw seed 0)))
      (if (> (call sum w) 0.0)
        (then
          (assign w (- w)))
        (else
          (assign w (* w 2.0))))
      (print (index (call nn.relu w) 0 (slice 1 3 _))))))
)";

} // namespace

// ================================================================ lexer

TEST_CASE("lexer: keywords and identifiers", "[lexer]") {
  auto toks = lexString("def let return for in if else mesh import true false None f32 f64 "
                        "i32 bool foo _bar P9 define None_ f32x");
  std::vector<Tok> want = {
      Tok::KwDef,   Tok::KwLet,   Tok::KwReturn, Tok::KwFor,   Tok::KwIn,    Tok::KwIf,
      Tok::KwElse,  Tok::KwMesh,  Tok::KwImport, Tok::KwTrue,  Tok::KwFalse, Tok::KwNone,
      Tok::KwF32,   Tok::KwF64,   Tok::KwI32,    Tok::KwBool,  Tok::Ident,   Tok::Ident,
      Tok::Ident,   Tok::Ident,   Tok::Ident,    Tok::Ident,   Tok::Eof};
  CHECK(kinds(toks) == want);
  CHECK(toks[16].text == "foo");
  CHECK(toks[17].text == "_bar");
  CHECK(toks[20].text == "None_");
}

TEST_CASE("lexer and parser: the dtypes i64, f16 and bf16", "[lexer][parser]") {
  auto toks = lexString("i64 f16 bf16 bf16x f16_ i64[2]");
  std::vector<Tok> want = {Tok::KwI64, Tok::KwF16, Tok::KwBF16, Tok::Ident, Tok::Ident,
                           Tok::KwI64, Tok::LBracket, Tok::Int, Tok::RBracket, Tok::Eof};
  CHECK(kinds(toks) == want);
  CHECK(dump("def f(a: i64[4], b: f16[2, 3], c: bf16[]) -> bf16[] {}") ==
        "(program\n  (def f\n    (params (a i64[4]) (b f16[2,3]) (c bf16[]))\n    (results bf16[])\n"
        "    (body)))\n");
  CHECK(exprDump("cast(x, bf16)") == "(call cast x (type bf16[]))");
}

TEST_CASE("lexer: punctuation and operators", "[lexer]") {
  auto toks = lexString("( ) [ ] { } , ; : . @ -> = + - * / // % == != < <= > >= && || ! ");
  std::vector<Tok> want = {
      Tok::LParen, Tok::RParen, Tok::LBracket, Tok::RBracket, Tok::LBrace,     Tok::RBrace,
      Tok::Comma,  Tok::Semi,   Tok::Colon,    Tok::Dot,      Tok::At,         Tok::Arrow,
      Tok::Assign, Tok::Plus,   Tok::Minus,    Tok::Star,     Tok::Slash,      Tok::SlashSlash,
      Tok::Percent, Tok::EqEq,  Tok::NotEq,    Tok::Lt,       Tok::Le,         Tok::Gt,
      Tok::Ge,     Tok::AndAnd, Tok::OrOr,     Tok::Bang,     Tok::Eof};
  CHECK(kinds(toks) == want);
  // Longest match without spaces; `<[` and `]>` of a mesh stay separate tokens.
  CHECK(kinds(lexString("a->b==c!=d<=e>=f")) ==
        std::vector<Tok>{Tok::Ident, Tok::Arrow, Tok::Ident, Tok::EqEq, Tok::Ident, Tok::NotEq,
                         Tok::Ident, Tok::Le, Tok::Ident, Tok::Ge, Tok::Ident, Tok::Eof});
  CHECK(kinds(lexString("<[]>;")) == std::vector<Tok>{Tok::Lt, Tok::LBracket, Tok::RBracket,
                                                      Tok::Gt, Tok::Semi, Tok::Eof});
  // `//` is floor division (comments start with #); `///` is `//` then `/`.
  CHECK(kinds(lexString("a//b/c///d")) ==
        std::vector<Tok>{Tok::Ident, Tok::SlashSlash, Tok::Ident, Tok::Slash, Tok::Ident,
                         Tok::SlashSlash, Tok::Slash, Tok::Ident, Tok::Eof});
  CHECK(kinds(lexString("x--1")) ==
        std::vector<Tok>{Tok::Ident, Tok::Minus, Tok::Minus, Tok::Int, Tok::Eof});
}

TEST_CASE("lexer: numbers", "[lexer]") {
  auto toks = lexString("12 0 1.5 1e-3 2. 1.5E+2 3e2 007");
  REQUIRE(toks.size() == 9);
  CHECK(toks[0].kind == Tok::Int);
  CHECK(toks[0].intValue == 12);
  CHECK(toks[1].kind == Tok::Int);
  CHECK(toks[1].intValue == 0);
  CHECK(toks[2].kind == Tok::Float);
  CHECK(toks[2].floatValue == 1.5);
  CHECK(toks[3].kind == Tok::Float);
  CHECK(toks[3].floatValue == Approx(1e-3));
  CHECK(toks[4].kind == Tok::Float);
  CHECK(toks[4].floatValue == 2.0);
  CHECK(toks[4].text == "2.");
  CHECK(toks[5].floatValue == 150.0);
  CHECK(toks[6].kind == Tok::Float);
  CHECK(toks[6].floatValue == 300.0);
  CHECK(toks[7].intValue == 7);
  // `x.0` is not a thing, but `nn.relu` is Ident Dot Ident.
  CHECK(kinds(lexString("nn.relu")) ==
        std::vector<Tok>{Tok::Ident, Tok::Dot, Tok::Ident, Tok::Eof});
  CHECK(lexString("9223372036854775807")[0].intValue == INT64_MAX);
}

TEST_CASE("lexer: strings and comments", "[lexer]") {
  auto toks = lexString("\"x\" \"\" \"a b\" \"q\\\"q\" \"s\\\\s\" # comment \"not a string\n\"y\"");
  REQUIRE(toks.size() == 7);
  CHECK(toks[0].kind == Tok::String);
  CHECK(toks[0].text == "x");
  CHECK(toks[1].text == "");
  CHECK(toks[2].text == "a b");
  CHECK(toks[3].text == "q\"q");
  CHECK(toks[4].text == "s\\s");
  CHECK(toks[5].text == "y");
  CHECK(toks[5].loc.line == 2);
  CHECK(kinds(lexString("# only a comment")) == std::vector<Tok>{Tok::Eof});
  CHECK(kinds(lexString("")) == std::vector<Tok>{Tok::Eof});
}

TEST_CASE("lexer: locations are 1-based line:col", "[lexer]") {
  auto toks = lexString("def f() {\n  let x = 1.5;  # c\n\treturn x;\n}\n");
  CHECK(toks[0].loc.line == 1);
  CHECK(toks[0].loc.col == 1);
  CHECK(toks[1].loc.col == 5);   // f
  CHECK(toks[5].kind == Tok::KwLet);
  CHECK(toks[5].loc.line == 2);
  CHECK(toks[5].loc.col == 3);
  CHECK(toks[8].kind == Tok::Float);
  CHECK(toks[8].loc.col == 11);
  CHECK(toks[10].kind == Tok::KwReturn);
  CHECK(toks[10].loc.line == 3);
  CHECK(toks[10].loc.col == 2);  // a tab is one column
  CHECK(toks.back().kind == Tok::Eof);
  CHECK(toks.back().loc.line == 5);
  CHECK(toks.back().loc.col == 1);
  CHECK(toks[0].loc.file == 0);
  // CRLF line endings
  auto crlf = lexString("a\r\nb");
  CHECK(crlf[1].loc.line == 2);
  CHECK(crlf[1].loc.col == 1);
}

TEST_CASE("lexer: printTokens", "[lexer]") {
  CHECK(printTokens(lexString("let s = \"a\\\"b\";\nx->1.5")) ==
        "1:1 KwLet let\n1:5 Ident s\n1:7 Assign =\n1:9 String \"a\\\"b\"\n1:15 Semi ;\n"
        "2:1 Ident x\n2:2 Arrow ->\n2:4 Float 1.5\n2:7 Eof\n");
}

TEST_CASE("lexer: errors", "[lexer]") {
  expectError("def f() { $ }", DiagId::UnexpectedChar, 1, 11);
  expectError("def f() {\n  a & b }", DiagId::UnexpectedChar, 2, 5);
  expectError("a | b", DiagId::UnexpectedChar, 1, 3);
  expectError("print('x')", DiagId::UnexpectedChar, 1, 7);
  expectError("x = \xc3\xa9;", DiagId::UnexpectedChar, 1, 5);
  expectError(std::string("a\0b", 3), DiagId::UnexpectedChar, 1, 2);
  expectError("let s = \"abc", DiagId::UnterminatedString, 1, 9);
  expectError("let s = \"abc\n\";", DiagId::UnterminatedString, 1, 9);
  expectError("let s = \"ab\\", DiagId::UnexpectedChar, 1, 12);  // backslash then EOF
  expectError("let s = \"a\\nb\";", DiagId::UnexpectedChar, 1, 11);
  expectError("x = 1e;", DiagId::BadNumber, 1, 5);
  expectError("x = 1e+;", DiagId::BadNumber, 1, 5);
  expectError("x = 12abc;", DiagId::BadNumber, 1, 5);
  expectError("x = 1.5x;", DiagId::BadNumber, 1, 5);
  expectError("x = 99999999999999999999;", DiagId::BadNumber, 1, 5);
  expectError("x = 1e999;", DiagId::BadNumber, 1, 5);
  CHECK(failure("a & b").text.find("did you mean '&&'?") != std::string::npos);
}

// ================================================================ parser: constructs

TEST_CASE("parser: the reference example", "[parser]") {
  CHECK(dump(kExample) == kExampleAST);
}

TEST_CASE("parser: imports and meshes", "[parser]") {
  auto p = parse("import nn;\nimport utils;\nmesh xy = <[\"x\"=2, \"y\"=4]>;\nmesh one = <[\"d\"=1]>;");
  REQUIRE(p.imports.size() == 2);
  CHECK(p.imports[1].module == "utils");
  CHECK(p.imports[1].loc.line == 2);
  CHECK(p.imports[1].loc.col == 1);
  REQUIRE(p.meshes.size() == 2);
  const ast::MeshDecl &m = p.meshes[0];
  CHECK(m.name == "xy");
  CHECK(m.loc.line == 3);
  CHECK(m.loc.col == 6);
  CHECK(m.axes == std::vector<std::string>{"x", "y"});
  CHECK(m.sizes == std::vector<int64_t>{2, 4});
  REQUIRE(m.axisLocs.size() == 2);
  CHECK(m.axisLocs[1].col == 20);
  CHECK(p.meshes[1].sizes == std::vector<int64_t>{1});
}

TEST_CASE("parser: function signatures", "[parser]") {
  CHECK(dump("def f(a: f32[4], b, c: i32[]) -> f32[4] {}") ==
        "(program\n  (def f\n    (params (a f32[4]) b (c i32[]))\n    (results f32[4])\n"
        "    (body)))\n");
  auto p = parse("def g(x: bool[2,3]) -> (f32[4], f64[]) {}\ndef h() -> () {}\ndef k() {}\n"
                 "def m() -> (f32[2],) {}");
  const ast::FuncDecl &g = *p.funcs[0];
  CHECK(g.name == "g");
  CHECK(g.loc.line == 1);
  CHECK(g.loc.col == 5);
  CHECK(g.hasResultArrow);
  REQUIRE(g.results.size() == 2);
  CHECK(g.results[0].dtype == ast::DTypeName::F32);
  CHECK(g.results[0].shape == std::vector<int64_t>{4});
  CHECK(g.results[1].dtype == ast::DTypeName::F64);
  CHECK(g.results[1].shape.empty());
  CHECK(g.results[1].loc.col == 33);
  REQUIRE(g.params[0].type);
  CHECK(g.params[0].type->dtype == ast::DTypeName::Bool);
  CHECK(g.params[0].type->shape == std::vector<int64_t>{2, 3});
  CHECK(g.params[0].loc.col == 7);
  CHECK(g.params[0].type->loc.col == 10);
  CHECK(!g.shmap);
  CHECK(p.funcs[1]->hasResultArrow);
  CHECK(p.funcs[1]->results.empty());
  CHECK(!p.funcs[2]->hasResultArrow);
  CHECK(p.funcs[3]->results.size() == 1);
  CHECK(g.module.empty());
}

TEST_CASE("parser: trees of partition specs", "[parser]") {
  // in_specs: a record for parameter 0 (a tuple inside it), a single P for parameter 1
  auto p = parse("@shmap(mesh=m, in_specs=({w: P(\"x\"), l: (P(), P(None, \"y\"),)}, P()), out_specs=(P(),))\n"
                 "def f(a, b) {}");
  const ast::ShmapAttrs &a = *p.funcs[0]->shmap;
  REQUIRE(a.inSpecs.size() == 2);
  const ast::PartitionSpecExpr &rec = a.inSpecs[0];
  CHECK(rec.isTree);
  CHECK(rec.loc.col == 26);
  CHECK(rec.keys == std::vector<std::string>{"w", "l"});  // as written
  REQUIRE(rec.items.size() == 2);
  CHECK(!rec.items[0].isTree);
  CHECK(rec.items[0].dims == std::vector<std::vector<std::string>>{{"x"}});
  const ast::PartitionSpecExpr &tup = rec.items[1];
  CHECK(tup.isTree);
  CHECK(tup.keys.empty());
  REQUIRE(tup.items.size() == 2);
  CHECK(tup.items[1].dims == std::vector<std::vector<std::string>>{{}, {"y"}});
  CHECK(!a.inSpecs[1].isTree);
  REQUIRE(a.outSpecs.size() == 1);  // the outer parentheses list the results
  CHECK(!a.outSpecs[0].isTree);
}

TEST_CASE("parser: shmap attributes and partition specs", "[parser]") {
  auto p = parse("@shmap(mesh=xy, in_specs=(P(), P(\"x\"), P(None, \"y\"), P((\"x\",\"y\"), None), "
                 "P((\"x\",), ())), out_specs=P(\"x\"), check_vma=false, auto_pbroadcast=false)\n"
                 "def f(a, b, c, d, e) {}");
  REQUIRE(p.funcs[0]->shmap);
  const ast::ShmapAttrs &a = *p.funcs[0]->shmap;
  CHECK(a.loc.col == 1);
  CHECK(a.mesh == "xy");
  CHECK(a.meshLoc.col == 13);
  CHECK(!a.checkVma);
  CHECK(!a.autoPbroadcast);
  REQUIRE(a.inSpecs.size() == 5);
  CHECK(a.inSpecsLoc.col == 26);
  CHECK(a.inSpecs[0].dims.empty());
  CHECK(a.inSpecs[0].loc.col == 27);
  CHECK(a.inSpecs[1].dims == std::vector<std::vector<std::string>>{{"x"}});
  CHECK(a.inSpecs[2].dims == std::vector<std::vector<std::string>>{{}, {"y"}});
  CHECK(a.inSpecs[3].dims == std::vector<std::vector<std::string>>{{"x", "y"}, {}});
  CHECK(a.inSpecs[4].dims == std::vector<std::vector<std::string>>{{"x"}, {}});
  REQUIRE(a.inSpecs[3].dimLocs.size() == 2);
  REQUIRE(a.inSpecs[3].dimLocs[0].size() == 2);
  CHECK(a.inSpecs[3].dimLocs[0][1].col == 61);
  CHECK(a.inSpecs[3].dimLocs[1].empty());
  REQUIRE(a.outSpecs.size() == 1);
  CHECK(a.outSpecs[0].dims == std::vector<std::vector<std::string>>{{"x"}});

  // Defaults, zero specs, single-spec forms, attribute order is free.
  auto q = parse("@shmap(out_specs=(P(\"x\"),), in_specs=(), mesh=m) def f() {}");
  const ast::ShmapAttrs &b = *q.funcs[0]->shmap;
  CHECK(b.checkVma);
  CHECK(b.autoPbroadcast);
  CHECK(b.inSpecs.empty());
  CHECK(b.outSpecs.size() == 1);
  CHECK(dump("@shmap(mesh=m, in_specs=P(None, (\"a\", \"b\")), out_specs=(P(), P(\"a\")))\n"
             "def f(x) {}")
            .find("(shmap (mesh m) (in_specs P(None, (\"a\", \"b\"))) (out_specs P() P(\"a\")) "
                  "(check_vma true) (auto_pbroadcast true))") != std::string::npos);
}

TEST_CASE("parser: statements", "[parser]") {
  CHECK(dump("def f() {\n"
             "  let a = 1;\n"
             "  let b, c = g(a);\n"
             "  a = 2;\n"
             "  a, b = g(a);\n"
             "  print(a);\n"
             "  print(\"label\", a);\n"
             "  g(a);\n"
             "  nn.g(a);\n"
             "  for i in range(4) { a = a + i; }\n"
             "  for j in range(-2, 2) {}\n"
             "  if a > 0 { return; } else if a < 0 { return a; } else { return a, b; }\n"
             "  if true {}\n"
             "}") ==
        "(program\n"
        "  (def f\n"
        "    (params)\n"
        "    (body\n"
        "      (let (a) 1)\n"
        "      (let (b c) (call g a))\n"
        "      (assign a 2)\n"
        "      (assign (a b) (call g a))\n"
        "      (print a)\n"
        "      (print \"label\" a)\n"
        "      (expr (call g a))\n"
        "      (expr (call nn.g a))\n"
        "      (for i 0 4\n"
        "        (body\n"
        "          (assign a (+ a i))))\n"
        "      (for j (- 2) 2\n"
        "        (body))\n"
        "      (if (> a 0)\n"
        "        (then\n"
        "          (return))\n"
        "        (else\n"
        "          (if (< a 0)\n"
        "            (then\n"
        "              (return a))\n"
        "            (else\n"
        "              (return a b)))))\n"
        "      (if true\n"
        "        (then)))))\n");
}

TEST_CASE("parser: statement details", "[parser]") {
  auto p = parse("def f() {\n let a, b = g();\n a = 1;\n print(\"l\", a);\n for i in range(1, 5) {}\n"
                 " if c {} else if d {}\n g();\n return a, b;\n}");
  const ast::Block &body = p.funcs[0]->body;
  REQUIRE(body.size() == 7);
  CHECK(body[0]->kind == ast::Stmt::Let);
  CHECK(body[0]->loc.line == 2);
  CHECK(body[0]->loc.col == 2);
  CHECK(body[0]->names == std::vector<std::string>{"a", "b"});
  REQUIRE(body[0]->nameLocs.size() == 2);
  CHECK(body[0]->nameLocs[1].col == 9);
  CHECK(body[1]->kind == ast::Stmt::Assign);
  CHECK(body[1]->loc.col == 2);
  CHECK(body[1]->nameLocs[0].col == 2);
  CHECK(body[2]->kind == ast::Stmt::Print);
  CHECK(body[2]->label == "l");
  CHECK(body[2]->value->kind == ast::Expr::Name);
  CHECK(body[3]->kind == ast::Stmt::For);
  REQUIRE(body[3]->values.size() == 2);
  CHECK(body[3]->values[0]->intValue == 1);
  CHECK(body[3]->values[1]->intValue == 5);
  CHECK(body[3]->nameLocs[0].col == 6);
  CHECK(body[4]->kind == ast::Stmt::If);
  REQUIRE(body[4]->elseBody.size() == 1);
  CHECK(body[4]->elseBody[0]->kind == ast::Stmt::If);
  CHECK(body[4]->elseBody[0]->loc.col == 15);
  CHECK(body[4]->elseBody[0]->elseBody.empty());
  CHECK(body[5]->kind == ast::Stmt::ExprStmt);
  CHECK(body[5]->value->kind == ast::Expr::Call);
  CHECK(body[6]->kind == ast::Stmt::Return);
  CHECK(body[6]->values.size() == 2);
  // `print` is only special as a statement head followed by '('; a label needs a comma.
  CHECK(dump("def f() { print = 1; print(\"only\"); }").find("(assign print 1)") != std::string::npos);
  CHECK(dump("def f() { print(\"only\"); }").find("(print \"only\")") != std::string::npos);
  CHECK(dump("def f() { for i in range(0) {} }").find("(for i 0 0") != std::string::npos);
}

// ================================================================ parser: expressions

TEST_CASE("parser: literals and names", "[parser][expr]") {
  CHECK(exprDump("42") == "42");
  CHECK(exprDump("1.5") == "1.5");
  CHECK(exprDump("2.") == "2.0");
  CHECK(exprDump("1e-3") == "0.001");
  CHECK(exprDump("true") == "true");
  CHECK(exprDump("false") == "false");
  CHECK(exprDump("None") == "None");
  CHECK(exprDump("\"x\"") == "\"x\"");
  CHECK(exprDump("abc") == "abc");
  CHECK(exprDump("nn.w") == "nn.w");
  CHECK(exprDump("[1, 2, 3]") == "(array 1 2 3)");
  CHECK(exprDump("[[1.0, 2.0], [3.0, 4.0],]") == "(array (array 1.0 2.0) (array 3.0 4.0))");
  CHECK(exprDump("[]") == "(array)");
  CHECK(exprDump("(a, b)") == "(tuple a b)");
  CHECK(exprDump("(a,)") == "(tuple a)");
  CHECK(exprDump("(a, b,)") == "(tuple a b)");
  CHECK(exprDump("()") == "(tuple)");
  CHECK(exprDump("(a)") == "a");
  CHECK(exprDump("((a))") == "a");
  CHECK(exprDump("(\"x\", \"y\")") == "(tuple \"x\" \"y\")");
}

TEST_CASE("parser: calls and type arguments", "[parser][expr]") {
  CHECK(exprDump("f()") == "(call f)");
  CHECK(exprDump("f(a, b)") == "(call f a b)");
  CHECK(exprDump("sum(x, axis=0)") == "(call sum x (kw axis 0))");
  CHECK(exprDump("sum(x, axis=(0, 1))") == "(call sum x (kw axis (tuple 0 1)))");
  CHECK(exprDump("all_gather(x, \"x\", axis=0, tiled=true)") ==
        "(call all_gather x \"x\" (kw axis 0) (kw tiled true))");
  CHECK(exprDump("nn.dense(x, w)") == "(call nn.dense x w)");
  CHECK(exprDump("zeros(f32[4,2])") == "(call zeros (type f32[4,2]))");
  CHECK(exprDump("ones(i32[])") == "(call ones (type i32[]))");
  CHECK(exprDump("full(bool[3], true)") == "(call full (type bool[3]) true)");
  CHECK(exprDump("cast(x, f64)") == "(call cast x (type f64[]))");
  CHECK(exprDump("f(dtype=i32)") == "(call f (kw dtype (type i32[])))");
  CHECK(exprDump("f(g(h(x)))") == "(call f (call g (call h x)))");
  // The keyword test looks at `ident =` only: `a == b` is a comparison argument.
  CHECK(exprDump("f(a == b)") == "(call f (== a b))");
  // An argument list after a call applies the function the call returns.
  CHECK(exprDump("grad(f)(x)") == "(apply (call grad f) x)");
  CHECK(exprDump("grad(f, argnums=(0, 1))(x, y)") ==
        "(apply (call grad f (kw argnums (tuple 0 1))) x y)");
  CHECK(exprDump("transpose(transpose(f))(ct)[0]") ==
        "(index (apply (call transpose (call transpose f)) ct) 0)");
  CHECK(exprDump("jvp(f)()") == "(apply (call jvp f))");

  auto p = parse("def f() { return cast(x, f64); }");
  const ast::Expr &call = *p.funcs[0]->body[0]->values[0];
  REQUIRE(call.items.size() == 2);
  const ast::Expr &t = *call.items[1];
  CHECK(t.kind == ast::Expr::TypeArg);
  REQUIRE(t.type);
  CHECK(t.type->dtype == ast::DTypeName::F64);
  CHECK(t.type->shape.empty());
  CHECK(t.loc.col == 26);
  CHECK(t.type->loc.col == 26);
}

TEST_CASE("parser: indexing", "[parser][expr]") {
  CHECK(exprDump("x[0]") == "(index x 0)");
  CHECK(exprDump("x[-1]") == "(index x (- 1))");
  CHECK(exprDump("x[1:3]") == "(index x (slice 1 3 _))");
  CHECK(exprDump("x[:, 2]") == "(index x (slice _ _ _) 2)");
  CHECK(exprDump("x[::2]") == "(index x (slice _ _ 2))");
  CHECK(exprDump("x[1:]") == "(index x (slice 1 _ _))");
  CHECK(exprDump("x[:-1]") == "(index x (slice _ (- 1) _))");
  CHECK(exprDump("x[1:5:2]") == "(index x (slice 1 5 2))");
  CHECK(exprDump("x[::-1]") == "(index x (slice _ _ (- 1)))");
  CHECK(exprDump("x[1::]") == "(index x (slice 1 _ _))");
  CHECK(exprDump("x[None:2:None]") == "(index x (slice _ 2 _))");
  CHECK(exprDump("x[None]") == "(index x newaxis)");
  CHECK(exprDump("x[:, None]") == "(index x (slice _ _ _) newaxis)");
  CHECK(exprDump("x[0][1]") == "(index (index x 0) 1)");
  CHECK(exprDump("f(x)[0, 1:3]") == "(index (call f x) 0 (slice 1 3 _))");
  CHECK(exprDump("[1, 2][0]") == "(index (array 1 2) 0)");
  CHECK(exprDump("-x[0]") == "(- (index x 0))");

  auto p = parse("def f() { return x[1:3, None, 0]; }");
  const ast::Expr &e = *p.funcs[0]->body[0]->values[0];
  REQUIRE(e.kind == ast::Expr::Index);
  CHECK(e.loc.col == 19);
  REQUIRE(e.indices.size() == 3);
  CHECK(e.indices[0].kind == ast::IndexItem::Slice);
  CHECK(e.indices[0].loc.col == 20);
  CHECK(e.indices[0].start->intValue == 1);
  CHECK(e.indices[0].stop->intValue == 3);
  CHECK(!e.indices[0].step);
  CHECK(e.indices[1].kind == ast::IndexItem::NewAxis);
  CHECK(e.indices[1].loc.col == 25);
  CHECK(e.indices[2].kind == ast::IndexItem::Index);
  CHECK(e.indices[2].index->intValue == 0);
}

TEST_CASE("parser: operator precedence and associativity", "[parser][expr]") {
  CHECK(exprDump("a + b * c") == "(+ a (* b c))");
  CHECK(exprDump("a * b + c") == "(+ (* a b) c)");
  CHECK(exprDump("a - b - c") == "(- (- a b) c)");
  CHECK(exprDump("a / b / c") == "(/ (/ a b) c)");
  CHECK(exprDump("a @ b * c") == "(* (@ a b) c)");
  CHECK(exprDump("a + b @ c") == "(+ a (@ b c))");
  CHECK(exprDump("a % b @ c") == "(@ (% a b) c)");
  CHECK(exprDump("a // b * c") == "(* (// a b) c)");
  CHECK(exprDump("a + b // c % d") == "(+ a (% (// b c) d))");
  CHECK(exprDump("-a // b") == "(// (- a) b)");
  CHECK(exprDump("-a * b") == "(* (- a) b)");
  CHECK(exprDump("- - a") == "(- (- a))");
  CHECK(exprDump("!a && b") == "(&& (! a) b)");
  CHECK(exprDump("a || b && c") == "(|| a (&& b c))");
  CHECK(exprDump("a && b || c") == "(|| (&& a b) c)");
  CHECK(exprDump("a || b || c") == "(|| (|| a b) c)");
  CHECK(exprDump("a < b && c >= d") == "(&& (< a b) (>= c d))");
  CHECK(exprDump("a + 1 == b * 2") == "(== (+ a 1) (* b 2))");
  CHECK(exprDump("a != b") == "(!= a b)");
  CHECK(exprDump("a <= b") == "(<= a b)");
  CHECK(exprDump("a > b") == "(> a b)");
  CHECK(exprDump("(a < b) == c") == "(== (< a b) c)");
  CHECK(exprDump("(a + b) * c") == "(* (+ a b) c)");
  CHECK(exprDump("a - -b") == "(- a (- b))");
  CHECK(exprDump("!(a == b)") == "(! (== a b))");
}

TEST_CASE("parser: expression node locations", "[parser][expr]") {
  //                          col: 1234567890123456789012345678901234567890
  auto p = parse("def f() { return -a + g(b, k=1) * [c, (d, e)]; }");
  const ast::Expr &add = *p.funcs[0]->body[0]->values[0];
  CHECK(add.kind == ast::Expr::Binary);
  CHECK(add.op == "+");
  CHECK(add.loc.col == 21);
  const ast::Expr &neg = *add.items[0];
  CHECK(neg.kind == ast::Expr::Unary);
  CHECK(neg.loc.col == 18);
  CHECK(neg.items[0]->loc.col == 19);
  const ast::Expr &mul = *add.items[1];
  CHECK(mul.loc.col == 33);
  const ast::Expr &call = *mul.items[0];
  CHECK(call.kind == ast::Expr::Call);
  CHECK(call.name == "g");
  CHECK(call.loc.col == 23);
  REQUIRE(call.kwargs.size() == 1);
  CHECK(call.kwargs[0].name == "k");
  CHECK(call.kwargs[0].loc.col == 28);
  CHECK(call.kwargs[0].value->intValue == 1);
  const ast::Expr &arr = *mul.items[1];
  CHECK(arr.kind == ast::Expr::ArrayLit);
  CHECK(arr.loc.col == 35);
  const ast::Expr &tup = *arr.items[1];
  CHECK(tup.kind == ast::Expr::TupleLit);
  CHECK(tup.loc.col == 39);

  auto q = parse("def f() {\n  return nn.relu(x) + nn.b;\n}");
  const ast::Expr &sum = *q.funcs[0]->body[0]->values[0];
  CHECK(sum.items[0]->kind == ast::Expr::Call);
  CHECK(sum.items[0]->module == "nn");
  CHECK(sum.items[0]->name == "relu");
  CHECK(sum.items[0]->loc.line == 2);
  CHECK(sum.items[0]->loc.col == 10);
  CHECK(sum.items[1]->kind == ast::Expr::Name);
  CHECK(sum.items[1]->module == "nn");
  CHECK(sum.items[1]->name == "b");
}

TEST_CASE("parser: records and fields", "[parser][expr]") {
  auto p = parse("def f() {\n  return {w: a, b: (c, d),}, f(x).w, p.l[0].b;\n}");
  const auto &v = p.funcs[0]->body[0]->values;
  REQUIRE(v.size() == 3);
  const ast::Expr &rec = *v[0];
  CHECK(rec.kind == ast::Expr::RecordLit);
  CHECK(rec.loc.col == 10);
  REQUIRE(rec.kwargs.size() == 2);  // as written; sema sorts the fields
  CHECK(rec.kwargs[0].name == "w");
  CHECK(rec.kwargs[0].loc.col == 11);
  CHECK(rec.kwargs[1].name == "b");
  CHECK(rec.kwargs[1].value->kind == ast::Expr::TupleLit);
  const ast::Expr &callField = *v[1];
  CHECK(callField.kind == ast::Expr::Field);
  CHECK(callField.name == "w");
  CHECK(callField.loc.col == 35);  // at the field's name
  CHECK(callField.items[0]->kind == ast::Expr::Call);
  const ast::Expr &deep = *v[2];  // p.l is a qualified name, [0] an index, .b a field
  CHECK(deep.kind == ast::Expr::Field);
  CHECK(deep.name == "b");
  CHECK(deep.items[0]->kind == ast::Expr::Index);
  CHECK(deep.items[0]->items[0]->kind == ast::Expr::Name);
  CHECK(deep.items[0]->items[0]->module == "p");
  CHECK(deep.items[0]->items[0]->name == "l");
}

TEST_CASE("parser: literal values", "[parser][expr]") {
  auto p = parse("def f() { return 7, 2.5, true, \"ax\", None; }");
  const auto &v = p.funcs[0]->body[0]->values;
  REQUIRE(v.size() == 5);
  CHECK(v[0]->kind == ast::Expr::IntLit);
  CHECK(v[0]->intValue == 7);
  CHECK(v[1]->kind == ast::Expr::FloatLit);
  CHECK(v[1]->floatValue == 2.5);
  CHECK(v[2]->kind == ast::Expr::BoolLit);
  CHECK(v[2]->boolValue);
  CHECK(v[3]->kind == ast::Expr::StringLit);
  CHECK(v[3]->name == "ax");
  CHECK(v[4]->kind == ast::Expr::NoneLit);
  CHECK(v[4]->loc.col == 38);
}

TEST_CASE("parser: the language reference example", "[parser]") {
  auto p = parse(R"(
import nn;                                  # loads nn.smp from -I paths, then stdlib/

mesh xy = <["x"=2, "y"=4]>;                 # a mesh: named axes with sizes (Shardy notation)

def scale(a: f32[4], s: f32[]) -> f32[4] {  # a plain function: per-device code
  return a * s;
}

@shmap(mesh=xy, in_specs=(P("x", None), P()), out_specs=P())
def loss(xb: f32[2,3], w: f32[3]) -> f32[] {   # parameter/result types are PER-DEVICE blocks
  let local = sum(xb @ w);
  return psum(local, ("x", "y"));
}

def relu(x) { return maximum(x, 0.0); }
def mean_over(v, ax) { return pmean(v, ax); }

def main() {
  let x = iota(f32[4,3]);                   # global array: 4 = 2 (x) * 2 (block)
  let w = ones(f32[3]);
  print("loss", loss(x, w));
  let y = concatenate([x, x], axis=0);
  let z = transpose(reshape(x, [3, 4]), [1, 0]);
  let m = select(x > 0.0, x, -x);
}
)");
  CHECK(p.funcs.size() == 5);
  CHECK(p.funcs[1]->shmap->inSpecs.size() == 2);
}

// ================================================================ parser: errors

TEST_CASE("parser errors: top level, imports, meshes", "[parser][errors]") {
  expectError("let x = 1;", DiagId::ExpectedToken, 1, 1);
  expectError("import;", DiagId::ExpectedToken, 1, 7);
  expectError("import nn", DiagId::ExpectedToken, 1, 10);
  expectError("import def;", DiagId::ExpectedToken, 1, 8);
  expectError("mesh = <[\"x\"=2]>;", DiagId::ExpectedToken, 1, 6);
  expectError("mesh m <[\"x\"=2]>;", DiagId::ExpectedToken, 1, 8);
  expectError("mesh m = [\"x\"=2];", DiagId::BadMesh, 1, 10);
  expectError("mesh m = <\"x\"=2]>;", DiagId::BadMesh, 1, 11);
  expectError("mesh m = <[]>;", DiagId::BadMesh, 1, 12);
  expectError("mesh m = <[x=2]>;", DiagId::BadMesh, 1, 12);
  expectError("mesh m = <[\"x\" 2]>;", DiagId::BadMesh, 1, 16);
  expectError("mesh m = <[\"x\"=]>;", DiagId::BadMesh, 1, 16);
  expectError("mesh m = <[\"x\"=2.0]>;", DiagId::BadMesh, 1, 16);
  expectError("mesh m = <[\"x\"=0]>;", DiagId::BadMesh, 1, 16);
  expectError("mesh m = <[\"x\"=-1]>;", DiagId::BadMesh, 1, 16);
  expectError("mesh m = <[\"x\"=2 \"y\"=2]>;", DiagId::BadMesh, 1, 18);
  expectError("mesh m = <[\"x\"=2];", DiagId::BadMesh, 1, 18);
  expectError("mesh m = <[\"x\"=2]>", DiagId::ExpectedToken, 1, 19);
}

TEST_CASE("parser errors: functions and types", "[parser][errors]") {
  expectError("def (x) {}", DiagId::ExpectedToken, 1, 5);
  expectError("def f x {}", DiagId::ExpectedToken, 1, 7);
  expectError("def f(x {}", DiagId::ExpectedToken, 1, 9);
  expectError("def f(x,) {}", DiagId::ExpectedToken, 1, 9);
  expectError("def f(let) {}", DiagId::ExpectedToken, 1, 7);
  expectError("def f(x: y) {}", DiagId::ExpectedType, 1, 10);
  expectError("def f(x: f32) {}", DiagId::ExpectedType, 1, 13);
  expectError("def f(x: f32[4,]) {}", DiagId::ExpectedType, 1, 16);
  expectError("def f(x: f32[4 4]) {}", DiagId::ExpectedType, 1, 16);
  expectError("def f() -> {}", DiagId::ExpectedType, 1, 12);
  expectError("def f() -> (f32[4] f32[4]) {}", DiagId::ExpectedToken, 1, 20);
  expectError("def f() -> f32[4]", DiagId::ExpectedToken, 1, 18);
  expectError("def f() { let x = 1;", DiagId::ExpectedToken, 1, 21);
  expectError("def f()\n{\n", DiagId::ExpectedToken, 3, 1);
  expectError("def f() let", DiagId::ExpectedToken, 1, 9);
  expectError("def f() {} }", DiagId::ExpectedToken, 1, 12);
}

TEST_CASE("parser errors: jit attributes and shardings", "[parser][errors]") {
  const std::string def = " def f(x) {}";
  expectError("@jit def f() {}", DiagId::ExpectedToken, 1, 6);
  expectError("@jit(in_shardings=P())" + def, DiagId::BadJitAttr, 1, 22);
  expectError("@jit(mesh=m, foo=P())" + def, DiagId::BadJitAttr, 1, 14);
  expectError("@jit(mesh=m, mesh=m)" + def, DiagId::BadJitAttr, 1, 14);
  expectError("@jit(mesh=m in_shardings=P())" + def, DiagId::BadJitAttr, 1, 13);
  expectError("@jit(mesh=m, in_shardings=Q())" + def, DiagId::BadSharding, 1, 27);
  expectError("@jit(mesh=m, in_shardings=sharding<m, []>)" + def, DiagId::BadSharding, 1, 36);
  expectError("@jit(mesh=m, in_shardings=sharding<@m [{}]>)" + def, DiagId::BadSharding, 1, 39);
  expectError("@jit(mesh=m, in_shardings=sharding<@m, {}>)" + def, DiagId::BadSharding, 1, 40);
  expectError("@jit(mesh=m, in_shardings=sharding<@m, [\"x\"]>)" + def, DiagId::BadSharding, 1, 41);
  expectError("@jit(mesh=m, in_shardings=sharding<@m, [{\"x\"}pq]>)" + def, DiagId::BadSharding, 1, 46);
  expectError("@jit(mesh=m, in_shardings=sharding<@m, [{\"x\":(2}]>)" + def, DiagId::BadSharding, 1, 48);
  expectError("@jit(mesh=m, in_shardings=sharding<@m, [{}], repl={}>)" + def, DiagId::BadSharding, 1, 46);
  expectError("@jit(mesh=m, in_shardings=sharding<@m, [{}], replicated={3}>)" + def, DiagId::BadSharding, 1, 58);
  expectError("@jit(mesh=m, in_shardings=sharding<@m, [{}]" + def, DiagId::BadSharding, 1, 45);
}

TEST_CASE("parser errors: shmap attributes and specs", "[parser][errors]") {
  const std::string def = " def f(x) {}";
  expectError("@pmap def f() {}", DiagId::BadShmapAttr, 1, 2);
  expectError("@shmap mesh=m def f() {}", DiagId::ExpectedToken, 1, 8);
  expectError("@shmap(mesh=m, in_specs=P(), out_specs=P(), foo=1)" + def, DiagId::BadShmapAttr, 1, 45);
  expectError("@shmap(in_specs=P(), out_specs=P())" + def, DiagId::BadShmapAttr, 1, 35);
  expectError("@shmap(mesh=m, out_specs=P())" + def, DiagId::BadShmapAttr, 1, 29);
  expectError("@shmap(mesh=m, in_specs=P())" + def, DiagId::BadShmapAttr, 1, 28);
  expectError("@shmap(mesh=m, mesh=m, in_specs=P(), out_specs=P())" + def, DiagId::BadShmapAttr, 1, 16);
  expectError("@shmap()" + def, DiagId::BadShmapAttr, 1, 8);
  expectError("@shmap(1)" + def, DiagId::BadShmapAttr, 1, 8);
  expectError("@shmap(mesh m)" + def, DiagId::ExpectedToken, 1, 13);
  expectError("@shmap(mesh=\"m\")" + def, DiagId::ExpectedToken, 1, 13);
  expectError("@shmap(mesh=m in_specs=P())" + def, DiagId::BadShmapAttr, 1, 15);
  expectError("@shmap(mesh=m, in_specs=P(), out_specs=P(), check_vma=1)" + def,
              DiagId::BadShmapAttr, 1, 55);
  expectError("@shmap(mesh=m, in_specs=P(), out_specs=P(), auto_pbroadcast=no)" + def,
              DiagId::BadShmapAttr, 1, 61);
  expectError("@shmap(mesh=m, in_specs=P(), out_specs=P()) let" , DiagId::ExpectedToken, 1, 45);
  expectError("@shmap(mesh=m, in_specs=P(), out_specs=P())", DiagId::ExpectedToken, 1, 44);
  // malformed specs
  expectError("@shmap(mesh=m, in_specs=Q(), out_specs=P())" + def, DiagId::BadSpec, 1, 25);
  expectError("@shmap(mesh=m, in_specs=\"x\", out_specs=P())" + def, DiagId::BadSpec, 1, 25);
  expectError("@shmap(mesh=m, in_specs=P, out_specs=P())" + def, DiagId::BadSpec, 1, 26);
  expectError("@shmap(mesh=m, in_specs=P(x), out_specs=P())" + def, DiagId::BadSpec, 1, 27);
  expectError("@shmap(mesh=m, in_specs=P(1), out_specs=P())" + def, DiagId::BadSpec, 1, 27);
  expectError("@shmap(mesh=m, in_specs=P(\"x\" \"y\"), out_specs=P())" + def, DiagId::BadSpec, 1, 31);
  expectError("@shmap(mesh=m, in_specs=P((\"x\", None)), out_specs=P())" + def, DiagId::BadSpec, 1, 33);
  expectError("@shmap(mesh=m, in_specs=P(\"x\",), out_specs=P())" + def, DiagId::BadSpec, 1, 31);
  expectError("@shmap(mesh=m, in_specs=(P() P()), out_specs=P())" + def, DiagId::BadSpec, 1, 30);
  expectError("@shmap(mesh=m, in_specs=(P(), x), out_specs=P())" + def, DiagId::BadSpec, 1, 31);
  expectError("@shmap(mesh=m, in_specs=P(), out_specs=(P(\"x\")" + def, DiagId::BadSpec, 1, 48);
}

TEST_CASE("parser errors: statements", "[parser][errors]") {
  expectError("def f() { let = 1; }", DiagId::ExpectedToken, 1, 15);
  expectError("def f() { let a 1; }", DiagId::ExpectedToken, 1, 17);
  expectError("def f() { let a = 1 }", DiagId::ExpectedToken, 1, 21);
  expectError("def f() { let a, = 1; }", DiagId::ExpectedToken, 1, 18);
  expectError("def f() { let a = ; }", DiagId::ExpectedExpr, 1, 19);
  expectError("def f() { a = 1 }", DiagId::ExpectedToken, 1, 17);
  expectError("def f() { a, b + 1 = g(); }", DiagId::BadStatement, 1, 11);  // only names are assigned
  expectError("def f() { x[0] = 1; }", DiagId::BadStatement, 1, 16);
  expectError("def f() { x + 1; }", DiagId::BadStatement, 1, 11);
  expectError("def f() { x; }", DiagId::BadStatement, 1, 11);
  expectError("def f() { g() }", DiagId::ExpectedToken, 1, 15);
  expectError("def f() { print(); }", DiagId::ExpectedExpr, 1, 17);
  expectError("def f() { print(\"l\", a, b); }", DiagId::ExpectedToken, 1, 23);
  expectError("def f() { print(a) }", DiagId::ExpectedToken, 1, 20);
  expectError("def f() { return a }", DiagId::ExpectedToken, 1, 20);
  expectError("def f() { return a, ; }", DiagId::ExpectedExpr, 1, 21);
  expectError("def f() { for in range(3) {} }", DiagId::ExpectedToken, 1, 15);
  expectError("def f() { for i range(3) {} }", DiagId::ExpectedToken, 1, 17);
  expectError("def f() { for i in xrange(3) {} }", DiagId::ExpectedToken, 1, 20);
  expectError("def f() { for i in range 3 {} }", DiagId::ExpectedToken, 1, 26);
  expectError("def f() { for i in range(1, 2, 3) {} }", DiagId::ExpectedToken, 1, 30);
  expectError("def f() { for i in range(3) }", DiagId::ExpectedToken, 1, 29);
  expectError("def f() { if {} }", DiagId::ExpectedExpr, 1, 14);
  expectError("def f() { if a b }", DiagId::ExpectedToken, 1, 16);
  expectError("def f() { if a {} else }", DiagId::ExpectedToken, 1, 24);
  expectError("def f() { if a {} else b }", DiagId::ExpectedToken, 1, 24);
  expectError("def f() { if a { let x = 1; }", DiagId::ExpectedToken, 1, 30);
  expectError("def f() { else {} }", DiagId::ExpectedExpr, 1, 11);
}

TEST_CASE("parser errors: expressions", "[parser][errors]") {
  expectError("def f() { return 1 +; }", DiagId::ExpectedExpr, 1, 21);
  expectError("def f() { return (1; }", DiagId::ExpectedToken, 1, 20);
  expectError("def f() { return (1, 2; }", DiagId::ExpectedToken, 1, 23);
  expectError("def f() { return (,); }", DiagId::ExpectedExpr, 1, 19);
  expectError("def f() { return [1, 2; }", DiagId::ExpectedToken, 1, 23);
  expectError("def f() { return [1 2]; }", DiagId::ExpectedToken, 1, 21);
  expectError("def f() { return [,]; }", DiagId::ExpectedExpr, 1, 19);
  expectError("def f() { return x[]; }", DiagId::ExpectedExpr, 1, 20);
  expectError("def f() { return x[0; }", DiagId::ExpectedToken, 1, 21);
  expectError("def f() { return x[1:2:3:4]; }", DiagId::ExpectedToken, 1, 25);
  expectError("def f() { return x[,]; }", DiagId::ExpectedExpr, 1, 20);
  expectError("def f() { return f(a; }", DiagId::ExpectedToken, 1, 21);
  expectError("def f() { return f(a,); }", DiagId::ExpectedExpr, 1, 22);
  expectError("def f() { return f(axis=); }", DiagId::ExpectedExpr, 1, 25);
  expectError("def f() { return sum(axis=0, x); }", DiagId::ExpectedToken, 1, 30);
  expectError("def f() { return nn.; }", DiagId::ExpectedToken, 1, 21);
  expectError("def f() { return nn.1; }", DiagId::ExpectedToken, 1, 21);
  expectError("def f() { return a < b < c; }", DiagId::ExpectedToken, 1, 24);
  expectError("def f() { return a == b != c; }", DiagId::ExpectedToken, 1, 25);
  expectError("def f() { return f32[4]; }", DiagId::ExpectedExpr, 1, 18);
  expectError("def f() { return zeros(f32[4) ; }", DiagId::ExpectedType, 1, 29);
  expectError("def f() { return f(x)(y; }", DiagId::ExpectedToken, 1, 24);
  expectError("def f() { return (f)(y); }", DiagId::ExpectedToken, 1, 21);
  expectError("def f() { return -; }", DiagId::ExpectedExpr, 1, 19);
  expectError("def f() { return a +* b; }", DiagId::ExpectedExpr, 1, 21);
  expectError("def f() { return a.b.; }", DiagId::ExpectedToken, 1, 22);  // a field's name
  expectError("def f() { return {w = 1}; }", DiagId::ExpectedExpr, 1, 18);  // record fields are w: v
  expectError("def f() { return def; }", DiagId::ExpectedExpr, 1, 18);
  expectError("def f() { return ]; }", DiagId::ExpectedExpr, 1, 18);
}

TEST_CASE("parser errors: messages say expected and found, with a hint", "[parser][errors]") {
  Failure f = failure("def f() {\n  let a = 1\n  return a;\n}");
  CHECK(f.text ==
        "t.smp:3:3: error: expected ';' after the 'let' statement, found keyword 'return' "
        "[expected-token]\n"
        "      return a;\n"
        "      ^\n"
        "  help: add ';'\n");
  Failure g = failure("def f(x: f32[4]) -> f32[4] { return x + ; }");
  CHECK(g.text.find("expected an expression, found ';'") != std::string::npos);
  Failure h = failure("def f() { let def = 1; }");
  CHECK(h.text.find("found keyword 'def'") != std::string::npos);
  CHECK(h.text.find("is a keyword") != std::string::npos);
  Failure i = failure("def f() { return 1 2; }");
  CHECK(i.text.find("found number '2'") != std::string::npos);
  Failure j = failure("def f() {");
  CHECK(j.text.find("found end of file") != std::string::npos);
}

// ================================================================ robustness

TEST_CASE("parser: nesting depth is capped with a diagnostic", "[parser][robust]") {
  auto deep = [](const std::string &open, const std::string &mid, const std::string &close,
                 int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += open;
    s += mid;
    for (int i = 0; i < n; ++i) s += close;
    return s;
  };
  // Moderate nesting is fine.
  parse("def f() { return " + deep("(", "x", ")", 100) + "; }");
  parse("def f() { return " + deep("-", "x", "", 100) + "; }");
  parse("def f() { " + deep("if a { ", "", "} ", 60) + "}");
  parse("def f() { return " + deep("[", "1", "]", 100) + "; }");

  CHECK(failure("def f() { return " + deep("(", "x", ")", 100000) + "; }").name ==
        "nesting-too-deep");
  CHECK(failure("def f() { return " + deep("-", "x", "", 100000) + "; }").name ==
        "nesting-too-deep");
  CHECK(failure("def f() { return " + deep("!", "x", "", 100000) + "; }").name ==
        "nesting-too-deep");
  CHECK(failure("def f() { return " + deep("[", "1", "]", 100000) + "; }").name ==
        "nesting-too-deep");
  CHECK(failure("def f() { return " + deep("f(", "1", ")", 100000) + "; }").name ==
        "nesting-too-deep");
  CHECK(failure("def f() { " + deep("if a { ", "", "} ", 100000) + "}").name ==
        "nesting-too-deep");
  CHECK(failure("def f() { " + deep("for i in range(2) { ", "", "} ", 100000) + "}").name ==
        "nesting-too-deep");
  CHECK(failure("def f() { if a {} " + deep("else if a {} ", "", "", 100000) + "}").name ==
        "nesting-too-deep");
  // Long flat operator chains build deep trees too.
  CHECK(failure("def f() { return x" + deep("+x", "", "", 100000) + "; }").name ==
        "nesting-too-deep");
  CHECK(failure("def f() { return x" + deep("[0]", "", "", 100000) + "; }").name ==
        "nesting-too-deep");
  CHECK(failure("def f() { return x" + deep("||x", "", "", 100000) + "; }").name ==
        "nesting-too-deep");
  // Unclosed nesting at EOF just ends in an error.
  CHECK(failure("def f() { return " + std::string(100000, '(')).failed);
  // Long flat lists are not nesting.
  std::string elems = "0";
  for (int i = 0; i < 5000; ++i) elems += ", 0";
  parse("def f() { return [" + elems + "]; }");
  std::string stmts;
  for (int i = 0; i < 5000; ++i) stmts += "a = a + 1;\n";
  parse("def f() { " + stmts + "}");
}

namespace {

// Parses a possibly-malformed source: success, or CompileError with exactly one report.
void mustNotCrash(const std::string &src) {
  SourceManager sm;
  int id = sm.addBuffer("t.smp", src);
  std::ostringstream err;
  Diagnostics diags(sm, err);
  try {
    ast::Program p = parseProgram(id, sm, diags);
    (void)ast::printAST(p);
    if (diags.errorCount() != 0) FAIL_CHECK("errors reported without failing:\n" << src);
  } catch (CompileError &) {
    if (diags.errorCount() != 1 || err.str().find("help: ") == std::string::npos)
      FAIL_CHECK("bad report for:\n" << src << "\n" << err.str());
  } catch (...) {
    FAIL_CHECK("unexpected exception for:\n" << src);
  }
}

} // namespace

TEST_CASE("parser: mutation fuzz never crashes", "[parser][robust]") {
  const std::string base = kExample;
  const std::string junk = "()[]{}<>\"#@;,:.=-!&|x1P\\\n\x01\xff";
  for (size_t i = 0; i <= base.size(); ++i) {
    mustNotCrash(base.substr(0, i));                                  // truncate
    if (i < base.size()) mustNotCrash(base.substr(0, i) + base.substr(i + 1));  // delete
    for (char c : junk) mustNotCrash(base.substr(0, i) + c + base.substr(i));  // insert
    if (i < base.size())                                               // duplicate a char
      mustNotCrash(base.substr(0, i + 1) + base.substr(i));
  }
}

TEST_CASE("parser: random token soup never crashes", "[parser][robust]") {
  const char *pieces[] = {"def", "f", "(", ")", "{", "}", "[", "]", "let", "x", "=", ";",
                          ",", ":", "f32", "[4]", "@shmap", "mesh", "P", "None", "\"x\"",
                          "1", "2.5", "+", "*", "@", "-", "!", "<", ">", "==", "if", "else",
                          "for", "in", "range", "return", "print", ".", "->", "import",
                          "true", "in_specs", "out_specs", "<[", "]>", "&&", "||"};
  const size_t n = sizeof pieces / sizeof pieces[0];
  uint64_t state = 0x9e3779b97f4a7c15ull;  // fixed seed: deterministic
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int round = 0; round < 3000; ++round) {
    std::string src;
    int len = (int)(next() % 40);
    for (int k = 0; k < len; ++k) {
      src += pieces[next() % n];
      src += ' ';
    }
    mustNotCrash(src);
  }
}
