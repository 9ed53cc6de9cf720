// Each primitive's shape rule (compiler/prims/, Rules::shape) as the verifier applies it
// (rules::verifyModule): hand-built equations, one family at a time, well-typed ones accepted
// and ill-typed ones reported with the primitive, the equation index and what is wrong. And
// autodiff's Builder::emit refusing an equation its rule does not give.
#include "passes/ad/AD.h"
#include "rules/Rules.h"

#include <catch2/catch.hpp>

using namespace shmapc;
using namespace shmapc::ir;

namespace {

Type ty(DType d, std::vector<int64_t> shape) { return Type{d, std::move(shape), 0}; }
Type f32(std::vector<int64_t> shape) { return ty(DType::F32, std::move(shape)); }
Type i32(std::vector<int64_t> shape) { return ty(DType::I32, std::move(shape)); }
Type boolT(std::vector<int64_t> shape) { return ty(DType::Bool, std::move(shape)); }
using Params = std::map<std::string, Attr>;
using Ints = std::vector<int64_t>;

// A module whose main holds the equation under test; collectives and shmap bodies use the
// mesh m = <["i"=4, "j"=2]>.
struct Fixture {
  Module m;
  const Mesh *mesh;
  Fixture() {
    m.meshes.push_back(std::make_unique<Mesh>(Mesh{"m", {"i", "j"}, {4, 2}, {}}));
    mesh = m.meshes[0].get();
  }

  // A function of params typed `params` returning constants typed `results`.
  Func *func(const std::string &name, const std::vector<Type> &params, const std::vector<Type> &results,
             const Mesh *withMesh = nullptr) {
    Func *f = m.newFunc(name);
    f->mesh = withMesh;
    for (const Type &t : params) f->params.push_back(f->newValue(t));
    for (const Type &t : results) {
      Value *v = f->newValue(t);
      f->eqns.push_back(Eqn{Prim::Constant, {}, {v}, {{"value", std::vector<double>{0}}}, {}, {}});
      f->results.push_back(v);
    }
    return f;
  }

  // The problems the verifier finds in main = one equation `p` over params typed `ins`.
  std::string check(Prim p, const std::vector<Type> &ins, const std::vector<Type> &outs, Params params = {},
                    bool inMesh = false, std::vector<Func *> bodies = {}) {
    Func *f = func("main", ins, {}, inMesh ? mesh : nullptr);
    Eqn e{p, {}, {}, std::move(params), std::move(bodies), {}};
    e.ins = f->params;
    for (const Type &t : outs) e.outs.push_back(f->newValue(t));
    f->eqns.push_back(std::move(e));
    m.main = f;
    std::string all;
    for (const std::string &problem : rules::verifyModule(m)) all += problem + "\n";
    return all;
  }
};

std::string check(Prim p, const std::vector<Type> &ins, const std::vector<Type> &outs, Params params = {},
                  bool inMesh = false) {
  return Fixture().check(p, ins, outs, std::move(params), inMesh);
}

// The report names the function, the equation and the primitive, then says what is wrong.
#define BAD(problems, prim, fragment)                                                        \
  do {                                                                                       \
    std::string p_ = (problems);                                                             \
    INFO(p_);                                                                                \
    CHECK(p_.find(std::string("@main eqn 0 (") + prim + "): ") != std::string::npos);       \
    CHECK(p_.find(fragment) != std::string::npos);                                           \
  } while (0)

std::vector<PartitionSpec> specs(std::vector<PartitionSpec> s) { return s; }

} // namespace

TEST_CASE("shape rules: element-wise, compare, select") {
  CHECK(check(Prim::Add, {f32({4}), f32({4})}, {f32({4})}) == "");
  BAD(check(Prim::Add, {f32({4}), f32({3})}, {f32({4})}), "add", "operand 1 is f32[3], operand 0 is f32[4]");
  BAD(check(Prim::Add, {f32({4}), f32({4})}, {f32({5})}), "add", "result 0 is f32[5], but its shape rule gives f32[4]");
  BAD(check(Prim::Mul, {f32({4}), i32({4})}, {f32({4})}), "mul", "operand 1 is i32[4]");
  BAD(check(Prim::Sub, {boolT({2}), boolT({2})}, {boolT({2})}), "sub", "needs numeric operands, got bool[2]");
  BAD(check(Prim::Exp, {i32({2})}, {i32({2})}), "exp", "needs float operands, got i32[2]");
  CHECK(check(Prim::Ceil, {ty(DType::F16, {2})}, {ty(DType::F16, {2})}) == "");
  BAD(check(Prim::Ceil, {i32({2})}, {i32({2})}), "ceil", "needs float operands, got i32[2]");
  BAD(check(Prim::And, {f32({2}), f32({2})}, {f32({2})}), "and", "needs bool operands");
  CHECK(check(Prim::Convert, {i32({2})}, {ty(DType::BF16, {2})}) == "");
  BAD(check(Prim::Convert, {i32({2})}, {f32({3})}), "convert", "shapes differ");

  CHECK(check(Prim::Lt, {f32({4}), f32({4})}, {boolT({4})}) == "");
  BAD(check(Prim::Lt, {f32({4}), f32({4})}, {f32({4})}), "lt", "result 0 is f32[4], but its shape rule gives bool[4]");
  BAD(check(Prim::Gt, {boolT({4}), boolT({4})}, {boolT({4})}), "gt", "needs numeric operands");
  CHECK(check(Prim::Eq, {boolT({4}), boolT({4})}, {boolT({4})}) == "");

  CHECK(check(Prim::Select, {boolT({3}), f32({3}), f32({3})}, {f32({3})}) == "");
  BAD(check(Prim::Select, {f32({3}), f32({3}), f32({3})}, {f32({3})}), "select", "predicate f32[3] is not bool");
  BAD(check(Prim::Select, {boolT({3}), f32({3}), i32({3})}, {f32({3})}), "select", "differ");
}

TEST_CASE("shape rules: structural (broadcast_in_dim, reshape, transpose, reduce, matmul)") {
  CHECK(check(Prim::BroadcastInDim, {f32({3})}, {f32({2, 3})}, {{"broadcast_dimensions", Ints{1}}}) == "");
  BAD(check(Prim::BroadcastInDim, {f32({3})}, {f32({2, 3})}, {{"broadcast_dimensions", Ints{0}}}),
      "broadcast_in_dim", "operand dimension 0 of f32[3] does not fit dimension 0 of f32[2,3]");
  BAD(check(Prim::BroadcastInDim, {f32({1, 3})}, {f32({3, 3})}, {{"broadcast_dimensions", Ints{1, 0}}}),
      "broadcast_in_dim", "not strictly increasing");
  BAD(check(Prim::BroadcastInDim, {f32({3})}, {f32({2, 3})}, {}), "broadcast_in_dim",
      "needs an int list param 'broadcast_dimensions'");

  CHECK(check(Prim::Reshape, {f32({6})}, {f32({2, 3})}) == "");
  BAD(check(Prim::Reshape, {f32({6})}, {f32({4})}), "reshape", "element counts differ");

  CHECK(check(Prim::Transpose, {f32({2, 3})}, {f32({3, 2})}, {{"permutation", Ints{1, 0}}}) == "");
  BAD(check(Prim::Transpose, {f32({2, 3})}, {f32({3, 2})}, {{"permutation", Ints{0, 0}}}), "transpose",
      "not a permutation");
  BAD(check(Prim::Transpose, {f32({2, 3})}, {f32({2, 3})}, {{"permutation", Ints{1, 0}}}), "transpose",
      "but its shape rule gives f32[3,2]");

  CHECK(check(Prim::ReduceSum, {f32({2, 3})}, {f32({2})}, {{"axes", Ints{1}}}) == "");
  BAD(check(Prim::ReduceSum, {f32({2, 3})}, {f32({2})}, {{"axes", Ints{2}}}), "reduce_sum", "axis 2 is out of range [0, 2)");
  BAD(check(Prim::ReduceMax, {f32({2, 3})}, {f32({})}, {{"axes", Ints{1, 0}}}), "reduce_max", "not sorted");

  CHECK(check(Prim::Matmul, {f32({5, 2, 3}), f32({5, 3, 4})}, {f32({5, 2, 4})}) == "");
  BAD(check(Prim::Matmul, {f32({2, 3}), f32({4, 5})}, {f32({2, 5})}), "matmul", "contracting dimensions differ");
  BAD(check(Prim::Matmul, {f32({2, 2, 3}), f32({3, 3, 4})}, {f32({2, 2, 4})}), "matmul", "batch dimensions differ");
  BAD(check(Prim::Matmul, {f32({3}), f32({3, 4})}, {f32({4})}), "matmul", "rank >= 2");
}

TEST_CASE("shape rules: slices and concatenate") {
  Params sl{{"start", Ints{2}}, {"limit", Ints{8}}, {"strides", Ints{3}}};
  CHECK(check(Prim::Slice, {f32({10})}, {f32({2})}, sl) == "");
  sl["limit"] = Ints{11};
  BAD(check(Prim::Slice, {f32({10})}, {f32({3})}, sl), "slice", "out of range");

  CHECK(check(Prim::DynamicSlice, {f32({8}), i32({})}, {f32({3})}, {{"sizes", Ints{3}}}) == "");
  BAD(check(Prim::DynamicSlice, {f32({8}), f32({})}, {f32({3})}, {{"sizes", Ints{3}}}), "dynamic_slice",
      "start index 0 must be an i32[] scalar, got f32[]");
  BAD(check(Prim::DynamicSlice, {f32({8}), i32({})}, {f32({9})}, {{"sizes", Ints{9}}}), "dynamic_slice",
      "slice size 9 does not fit dimension 0 of f32[8]");
  BAD(check(Prim::DynamicSlice, {f32({8}), i32({})}, {f32({3})}, {{"sizes", Ints{3, 1}}}), "dynamic_slice",
      "dynamic_slice has 2 sizes for f32[8]");

  CHECK(check(Prim::DynamicUpdateSlice, {f32({8}), f32({3}), i32({})}, {f32({8})}) == "");
  BAD(check(Prim::DynamicUpdateSlice, {f32({8}), f32({9}), i32({})}, {f32({8})}), "dynamic_update_slice",
      "update f32[9] is larger than f32[8] in dimension 0");
  BAD(check(Prim::DynamicUpdateSlice, {f32({8, 2}), f32({3, 2}), i32({})}, {f32({8, 2})}), "dynamic_update_slice",
      "one start index per dimension");

  CHECK(check(Prim::Concatenate, {f32({2, 3}), f32({4, 3})}, {f32({6, 3})}, {{"dimension", int64_t(0)}}) == "");
  BAD(check(Prim::Concatenate, {f32({2, 3}), f32({4, 2})}, {f32({6, 3})}, {{"dimension", int64_t(0)}}),
      "concatenate", "cannot concatenate f32[2,3] and f32[4,2] along axis 0: dimension 1 differs");
  BAD(check(Prim::Concatenate, {f32({2, 3}), i32({4, 3})}, {f32({6, 3})}, {{"dimension", int64_t(0)}}),
      "concatenate", "cannot concatenate f32[2,3] and i32[4,3]: dtypes differ");
}

TEST_CASE("shape rules: along one axis (gather, scatter_add, argmax, cumsum, argsort)") {
  CHECK(check(Prim::Gather, {f32({5, 3}), i32({7})}, {f32({7, 3})}, {{"axis", int64_t(0)}}) == "");
  BAD(check(Prim::Gather, {f32({5, 3}), ty(DType::I64, {7})}, {f32({7, 3})}, {{"axis", int64_t(0)}}), "gather",
      "indices must be i32, got i64[7]");
  CHECK(check(Prim::ScatterAdd, {f32({5, 3}), i32({7}), f32({7, 3})}, {f32({5, 3})}, {{"axis", int64_t(0)}}) == "");
  BAD(check(Prim::ScatterAdd, {f32({5, 3}), i32({7}), f32({7, 2})}, {f32({5, 3})}, {{"axis", int64_t(0)}}),
      "scatter_add", "values f32[7,2] are not shaped like the gather f32[7,3]");

  Params am{{"axis", int64_t(1)}, {"is_min", int64_t(0)}};
  CHECK(check(Prim::Argmax, {f32({4, 5})}, {i32({4})}, am) == "");
  BAD(check(Prim::Argmax, {f32({4, 5})}, {f32({4})}, am), "argmax", "result 0 is f32[4], but its shape rule gives i32[4]");
  BAD(check(Prim::Cumsum, {f32({4})}, {f32({4})}, {{"axis", int64_t(3)}, {"reverse", int64_t(0)}}), "cumsum",
      "axis 3 is out of range [0, 1)");
  BAD(check(Prim::Cumsum, {f32({4})}, {f32({4})}, {{"axis", int64_t(0)}, {"reverse", int64_t(2)}}), "cumsum",
      "param 'reverse' is 2, not 0 or 1");
  Params roll{{"axis", int64_t(1)}, {"shift", int64_t(2)}};
  CHECK(check(Prim::Roll, {f32({2, 3})}, {f32({2, 3})}, roll) == "");
  BAD(check(Prim::Roll, {f32({2, 3})}, {f32({2, 3})}, {{"axis", int64_t(2)}, {"shift", int64_t(0)}}), "roll",
      "axis 2 is out of range [0, 2)");
  BAD(check(Prim::Roll, {f32({2, 3})}, {f32({2, 3})}, {{"axis", int64_t(1)}, {"shift", int64_t(3)}}), "roll",
      "shift 3 is out of range [0, 3)");
  BAD(check(Prim::Roll, {f32({2, 0})}, {f32({2, 0})}, {{"axis", int64_t(1)}, {"shift", int64_t(1)}}), "roll",
      "shift 1 along an empty axis, not 0");
  BAD(check(Prim::Roll, {f32({2, 3})}, {f32({3, 2})}, roll), "roll", "its shape rule gives f32[2,3]");
  BAD(check(Prim::Argsort, {f32({4})}, {f32({4})}, {{"axis", int64_t(0)}, {"descending", int64_t(0)}}), "argsort",
      "its shape rule gives i32[4]");
}

TEST_CASE("shape rules: collectives read group sizes from the function's mesh") {
  // mesh i=4, j=2
  Params ax0{{"axes", Ints{0}}};
  CHECK(check(Prim::Psum2, {f32({3})}, {f32({3})}, ax0, true) == "");
  CHECK(check(Prim::Psum, {f32({3})}, {f32({3})}, ax0, true) == "");
  BAD(check(Prim::Psum2, {f32({3})}, {f32({3})}, {{"axes", Ints{2}}}, true), "psum2", "mesh axis 2 is out of range");
  BAD(check(Prim::Pmax, {boolT({3})}, {boolT({3})}, ax0, true), "pmax", "pmax needs numbers, got bool[3]");
  BAD(check(Prim::Pand, {f32({3})}, {f32({3})}, ax0, true), "pand", "pand reduces integers and bools bit by bit");
  BAD(check(Prim::Pmin, {f32({3})}, {f32({3})}, {{"axes", Ints{1, 1}}}, true), "pmin", "listed twice");
  CHECK(check(Prim::Pbroadcast, {boolT({3})}, {boolT({3})}, ax0, true) == "");
  BAD(check(Prim::Psum2, {f32({3})}, {f32({3})}, ax0, false), "psum2", "collective in a function without a mesh");

  Params g{{"axes", Ints{0}}, {"axis", int64_t(0)}, {"tiled", int64_t(0)}};
  CHECK(check(Prim::AllGather, {f32({3})}, {f32({4, 3})}, g, true) == "");
  BAD(check(Prim::AllGather, {f32({3})}, {f32({3, 4})}, g, true), "all_gather", "its shape rule gives f32[4,3]");
  g["tiled"] = int64_t(1);
  CHECK(check(Prim::AllGather, {f32({3})}, {f32({12})}, g, true) == "");
  CHECK(check(Prim::AllGatherInvariant, {f32({3})}, {f32({12})}, g, true) == "");
  g["axis"] = int64_t(1);
  BAD(check(Prim::AllGatherInvariant, {f32({3})}, {f32({12})}, g, true), "all_gather_invariant",
      "axis 1 is out of range [0, 1)");

  Params s{{"axes", Ints{0, 1}}, {"scatter_dimension", int64_t(0)}, {"tiled", int64_t(1)}};
  CHECK(check(Prim::PsumScatter, {f32({16})}, {f32({2})}, s, true) == "");
  BAD(check(Prim::PsumScatter, {f32({12})}, {f32({2})}, s, true), "psum_scatter",
      "psum_scatter splits dimension 0 of f32[12] over 8 device(s); 12 is not divisible by 8");
  Params ps{{"axes", Ints{1}}, {"axis", int64_t(1)}, {"tiled", int64_t(0)}};
  CHECK(check(Prim::Pscatter, {f32({3, 2})}, {f32({3})}, ps, true) == "");
  BAD(check(Prim::Pscatter, {f32({3, 4})}, {f32({3})}, ps, true), "pscatter",
      "needs dimension 1 of size 2 (the group size), but f32[3,4] has 4");

  Params a2a{{"axes", Ints{0}}, {"split_axis", int64_t(0)}, {"concat_axis", int64_t(1)}, {"tiled", int64_t(0)}};
  CHECK(check(Prim::AllToAll, {f32({4, 3})}, {f32({3, 4})}, a2a, true) == "");
  BAD(check(Prim::AllToAll, {f32({5, 3})}, {f32({3, 4})}, a2a, true), "all_to_all",
      "needs split_axis 0 of size 4 (the group size), but f32[5,3] has 5");
  a2a["tiled"] = int64_t(1);
  CHECK(check(Prim::AllToAll, {f32({8, 3})}, {f32({2, 12})}, a2a, true) == "");

  CHECK(check(Prim::Ppermute, {f32({3})}, {f32({3})}, {{"axes", Ints{0}}, {"perm", Ints{0, 1, 1, 0}}}, true) == "");
  BAD(check(Prim::Ppermute, {f32({3})}, {f32({3})}, {{"axes", Ints{0}}, {"perm", Ints{0, 1, 0, 2}}}, true),
      "ppermute", "repeats a source");
  BAD(check(Prim::Ppermute, {f32({3})}, {f32({3})}, {{"axes", Ints{1}}, {"perm", Ints{0, 3}}}, true), "ppermute",
      "perm destination 3 is out of range [0, 2)");

  CHECK(check(Prim::AxisIndex, {}, {i32({})}, ax0, true) == "");
  BAD(check(Prim::AxisIndex, {}, {f32({})}, ax0, true), "axis_index", "its shape rule gives i32[]");
}

TEST_CASE("shape rules: loop, while, cond check their bodies' signatures") {
  {
    Fixture fx;
    Func *body = fx.func("body", {i32({}), f32({3})}, {f32({3})});
    Params p{{"lo", int64_t(0)}, {"hi", int64_t(4)}, {"num_consts", int64_t(0)}};
    CHECK(fx.check(Prim::Loop, {f32({3})}, {f32({3})}, p, false, {body}) == "");
  }
  {
    Fixture fx;
    Func *body = fx.func("body", {i32({}), f32({3})}, {f32({4})});
    Params p{{"lo", int64_t(0)}, {"hi", int64_t(4)}, {"num_consts", int64_t(0)}};
    BAD(fx.check(Prim::Loop, {f32({3})}, {f32({3})}, p, false, {body}), "loop",
        "body @body: result 0 is f32[4], expected f32[3]");
  }
  {
    Fixture fx;
    Func *body = fx.func("body", {f32({3})}, {f32({3})});  // no index param
    Params p{{"lo", int64_t(0)}, {"hi", int64_t(4)}, {"num_consts", int64_t(0)}};
    BAD(fx.check(Prim::Loop, {f32({3})}, {f32({3})}, p, false, {body}), "loop", "body @body has 1 param(s), expected 2");
  }
  {
    Fixture fx;
    Func *pred = fx.func("pred", {f32({3})}, {boolT({})});
    Func *body = fx.func("body", {f32({3})}, {f32({3})});
    CHECK(fx.check(Prim::While, {f32({3})}, {f32({3})}, {{"num_consts", int64_t(0)}}, false, {pred, body}) == "");
  }
  {
    Fixture fx;
    Func *pred = fx.func("pred", {f32({3})}, {f32({})});
    Func *body = fx.func("body", {f32({3})}, {f32({3})});
    BAD(fx.check(Prim::While, {f32({3})}, {f32({3})}, {{"num_consts", int64_t(0)}}, false, {pred, body}), "while",
        "predicate @pred: result 0 is f32[], expected bool[]");
  }
  {
    Fixture fx;
    Func *t = fx.func("then", {f32({3})}, {f32({})}), *e = fx.func("else", {f32({3})}, {f32({})});
    CHECK(fx.check(Prim::Cond, {boolT({}), f32({3})}, {f32({})}, {}, false, {t, e}) == "");
  }
  {
    Fixture fx;
    Func *t = fx.func("then", {f32({3})}, {f32({})}), *e = fx.func("else", {f32({3})}, {f32({})});
    BAD(fx.check(Prim::Cond, {i32({}), f32({3})}, {f32({})}, {}, false, {t, e}), "cond", "the predicate must be bool[]");
  }
  {
    Fixture fx;
    Func *t = fx.func("then", {f32({3})}, {f32({})}), *e = fx.func("else", {f32({3})}, {i32({})});
    BAD(fx.check(Prim::Cond, {boolT({}), f32({3})}, {f32({})}, {}, false, {t, e}), "cond",
        "branch @else: result 0 is i32[], expected f32[]");
  }
}

TEST_CASE("shape rules: shmap blocks follow in_specs and out_specs; call, jvp, vjp signatures") {
  PartitionSpec byI{{{0}}}, repl{};
  auto shmap = [&](Type global, Type param, Type result, Type out, PartitionSpec outSpec) {
    Fixture fx;
    Func *body = fx.func("body", {param}, {result}, fx.mesh);
    body->isShmapBody = true;
    Params p{{"mesh", int64_t(0)}, {"in_specs", specs({byI})}, {"out_specs", specs({outSpec})}};
    return fx.check(Prim::Shmap, {global}, {out}, p, false, {body});
  };
  CHECK(shmap(f32({8, 3}), f32({2, 3}), f32({2, 3}), f32({8, 3}), byI) == "");
  CHECK(shmap(f32({8, 3}), f32({2, 3}), f32({}), f32({}), repl) == "");
  BAD(shmap(f32({8, 3}), f32({4, 3}), f32({2, 3}), f32({8, 3}), byI), "shmap",
      "body @body: param 0 is f32[4,3], expected f32[2,3]");
  BAD(shmap(f32({6, 3}), f32({2, 3}), f32({2, 3}), f32({8, 3}), byI), "shmap",
      "operand 0: dimension 0 of f32[6,3] is not divisible by 4");
  BAD(shmap(f32({8, 3}), f32({2, 3}), f32({2, 3}), f32({2, 3}), byI), "shmap",
      "result 0 is f32[2,3], but its shape rule gives f32[8,3]");

  {
    Fixture fx;
    Func *callee = fx.func("callee", {f32({2})}, {i32({})});
    CHECK(fx.check(Prim::Call, {f32({2})}, {i32({})}, {}, false, {callee}) == "");
  }
  {
    Fixture fx;
    Func *callee = fx.func("callee", {f32({2})}, {i32({})});
    BAD(fx.check(Prim::Call, {f32({3})}, {i32({})}, {}, false, {callee}), "call",
        "callee @callee: param 0 is f32[2], expected f32[3]");
  }
  {
    Fixture fx;
    Func *f = fx.func("f", {f32({2})}, {f32({})});
    f->isTrace = true;
    CHECK(fx.check(Prim::Jvp, {f32({2}), f32({2})}, {f32({}), f32({})}, {}, false, {f}) == "");
  }
  {
    Fixture fx;
    Func *f = fx.func("f", {f32({2})}, {f32({})});
    BAD(fx.check(Prim::Jvp, {f32({2}), f32({3})}, {f32({}), f32({})}, {}, false, {f}), "jvp", "(tangents)");
  }
  {
    Fixture fx;
    Func *f = fx.func("f", {f32({2}), i32({})}, {f32({})});
    Params p{{"wrt", Ints{0}}, {"with_value", int64_t(1)}, {"linear", int64_t(0)}};
    CHECK(fx.check(Prim::Vjp, {f32({2}), i32({}), f32({})}, {f32({}), f32({2})}, p, false, {f}) == "");
  }
  {
    Fixture fx;
    Func *f = fx.func("f", {f32({2}), i32({})}, {f32({})});
    Params p{{"wrt", Ints{0}}, {"with_value", int64_t(0)}, {"linear", int64_t(0)}};
    BAD(fx.check(Prim::Vjp, {f32({2}), i32({}), f32({})}, {f32({}), f32({2})}, p, false, {f}), "vjp",
        "has 2 result(s), but its shape rule gives 1");
  }
}

TEST_CASE("shape rules: creation and files take the declared type, checked") {
  CHECK(check(Prim::Constant, {}, {f32({3})}, {{"value", std::vector<double>{1, 2, 3}}}) == "");
  BAD(check(Prim::Constant, {}, {f32({3})}, {{"value", std::vector<double>{1, 2}}}), "constant", "2 values for f32[3]");
  CHECK(check(Prim::Iota, {}, {i32({3, 2})}, {{"dimension", int64_t(1)}}) == "");
  BAD(check(Prim::Iota, {}, {i32({3, 2})}, {{"dimension", int64_t(2)}}), "iota", "dimension 2 is out of range");
  CHECK(check(Prim::RandomNormal, {i32({})}, {f32({3})}) == "");
  BAD(check(Prim::RandomUniform, {}, {i32({3})}, {{"seed", int64_t(1)}}), "random_uniform", "makes floats, not i32[3]");
  BAD(check(Prim::RandomNormal, {f32({})}, {f32({3})}), "random_normal", "the seed must be an i32[] scalar");

  CHECK(check(Prim::Load, {}, {f32({3})}, {{"path", std::string("x.npy")}}) == "");
  BAD(check(Prim::Load, {}, {f32({3})}, {{"path", std::string("x.npy")}, {"path_arg", int64_t(0)}}), "load",
      "needs exactly one of path and path_arg");
  BAD(check(Prim::Load, {}, {ty(DType::BF16, {3})}, {{"path", std::string("x.npy")}}), "load", "no bfloat16");
  BAD(check(Prim::Load, {}, {f32({3})}, {{"path", std::string("x.npy")}, {"spec", specs({PartitionSpec{{{0}}}})}}),
      "load", "a sharded load (spec) outside a shmap body");
  CHECK(check(Prim::Load, {}, {f32({2, 3})}, {{"path", std::string("x.npy")}, {"spec", specs({PartitionSpec{{{0}}}})}},
              true) == "");
  BAD(check(Prim::Load, {}, {f32({2, 3})},
            {{"path", std::string("x.npy")}, {"spec", specs({PartitionSpec{{{0}, {0}}}})}}, true),
      "load", "names mesh axis i twice");
  BAD(check(Prim::SaveNpz, {f32({2}), f32({2})}, {}, {{"path", std::string("a.npz")}, {"keys", std::string("a")}}),
      "savez", "needs one key per operand");
  BAD(check(Prim::ArgValue, {}, {f32({2})}, {{"index", int64_t(0)}}), "arg", "must be a scalar");
}

TEST_CASE("a fixed arity is checked before the shape rule runs") {
  CHECK(rules::shapeProblem(Eqn{Prim::Neg, {}, {}, {}, {}, {}}, Func{}) == "expects 1 operand(s), has 0");
}

TEST_CASE("autodiff's Builder::emit refuses a result type the shape rule does not give") {
  Module m;
  Func *f = m.newFunc("f");
  passes::ad::Builder b{m, *f, {}};
  Value *x = b.scalar(1.0, DType::F32);
  CHECK(b.emit(Prim::Add, {x, x}, f32({}))->type == f32({}));
  CHECK_THROWS_AS(b.emit(Prim::Add, {x, x}, f32({2})), InternalError);
  CHECK_THROWS_WITH(b.emit(Prim::Exp, {b.i32(1)}, i32({})),
                    Catch::Contains("built an ill-typed exp in @f: needs float operands"));
}

TEST_CASE("makeEqn types a result by the shape and variance rules, as bind does") {
  Module m;
  m.meshes.push_back(std::make_unique<Mesh>(Mesh{"m", {"i", "j"}, {4, 2}, {}}));
  Func *f = m.newFunc("f");
  f->mesh = m.meshes[0].get();
  f->isShmapBody = true;
  const AxisSet i = 1, j = 2;
  Value *x = f->newValue(Type{DType::F32, {3, 4}, i});
  Value *y = f->newValue(Type{DType::F32, {3, 4}, i});
  Value *inv = f->newValue(Type{DType::F32, {3, 4}, 0});
  // element-wise: the operands' type; a reduction: its rule's shape; collectives: their variance
  CHECK(rules::makeEqn(*f, Prim::Add, {x, y}, {}, {}).outs[0]->type == Type{DType::F32, {3, 4}, i});
  CHECK(rules::makeEqn(*f, Prim::ReduceSum, {x}, {{"axes", std::vector<int64_t>{1}}}, {}).outs[0]->type ==
        Type{DType::F32, {3}, i});
  CHECK(rules::makeEqn(*f, Prim::Psum2, {x}, {{"axes", std::vector<int64_t>{0}}}, {}).outs[0]->type ==
        Type{DType::F32, {3, 4}, 0});
  CHECK(rules::makeEqn(*f, Prim::Pbroadcast, {x}, {{"axes", std::vector<int64_t>{1}}}, {}).outs[0]->type ==
        Type{DType::F32, {3, 4}, i | j});
  CHECK(rules::makeEqn(*f, Prim::AllGather, {x},
                       {{"axes", std::vector<int64_t>{0}}, {"axis", int64_t(0)}, {"tiled", int64_t(1)}}, {})
            .outs[0]->type == Type{DType::F32, {12, 4}, i});
  // a primitive that takes its result type from the equation is given it
  const Type flat{DType::F32, {12}, i};
  CHECK(rules::makeEqn(*f, Prim::Reshape, {x}, {}, {}, {.declared = &flat}).outs[0]->type == flat);
  // refused: operands of different variance, a declared type the rules do not give, a result
  // value of another type, a primitive whose variance needs more than its operands
  CHECK_THROWS_WITH(rules::makeEqn(*f, Prim::Add, {x, inv}, {}, {}), Catch::Contains("vary over different axes"));
  const Type wrong{DType::F32, {3, 4}, 0};
  CHECK_THROWS_WITH(rules::makeEqn(*f, Prim::Neg, {x}, {}, {}, {.declared = &wrong}),
                    Catch::Contains("declared f32[3,4], but the rules give f32[3,4]{i}"));
  CHECK_THROWS_WITH(rules::makeEqn(*f, Prim::Neg, {x}, {}, {}, {.into = inv}),
                    Catch::Contains("the value given for it is f32[3,4]"));
  CHECK_THROWS_WITH(rules::makeEqn(*f, Prim::Reshape, {x}, {}, {}), Catch::Contains("comes from the equation"));
}
