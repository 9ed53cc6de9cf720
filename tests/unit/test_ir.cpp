// The IR printer (variance types as in JAX's note on efficient transposition), the structural
// verifier, and the static communication report (comm/Comm.h) with the communication rules it asks.
#include "comm/Comm.h"
#include "ir/IR.h"
#include "rules/Rules.h"

#include <catch2/catch.hpp>

using namespace shmapc::ir;
using namespace shmapc::comm;
using shmapc::rules::CollectiveKind;
using shmapc::rules::Communication;
using shmapc::rules::rulesOf;

namespace {

Type f32(std::vector<int64_t> shape, AxisSet vary = 0) { return Type{DType::F32, shape, vary}; }

// Example 1 of JAX's note on efficient transposition by hand: y = psum2(reduce_sum(x), i).
Module example1() {
  Module m;
  m.meshes.push_back(std::make_unique<Mesh>(Mesh{"m", {"i"}, {8}, {}}));
  Func *body = m.newFunc("f1");
  body->mesh = m.meshes[0].get();
  body->isShmapBody = true;
  Value *x = body->newValue(f32({3, 4}, 1), "x");
  body->params.push_back(x);
  Value *w = body->newValue(f32({}, 1), "w");
  Value *y = body->newValue(f32({}), "y");
  body->eqns.push_back(Eqn{Prim::ReduceSum, {x}, {w}, {{"axes", std::vector<int64_t>{0, 1}}}, {}, {}});
  body->eqns.push_back(Eqn{Prim::Psum2, {w}, {y}, {{"axes", std::vector<int64_t>{0}}}, {}, {}});
  body->results.push_back(y);

  Func *main = m.newFunc("main");
  Value *gx = main->newValue(f32({24, 4}), "gx");
  Value *gy = main->newValue(f32({}), "gy");
  main->eqns.push_back(Eqn{Prim::Constant, {}, {gx}, {{"value", std::vector<double>{1.0}}}, {}, {}});
  PartitionSpec in{{{0}}}, out{};
  main->eqns.push_back(Eqn{Prim::Shmap, {gx}, {gy},
                           {{"mesh", int64_t(0)},
                            {"in_specs", std::vector<PartitionSpec>{in}},
                            {"out_specs", std::vector<PartitionSpec>{out}}},
                           {body}, {}});
  m.main = main;
  return m;
}

} // namespace

TEST_CASE("printer shows variance types and collective params like JAX's transposition note") {
  Module m = example1();
  std::string text = printModule(m);
  CHECK(text.find("mesh m = <[\"i\"=8]>") != std::string::npos);
  CHECK(text.find("shmap_body @f1(x:f32[3,4]{i}) -> (f32[]) mesh m {") != std::string::npos);
  CHECK(text.find("  w:f32[]{i} = reduce_sum[axes=(0,1)] x\n") != std::string::npos);
  CHECK(text.find("  y:f32[] = psum2[axes=(i)] w\n") != std::string::npos);
  CHECK(text.find("gy:f32[] = shmap[@f1, in_specs=(P(\"i\")), mesh=m, out_specs=(P())] gx") !=
        std::string::npos);
}

TEST_CASE("verifier accepts a well-formed module") {
  Module m = example1();
  CHECK(verifyModule(m).empty());
}

TEST_CASE("verifier reports use before definition and arity errors") {
  Module m = example1();
  Func *body = m.funcs[0].get();
  std::swap(body->eqns[0], body->eqns[1]);  // psum2 now reads w before reduce_sum defines it
  auto problems = verifyModule(m);
  REQUIRE(!problems.empty());
  CHECK(problems[0].find("operand used before it is defined") != std::string::npos);

  Module m2 = example1();
  m2.funcs[0]->eqns[1].ins.push_back(m2.funcs[0]->params[0]);
  auto p2 = verifyModule(m2);
  REQUIRE(!p2.empty());
  CHECK(p2[0].find("expects 1 operands") != std::string::npos);
}

TEST_CASE("verifier rejects collectives without a mesh") {
  // Operand and result types are the primitives' shape rules' business (rules::verifyModule,
  // tests/unit/test_shape_rules.cpp); ir::verifyModule alone checks structure.
  Module m = example1();
  m.funcs[0]->mesh = nullptr;
  bool found = false;
  for (auto &p : verifyModule(m)) found |= p.find("collective in a function without a mesh") != std::string::npos;
  CHECK(found);
}

namespace {

// combine-reductions' form on a 2 x 2 mesh (i, j): a (varying over i and j) and b (over i
// only, lifted over j) summed over i in one psum2; b's piece cast back to invariant over j.
// `forge` changes one thing the verifier must refuse.
enum class Forge { None, CastOfParam, CastOfVaryingPiece, CastOverSummedAxis, ResultStillVaries };

Module joinedSum(Forge forge) {
  const AxisSet I = 1, J = 2;
  Module m;
  m.meshes.push_back(std::make_unique<Mesh>(Mesh{"m", {"i", "j"}, {2, 2}, {}}));
  Func *f = m.newFunc("f_vjp");
  f->mesh = m.meshes[0].get();
  f->isShmapBody = true;
  Value *a = f->newValue(f32({3}, I | J), "a");
  Value *b = f->newValue(f32({2}, I), "b");
  f->params = {a, b};
  auto ints = [](std::vector<int64_t> v) { return Attr(v); };
  Value *lifted = f->newValue(f32({2}, I | J));
  f->eqns.push_back(Eqn{Prim::Pbroadcast, {b}, {lifted}, {{"axes", ints({1})}}, {}, {}});
  Value *joined = f->newValue(f32({5}, I | J));
  f->eqns.push_back(Eqn{Prim::Concatenate, {a, lifted}, {joined}, {{"dimension", int64_t(0)}}, {}, {}});
  Value *sum = f->newValue(f32({5}, J));
  f->eqns.push_back(Eqn{Prim::Psum2, {joined}, {sum}, {{"axes", ints({0})}, {"combined", int64_t(2)}}, {}, {}});
  const bool varyingPiece = forge == Forge::CastOfVaryingPiece;
  Value *piece = f->newValue(f32({varyingPiece ? 3 : 2}, J));
  f->eqns.push_back(Eqn{Prim::Slice, {sum}, {piece},
                        {{"start", ints({varyingPiece ? 0 : 3})}, {"limit", ints({varyingPiece ? 3 : 5})},
                         {"strides", ints({1})}},
                        {}, {}});
  Value *operand = forge == Forge::CastOfParam ? a : piece;
  AxisSet outVary = forge == Forge::CastOfParam ? I : forge == Forge::ResultStillVaries ? J : 0;
  Value *cast = f->newValue(f32(operand->type.shape, outVary));
  std::vector<int64_t> castAxes = forge == Forge::CastOverSummedAxis ? std::vector<int64_t>{0, 1}
                                                                     : std::vector<int64_t>{1};
  if (forge == Forge::CastOverSummedAxis) {  // (a piece that varies over i: typed so, summed over it)
    piece->type.vary = I | J;
    sum->type.vary = I | J;
  }
  f->eqns.push_back(Eqn{Prim::InvariantCast, {operand}, {cast}, {{"axes", ints(castAxes)}}, {}, {}});
  f->results = {piece, cast};
  m.main = m.newFunc("main");
  return m;
}

bool refused(const Module &m, const std::string &why) {
  for (const std::string &p : verifyModule(m))
    if (p.find("invariant_cast") != std::string::npos && p.find(why) != std::string::npos) return true;
  return false;
}

} // namespace

TEST_CASE("verifier accepts invariant_cast only on a lifted piece of a joined psum2") {
  CHECK(verifyModule(joinedSum(Forge::None)).empty());
  // A user's varying parameter declared invariant: its devices' values may differ.
  CHECK(refused(joinedSum(Forge::CastOfParam), "must be a piece of a psum2"));
  // The piece of the operand that really varied over j (not lifted there).
  CHECK(refused(joinedSum(Forge::CastOfVaryingPiece), "must be a pbroadcast over its axes"));
  CHECK(refused(joinedSum(Forge::CastOverSummedAxis), "sums over its axes"));
  CHECK(refused(joinedSum(Forge::ResultStillVaries), "the result must vary over"));
}

TEST_CASE("every primitive has a name that maps back to it") {
  for (int i = 0; i < kNumPrims; ++i) {
    Prim p;
    REQUIRE(primFromName(primName((Prim)i), p));
    CHECK((int)p == i);
  }
}

namespace {

// Moves main's eqns (the shmap of example1) into `body`, and main's body becomes `wrapper`:
// a host loop or cond around them.
Func *hostBody(Module &m, const std::string &name) {
  Func *inner = m.newFunc(name);
  inner->isNested = true;
  inner->eqns = std::move(m.main->eqns);
  m.main->eqns.clear();
  return inner;
}

} // namespace

TEST_CASE("communication report: a psum2 in a shmap run by a host loop") {
  Module m = example1();
  Func *body = hostBody(m, "loop_body");
  Value *i = body->newValue(Type{DType::I32, {}, 0}, "i");
  body->params.push_back(i);
  m.main->eqns.push_back(Eqn{Prim::Loop, {}, {},
                             {{"lo", int64_t(0)}, {"hi", int64_t(3)}, {"num_consts", int64_t(0)}},
                             {body}, {}});
  CommReport r = analyzeCommunication(m);
  REQUIRE(r.shmaps.size() == 1);
  CHECK(r.shmaps[0].runs.lo == 3);
  CHECK(r.shmaps[0].runs.hi == 3);
  REQUIRE(r.shmaps[0].nodes.size() == 1);
  const CommOp &op = r.shmaps[0].nodes[0].op;
  // psum2 of one f32 over 8 devices: chunks floor((r+1)/8) - floor(r/8) are 0 but for the last
  // member's one element, which it sends to and receives from 7 others: 0..28 B per device,
  // 28 B per call over all devices, 3 runs: 84 B.
  CHECK(op.kind == CollectiveKind::Psum);
  CHECK(op.groupSize == 8);
  CHECK(op.sentMin == 0);
  CHECK(op.sentMax == 28);
  CHECK(op.perCall.bytesSent == 28);
  REQUIRE(r.total.exact());
  CHECK(r.total.lo.rows[(int)CollectiveKind::Psum].calls == 3);
  CHECK(r.total.lo.rows[(int)CollectiveKind::Psum].bytesSent == 84);
  CHECK(r.total.lo.rows[(int)CollectiveKind::Psum].bytesReceived == 84);
  CHECK(printStatsTable(r.total.lo) ==
        "== shmap collective stats ==\n"
        "collective      calls   bytes_sent   bytes_received\n"
        "psum                3           84               84\n");
}

TEST_CASE("communication report: a shmap under a host cond gives bounds") {
  Module m = example1();
  Func *taken = hostBody(m, "true_branch");
  Func *other = m.newFunc("false_branch");
  other->isNested = true;
  Value *pred = m.main->newValue(Type{DType::Bool, {}, 0}, "p");
  m.main->eqns.push_back(Eqn{Prim::Constant, {}, {pred}, {{"value", std::vector<double>{1}}}, {}, {}});
  m.main->eqns.push_back(Eqn{Prim::Cond, {pred}, {}, {}, {taken, other}, {}});
  CommReport r = analyzeCommunication(m);
  REQUIRE(r.shmaps.size() == 1);
  CHECK(r.shmaps[0].runs.lo == 0);
  CHECK(r.shmaps[0].runs.hi == 1);
  CHECK(!r.total.exact());
  CHECK(r.dataDependentConds.size() == 1);
  CHECK(r.total.lo.rows[(int)CollectiveKind::Psum].calls == 0);
  CHECK(r.total.hi.rows[(int)CollectiveKind::Psum].calls == 1);
  CHECK(r.total.hi.rows[(int)CollectiveKind::Psum].bytesReceived == 28);
  CHECK(printStatsTable(r.total.lo) == "== shmap collective stats ==\n"
                                       "collective      calls   bytes_sent   bytes_received\n"
                                       "(no collectives)\n");
}

TEST_CASE("communication rules: which primitives the runtime counts") {
  auto collective = [](Prim p, CollectiveKind k) {
    const Communication &c = rulesOf(p).comm;
    return c.what == Communication::Collective && c.kind == k && c.bytes != nullptr;
  };
  CHECK(collective(Prim::Psum, CollectiveKind::Psum));
  CHECK(collective(Prim::Psum2, CollectiveKind::Psum));
  CHECK(collective(Prim::AllGatherInvariant, CollectiveKind::AllGather));
  CHECK(collective(Prim::ReduceTo, CollectiveKind::Reduce));
  CHECK(collective(Prim::Pxor, CollectiveKind::Pxor));
  // Variance-typing steps and a device's own coordinate move nothing; pscatter is listed, free.
  CHECK(rulesOf(Prim::Pbroadcast).comm.what == Communication::Local);
  CHECK(rulesOf(Prim::InvariantCast).comm.what == Communication::Local);
  CHECK(rulesOf(Prim::AxisIndex).comm.what == Communication::Local);
  CHECK(rulesOf(Prim::Add).comm.what == Communication::Local);
  CHECK(rulesOf(Prim::Pscatter).comm.what == Communication::Free);
  // The runtime's collectives that accept a null buffer for an unused output block.
  for (Prim p : {Prim::Psum, Prim::Psum2, Prim::Pmax, Prim::Pmin, Prim::AllGather, Prim::AllGatherInvariant})
    CHECK(rulesOf(p).comm.collectiveOnlyOutput);
  for (Prim p : {Prim::Pprod, Prim::PsumScatter, Prim::AllToAll, Prim::Ppermute, Prim::Broadcast, Prim::Add})
    CHECK(!rulesOf(p).comm.collectiveOnlyOutput);
  CHECK(std::string(collectiveKindName(CollectiveKind::PsumScatter)) == "psum_scatter");
}
