// The rules layer on its own, built without the primitives' definitions and without LLVM (it
// depends on the IR alone): the test installs a table of its own, whose entries use the shape
// rules the layer shares (ShapeRules.h: the element-wise, gather and scatter rules that many
// primitives' definitions name), and checks what the layer does with any table: makeEqn's
// typing and refusals, shapeProblem and verifyModule, resultVariance, the communication
// questions, and rulesOf before any table is installed. Each primitive's own rule is tested
// with its definition (test_shape_rules.cpp).
#include "rules/Rules.h"
#include "rules/ShapeRules.h"
#include "child.h"

#include <catch2/catch.hpp>
#include <csignal>

using namespace shmapc;
using namespace shmapc::ir;
using rules::Communication;
using rules::Rules;
using rules::VarianceRule;

namespace {

using Ints = std::vector<int64_t>;

bool refuseAll(rules::ShapeCtx &c) { return c.fail("not in this test's table"); }
bool scatterDimension(rules::ShapeCtx &c) { return rules::scatterShape(c, "scatter_dimension"); }

rules::CollectiveBytes noBytes(const Eqn &, int64_t, int64_t) { return {}; }

// Rules with a shape, a variance and a communication only: what this layer reads.
constexpr Rules shaped(bool (*shape)(rules::ShapeCtx &), VarianceRule v,
                       Communication comm = rules::communicatesNothing) {
  return Rules{.shape = shape, .variance = v, .jvp = nullptr, .transpose = nullptr, .lower = nullptr,
               .scalar = nullptr, .sharding = nullptr, .comm = comm};
}

const Rules kRefused = shaped(refuseAll, VarianceRule::Effect);
const Rules kAdd = shaped(rules::numericOperands, VarianceRule::SameAsOperands);
const Rules kExp = shaped(rules::floatOperands, VarianceRule::SameAsOperands);
const Rules kLt = shaped(rules::compareNumbers, VarianceRule::SameAsOperands);
const Communication kAllReduce{Communication::Collective, rules::CollectiveKind::Psum, noBytes, true};
const Rules kPsum2 = shaped([](rules::ShapeCtx &c) { return rules::collectiveSameShape(c, rules::isNumeric, "numeric"); },
                            VarianceRule::VaryingToInvariant, kAllReduce);
const Rules kPbroadcast = shaped([](rules::ShapeCtx &c) { return rules::collectiveSameShape(c, rules::anyDType, "any"); },
                                 VarianceRule::InvariantToVarying);
const Rules kAllGather = shaped(rules::gatherShape, VarianceRule::VaryingToVarying,
                                {Communication::Collective, rules::CollectiveKind::AllGather, noBytes, true});
const Rules kPsumScatter = shaped(scatterDimension, VarianceRule::VaryingToVarying,
                                  {Communication::Collective, rules::CollectiveKind::PsumScatter, noBytes, false});
const Rules kCond = shaped(refuseAll, VarianceRule::Cond);

const rules::RulesTable &table() {
  static const rules::RulesTable t = [] {
    rules::RulesTable t;
    t.fill(&kRefused);
    t[(size_t)Prim::Add] = &kAdd;
    t[(size_t)Prim::Exp] = &kExp;
    t[(size_t)Prim::Lt] = &kLt;
    t[(size_t)Prim::Psum2] = &kPsum2;
    t[(size_t)Prim::Pbroadcast] = &kPbroadcast;
    t[(size_t)Prim::AllGather] = &kAllGather;
    t[(size_t)Prim::PsumScatter] = &kPsumScatter;
    t[(size_t)Prim::Cond] = &kCond;
    return t;
  }();
  return t;
}

// A shmap body over the mesh m = <["i"=4, "j"=2]>.
struct Body {
  Module m;
  Func *f;
  Body() {
    rules::installRules(table());
    m.meshes.push_back(std::make_unique<Mesh>(Mesh{"m", {"i", "j"}, {4, 2}, {}}));
    f = m.newFunc("main");
    f->mesh = m.meshes[0].get();
    f->isShmapBody = true;
    m.main = f;
  }
  Value *param(Type t) {
    f->params.push_back(f->newValue(std::move(t)));
    return f->params.back();
  }
};

const AxisSet I = 1, J = 2;
Type f32(std::vector<int64_t> shape, AxisSet vary = 0) { return Type{DType::F32, std::move(shape), vary}; }

} // namespace

// (first in this file: Catch runs test cases in declaration order, and the others install a table)
TEST_CASE("rulesOf before the definitions installed a table is an internal error, not a null rule") {
  std::string err;
  CHECK(run_child(
            [] {
              std::signal(SIGABRT, SIG_DFL);  // the abort itself, not Catch's report of it
              (void)rules::rulesOf(Prim::Add);
            },
            &err) != 0);
  CHECK(err.find("no primitive rules installed") != std::string::npos);
}

TEST_CASE("makeEqn types results by the installed shape and variance rules") {
  Body b;
  Value *x = b.param(f32({3, 4}, I)), *y = b.param(f32({3, 4}, I)), *inv = b.param(f32({3, 4}));
  CHECK(rules::makeEqn(*b.f, Prim::Add, {x, y}, {}, {}).outs[0]->type == f32({3, 4}, I));
  CHECK(rules::makeEqn(*b.f, Prim::Lt, {x, y}, {}, {}).outs[0]->type == Type{DType::Bool, {3, 4}, I});
  CHECK(rules::makeEqn(*b.f, Prim::Psum2, {x}, {{"axes", Ints{0}}}, {}).outs[0]->type == f32({3, 4}));
  CHECK(rules::makeEqn(*b.f, Prim::Pbroadcast, {inv}, {{"axes", Ints{0, 1}}}, {}).outs[0]->type ==
        f32({3, 4}, I | J));
  // all_gather over i (4 devices): tiled multiplies the dimension, untiled inserts one
  CHECK(rules::makeEqn(*b.f, Prim::AllGather, {x}, {{"axes", Ints{0}}, {"axis", int64_t(1)}, {"tiled", int64_t(1)}},
                       {})
            .outs[0]->type == f32({3, 16}, I));
  CHECK(rules::makeEqn(*b.f, Prim::AllGather, {x}, {{"axes", Ints{0}}, {"axis", int64_t(0)}, {"tiled", int64_t(0)}},
                       {})
            .outs[0]->type == f32({4, 3, 4}, I));
  // psum_scatter over i and j (8 devices): tiled divides, untiled removes a dimension of 8
  Value *z = b.param(f32({16, 8}, I | J));
  CHECK(rules::makeEqn(*b.f, Prim::PsumScatter, {z},
                       {{"axes", Ints{0, 1}}, {"scatter_dimension", int64_t(0)}, {"tiled", int64_t(1)}}, {})
            .outs[0]->type == f32({2, 8}, I | J));
  CHECK(rules::makeEqn(*b.f, Prim::PsumScatter, {z},
                       {{"axes", Ints{0, 1}}, {"scatter_dimension", int64_t(1)}, {"tiled", int64_t(0)}}, {})
            .outs[0]->type == f32({16}, I | J));
}

TEST_CASE("makeEqn refuses what the rules refuse, naming the rule's reason") {
  Body b;
  Value *x = b.param(f32({3, 4}, I)), *inv = b.param(f32({3, 4}));
  Value *n = b.param(Type{DType::I32, {3, 4}, I});
  CHECK_THROWS_WITH(rules::makeEqn(*b.f, Prim::Exp, {n}, {}, {}),
                    Catch::Contains("built an ill-typed exp in @main: needs float operands"));
  CHECK_THROWS_WITH(rules::makeEqn(*b.f, Prim::Add, {x, inv}, {}, {}), Catch::Contains("vary over different axes"));
  CHECK_THROWS_WITH(rules::makeEqn(*b.f, Prim::Add, {x}, {}, {}), Catch::Contains("expects 2 operand(s), has 1"));
  CHECK_THROWS_WITH(rules::makeEqn(*b.f, Prim::Psum2, {x}, {{"axes", Ints{2}}}, {}),
                    Catch::Contains("mesh axis 2 is out of range"));
  CHECK_THROWS_WITH(rules::makeEqn(*b.f, Prim::PsumScatter, {x},
                                   {{"axes", Ints{0}}, {"scatter_dimension", int64_t(0)}, {"tiled", int64_t(1)}}, {}),
                    Catch::Contains("psum_scatter splits dimension 0 of f32[3,4] over 4 device(s); 3 is not divisible by 4"));
  CHECK_THROWS_WITH(rules::makeEqn(*b.f, Prim::Reshape, {x}, {}, {}), Catch::Contains("not in this test's table"));
  const Type wrong = f32({3, 4});
  CHECK_THROWS_WITH(rules::makeEqn(*b.f, Prim::Add, {x, x}, {}, {}, {.declared = &wrong}),
                    Catch::Contains("declared f32[3,4], but the rules give f32[3,4]{i}"));
  // a body before variance typing: the result's variance is the declared one, unchecked
  const Type untypedResult = f32({3, 4});
  CHECK(rules::makeEqn(*b.f, Prim::Add, {x, inv}, {}, {}, {.declared = &untypedResult, .untyped = true})
            .outs[0]->type == untypedResult);
}

TEST_CASE("a refusal a program can cause names its argument, diagnostic and hint (tryMakeEqn)") {
  Body b;
  Value *x = b.param(f32({3, 4}, I));
  Eqn made;
  rules::Refusal r;
  // tiled: 4 columns over the 8 devices of i and j
  CHECK_FALSE(rules::tryMakeEqn(*b.f, Prim::PsumScatter, {x},
                                {{"axes", Ints{0, 1}}, {"scatter_dimension", int64_t(1)}, {"tiled", int64_t(1)}}, {},
                                {}, made, r));
  CHECK(r.why == "psum_scatter splits dimension 1 of f32[3,4] over 8 device(s); 4 is not divisible by 8");
  REQUIRE(r.diag);
  CHECK(*r.diag == DiagId::NotDivisible);
  REQUIRE(r.param);
  CHECK(std::string(r.param) == "scatter_dimension");
  CHECK(r.operand == -1);
  CHECK(r.hint == "pad the array or scatter a different dimension");
  // untiled: the dimension must be the group size (4 over i)
  CHECK_FALSE(rules::tryMakeEqn(*b.f, Prim::PsumScatter, {x},
                                {{"axes", Ints{0}}, {"scatter_dimension", int64_t(0)}, {"tiled", int64_t(0)}}, {}, {},
                                made, r));
  REQUIRE(r.diag);
  CHECK(*r.diag == DiagId::ShapeMismatch);
  CHECK(r.why.find("needs dimension 0 of size 4 (the group size), but f32[3,4] has 3") != std::string::npos);
  // a refusal no program causes (sema passes only valid axes) carries no diagnostic
  CHECK_FALSE(rules::tryMakeEqn(*b.f, Prim::Psum2, {x}, {{"axes", Ints{5}}}, {}, {}, made, r));
  CHECK_FALSE(r.diag);
  CHECK(r.why.find("mesh axis 5 is out of range") != std::string::npos);
  // accepted: the equation, typed
  REQUIRE(rules::tryMakeEqn(*b.f, Prim::PsumScatter, {x},
                            {{"axes", Ints{0}}, {"scatter_dimension", int64_t(1)}, {"tiled", int64_t(1)}}, {}, {}, made,
                            r));
  CHECK(made.outs[0]->type == f32({3, 1}, I));
}

TEST_CASE("shapeProblem and verifyModule run the installed rule on every equation") {
  Body b;
  Value *x = b.param(f32({3, 4}, I));
  b.f->eqns.push_back(rules::makeEqn(*b.f, Prim::Add, {x, x}, {}, {}));
  CHECK(rules::shapeProblem(b.f->eqns[0], *b.f) == "");
  CHECK(rules::verifyModule(b.m).empty());
  // a result typed other than the rule says
  Eqn bad = b.f->eqns[0];
  bad.outs = {b.f->newValue(f32({4, 3}, I))};
  CHECK(rules::shapeProblem(bad, *b.f) == "result 0 is f32[4,3], but its shape rule gives f32[3,4]");
  b.f->eqns.push_back(bad);
  const std::vector<std::string> problems = rules::verifyModule(b.m);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("@main eqn 1 (add): result 0 is f32[4,3]") != std::string::npos);
}

TEST_CASE("resultVariance follows the variance rule kinds") {
  Body b;
  Value *x = b.param(f32({3}, I | J));
  AxisSet vary = 0;
  std::string why;
  CHECK(rules::resultVariance(rules::makeEqn(*b.f, Prim::Psum2, {x}, {{"axes", Ints{1}}}, {}), vary, why));
  CHECK(vary == I);
  CHECK(rules::resultVariance(rules::makeEqn(*b.f, Prim::Exp, {x}, {}, {}), vary, why));
  CHECK(vary == (I | J));
  Eqn cond{Prim::Cond, {x}, {}, {}, {}, {}};
  CHECK_FALSE(rules::resultVariance(cond, vary, why));
  CHECK(why.find("depends on more than its operands") != std::string::npos);
}

TEST_CASE("communication questions are answered from the comm rules") {
  Body b;
  Value *x = b.param(f32({3}, I | J));
  b.f->eqns.push_back(rules::makeEqn(*b.f, Prim::Psum2, {x}, {{"axes", Ints{1}}}, {}));
  CHECK(rules::communicatesOver(b.f->eqns[0], J));
  CHECK_FALSE(rules::communicatesOver(b.f->eqns[0], I));  // a psum over j only
  CHECK(rules::communicatesOver(*b.f));
  Func local;
  local.eqns.push_back(rules::makeEqn(*b.f, Prim::Exp, {x}, {}, {}));
  CHECK_FALSE(rules::communicatesOver(local));  // exp: communicatesNothing
  // a cond whose predicate varies and whose branch communicates runs both branches everywhere
  Value *pred = b.param(Type{DType::Bool, {}, I});
  Func *talks = b.m.newFunc("talks");
  talks->eqns.push_back(rules::makeEqn(*b.f, Prim::Psum2, {x}, {{"axes", Ints{0}}}, {}));
  Func *quiet = b.m.newFunc("quiet");
  Eqn cond{Prim::Cond, {pred}, {}, {}, {talks, quiet}, {}};
  CHECK(rules::condRunsBothBranches(*b.f, cond));
  Value *samePred = b.param(Type{DType::Bool, {}, 0});
  Eqn uniform{Prim::Cond, {samePred}, {}, {}, {talks, quiet}, {}};
  CHECK_FALSE(rules::condRunsBothBranches(*b.f, uniform));  // every device takes one branch
  Eqn silent{Prim::Cond, {pred}, {}, {}, {quiet, quiet}, {}};
  CHECK_FALSE(rules::condRunsBothBranches(*b.f, silent));  // no branch communicates
  CHECK(std::string(rules::collectiveKindName(rules::CollectiveKind::PsumScatter)) == "psum_scatter");
  const rules::CollectiveBytes c = rules::everyDeviceReceives(12, 8);
  CHECK((c.receivedMin == 12 && c.receivedMax == 12 && c.received == 96 && c.sent == 0));
}
