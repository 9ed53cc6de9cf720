// The builtins table (name -> handler) and the creation, element-wise and reduction
// builtins. Structural builtins live in Structural.cpp, collectives in Collectives.cpp.
#include "sema/SemaImpl.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>

namespace shmapc::sema {

const std::map<std::string, Sema::BuiltinFn> &Sema::builtins() {
  static const std::map<std::string, BuiltinFn> table = {
      // creation
      {"zeros", &Sema::bZeros},
      {"check_grads", &Sema::bCheckGrads},
      {"ones", &Sema::bOnes},
      {"full", &Sema::bFull},
      {"iota", &Sema::bIota},
      {"random_normal", &Sema::bRandomNormal},
      {"random_uniform", &Sema::bRandomUniform},
      {"load", &Sema::bLoad},
      // element-wise
      {"cast", &Sema::bCast},
      {"exp", &Sema::bExp},
      {"log", &Sema::bLog},
      {"sin", &Sema::bSin},
      {"cos", &Sema::bCos},
      {"tanh", &Sema::bTanh},
      {"sqrt", &Sema::bSqrt},
      {"abs", &Sema::bAbs},
      {"floor", &Sema::bFloor},
      {"maximum", &Sema::bMaximum},
      {"minimum", &Sema::bMinimum},
      {"pow", &Sema::bPow},
      {"select", &Sema::bSelect},
      {"clip", &Sema::bClip},
      {"where", &Sema::bSelect},
      // reductions
      {"sum", &Sema::bSum},
      {"mean", &Sema::bMean},
      {"max", &Sema::bMax},
      {"min", &Sema::bMin},
      // along one axis (Indexing.cpp)
      {"take", &Sema::bTake},
      {"scatter_add", &Sema::bScatterAdd},
      {"argmax", &Sema::bArgmax},
      {"argmin", &Sema::bArgmin},
      {"cumsum", &Sema::bCumsum},
      {"take_along_axis", &Sema::bTakeAlongAxis},
      {"argsort", &Sema::bArgsort},
      {"sort", &Sema::bSort},
      {"one_hot", &Sema::bOneHot},
      // structural (Structural.cpp)
      {"matmul", &Sema::bMatmul},
      {"reshape", &Sema::bReshape},
      {"transpose", &Sema::bTranspose},
      {"expand_dims", &Sema::bExpandDims},
      {"concatenate", &Sema::bConcatenate},
      {"dynamic_slice", &Sema::bDynamicSlice},
      {"dynamic_update_slice", &Sema::bDynamicUpdateSlice},
      // collectives (Collectives.cpp)
      {"psum", &Sema::bPsum},
      {"pmax", &Sema::bPmax},
      {"pmin", &Sema::bPmin},
      {"pmean", &Sema::bPmean},
      {"psum2", &Sema::bPsum2},
      {"pbroadcast", &Sema::bPbroadcast},
      {"pvary", &Sema::bPbroadcast},
      {"all_gather", &Sema::bAllGather},
      {"all_gather_invariant", &Sema::bAllGatherInvariant},
      {"psum_scatter", &Sema::bPsumScatter},
      {"pscatter", &Sema::bPscatter},
      {"all_to_all", &Sema::bAllToAll},
      {"ppermute", &Sema::bPpermute},
      {"axis_index", &Sema::bAxisIndex},
      {"axis_size", &Sema::bAxisSize},
  };
  return table;
}

// ---- creation

SVal Sema::bZeros(const ast::Expr &c) {
  auto a = bindArgs(c, {"type"}, 1);
  ir::Type t = typeArg(*a[0], "the argument of zeros");
  return SVal::array(constant(t.dtype, t.shape, {0}, c.loc), c.loc);
}

SVal Sema::bOnes(const ast::Expr &c) {
  auto a = bindArgs(c, {"type"}, 1);
  ir::Type t = typeArg(*a[0], "the argument of ones");
  return SVal::array(constant(t.dtype, t.shape, {1}, c.loc), c.loc);
}

SVal Sema::bFull(const ast::Expr &c) {
  auto a = bindArgs(c, {"type", "value"}, 2);
  ir::Type t = typeArg(*a[0], "the first argument of full");
  const ast::Expr &v = *a[1];
  if (v.kind == ast::Expr::BoolLit) {
    if (t.dtype != ir::DType::Bool)
      fail(DiagId::DTypeMismatch, v.loc, "cannot fill " + str(t) + " with a bool",
           "use a number, or a bool[...] type");
    return SVal::array(constant(t.dtype, t.shape, {v.boolValue ? 1.0 : 0.0}, c.loc), c.loc);
  }
  SVal lit = eval(v);
  if (lit.kind != SVal::Literal)
    fail(DiagId::BadArgument, v.loc, "the fill value of full must be a literal",
         "write a constant such as 0.5; for computed values use broadcasting, e.g. "
         "zeros(T) + x");
  return SVal::array(literalAs(lit, t.dtype, t.shape, c.loc), c.loc);
}

SVal Sema::bIota(const ast::Expr &c) {
  auto a = bindArgs(c, {"type", "dim"}, 1);
  ir::Type t = typeArg(*a[0], "the argument of iota");
  if (t.dtype == ir::DType::Bool)
    fail(DiagId::DTypeMismatch, a[0]->loc, "iota cannot make " + str(t),
         "use a numeric type such as i32[...] or f32[...]");
  if (t.rank() == 0)
    fail(DiagId::BadAxis, a[0]->loc, "iota needs an array type, got " + str(t),
         "give the type a shape, e.g. iota(i32[8])");
  int64_t dim = a[1] ? normAxis(staticInt(*a[1], "dim"), t.rank(), a[1]->loc, "dim") : 0;
  return SVal::array(emit(ir::Prim::Iota, {}, t, c.loc, {{"dimension", dim}}), c.loc);
}

SVal Sema::randomArray(const ast::Expr &c, ir::Prim p) {
  auto a = bindArgs(c, {"type", "seed"}, 1);
  ir::Type t = typeArg(*a[0], "the first argument of " + c.name);
  if (!ir::isFloat(t.dtype))
    fail(DiagId::DTypeMismatch, a[0]->loc, c.name + " makes floats, not " + str(t),
         "use a float type: f32[...], f64[...], f16[...] or bf16[...]");
  if (!a[1]) return SVal::array(emit(p, {}, t, c.loc, {{"seed", (int64_t)0}}), c.loc);
  if (auto seed = staticIntOpt(*a[1])) return SVal::array(emit(p, {}, t, c.loc, {{"seed", *seed}}), c.loc);
  // A seed known only at run time (a step counter, axis_index): an i32[] operand.
  SVal s = eval(*a[1]);
  ir::Value *seed = s.kind == SVal::Literal ? literalAs(s, ir::DType::I32, {}, a[1]->loc) : toArray(s);
  if (seed->type.dtype != ir::DType::I32 || seed->type.rank() != 0)
    fail(DiagId::BadArgument, a[1]->loc, "the seed of " + c.name + " must be an i32 scalar, got " + str(seed->type),
         "pass a static integer or an i32[] value");
  return SVal::array(emit(p, {seed}, t, c.loc), c.loc);
}
SVal Sema::bRandomNormal(const ast::Expr &c) { return randomArray(c, ir::Prim::RandomNormal); }
SVal Sema::bRandomUniform(const ast::Expr &c) { return randomArray(c, ir::Prim::RandomUniform); }

// ---- files (numpy .npy, runtime/npy.cpp): host only, paths relative to the working directory

// The path param of load/save: {"path", literal} or {"path_arg", index of a str program
// argument}.
std::pair<std::string, ir::Attr> Sema::pathArg(const ast::Expr &call, const ast::Expr &arg) {
  if (cur_->mesh)
    failWithCallChain(DiagId::FileInsideShmap, call.loc, call.name + " inside a shmap body",
                      call.name == "load" ? "load in main and pass the array to the shmap function"
                                          : "return the value from the shmap function and save it in main");
  if (arg.kind == ast::Expr::Name && arg.module.empty() && !findScope(arg.name)) {
    int index = programArgIndex(arg.name);
    if (index >= 0 && module_->args[index].type == "str") return {"path_arg", (int64_t)index};
  }
  if (arg.kind != ast::Expr::StringLit || arg.name.empty())
    fail(DiagId::BadArgument, arg.loc,
         "the path of " + call.name + " must be a string literal or a str program argument",
         "write " + call.name + "(\"weights.npy\", ...), or declare arg data: str = \"x.npy\"; and pass data");
  return {"path", arg.name};
}

// load("x.npy", f32[256, 512]): the type is static; the runtime checks the file against it.
SVal Sema::bLoad(const ast::Expr &c) {
  auto a = bindArgs(c, {"path", "type"}, 2);
  auto path = pathArg(c, *a[0]);
  ir::Type t = typeArg(*a[1], "the second argument of load");
  if (t.dtype == ir::DType::BF16)
    fail(DiagId::NpyDType, a[1]->loc, "load cannot read " + str(t) + ": .npy has no bfloat16 dtype",
         "save the array as float32 in numpy and convert after loading: cast(load(path, f32[...]), bf16)");
  return SVal::array(emit(ir::Prim::Load, {}, t, c.loc, {path}), c.loc);
}

void Sema::lowerSave(const ast::Expr &c) {
  auto a = bindArgs(c, {"path", "x"}, 2);
  auto path = pathArg(c, *a[0]);
  ir::Eqn e;
  e.prim = ir::Prim::Save;
  e.ins = {evalArray(*a[1])};
  if (e.ins[0]->type.dtype == ir::DType::BF16)
    fail(DiagId::NpyDType, a[1]->loc,
         "save cannot write " + str(e.ins[0]->type) + ": .npy has no bfloat16 dtype",
         "convert it to f32 first: save(path, cast(x, f32)) (exact: every bf16 value is an f32)");
  e.params[path.first] = path.second;
  e.loc = c.loc;
  cur_->func->eqns.push_back(std::move(e));
}

// ---- element-wise

SVal Sema::bCast(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "dtype"}, 2);
  ir::DType dt = dtypeArg(*a[1], "the second argument of cast");
  SVal x = eval(*a[0]);
  if (x.kind == SVal::Literal && (ir::isFloat(dt) || !x.literalIsFloat))
    return SVal::array(literalAs(x, dt, {}, c.loc), c.loc);
  return SVal::array(convert(toArray(x), dt, c.loc), c.loc);
}

// exp, log, ...: float operands only (an int literal becomes f32, as in JAX).
SVal Sema::floatUnary(const ast::Expr &c, ir::Prim p) {
  auto a = bindArgs(c, {"x"}, 1);
  SVal x = eval(*a[0]);
  ir::Value *v = x.kind == SVal::Literal ? literalAs(x, ir::DType::F32, {}, x.loc) : toArray(x);
  if (!ir::isFloat(v->type.dtype))
    fail(DiagId::DTypeMismatch, c.loc, c.name + " needs a float array, got " + str(v->type),
         "convert it first: cast(x, f32)");
  return SVal::array(emit(p, {v}, v->type, c.loc), c.loc);
}
SVal Sema::bExp(const ast::Expr &c) { return floatUnary(c, ir::Prim::Exp); }
SVal Sema::bLog(const ast::Expr &c) { return floatUnary(c, ir::Prim::Log); }
SVal Sema::bSin(const ast::Expr &c) { return floatUnary(c, ir::Prim::Sin); }
SVal Sema::bCos(const ast::Expr &c) { return floatUnary(c, ir::Prim::Cos); }
SVal Sema::bTanh(const ast::Expr &c) { return floatUnary(c, ir::Prim::Tanh); }
SVal Sema::bSqrt(const ast::Expr &c) { return floatUnary(c, ir::Prim::Sqrt); }
SVal Sema::bAbs(const ast::Expr &c) { return floatUnary(c, ir::Prim::Abs); }
SVal Sema::bFloor(const ast::Expr &c) { return floatUnary(c, ir::Prim::Floor); }

SVal Sema::bMaximum(const ast::Expr &c) {
  auto a = bindArgs(c, {"a", "b"}, 2);
  SVal x = eval(*a[0]);
  return elementwise(ir::Prim::Max, "maximum", x, eval(*a[1]), c.loc);
}
SVal Sema::bMinimum(const ast::Expr &c) {
  auto a = bindArgs(c, {"a", "b"}, 2);
  SVal x = eval(*a[0]);
  return elementwise(ir::Prim::Min, "minimum", x, eval(*a[1]), c.loc);
}
SVal Sema::bPow(const ast::Expr &c) {
  auto a = bindArgs(c, {"a", "b"}, 2);
  SVal x = eval(*a[0]);
  return elementwise(ir::Prim::Pow, "pow", x, eval(*a[1]), c.loc);
}

// select(c, a, b): the predicate broadcasts with the two choices, which are promoted to one
// dtype (as jnp.where).
SVal Sema::bSelect(const ast::Expr &c) {
  auto a = bindArgs(c, {"pred", "on_true", "on_false"}, 3);
  ir::Value *pred = evalArray(*a[0]);
  if (pred->type.dtype != ir::DType::Bool)
    fail(DiagId::DTypeMismatch, a[0]->loc,
         c.name + " needs a bool predicate, got " + str(pred->type),
         "compare first, e.g. " + c.name + "(x > 0, a, b)");
  SVal t = eval(*a[1]);
  SVal f = eval(*a[2]);
  std::string what = "apply " + c.name + " to";
  ir::DType dt = commonDType({t, f}, what, c.loc);
  std::vector<int64_t> shape = broadcastShape({SVal::array(pred, a[0]->loc), t, f}, what, c.loc);
  std::vector<ir::Value *> ins = {broadcastTo(pred, shape, c.loc)};
  for (const SVal &v : {t, f}) ins.push_back(asOperand(v, dt, shape, c.loc));
  return SVal::array(emit(ir::Prim::Select, ins, ins[1]->type, c.loc), c.loc);
}

// ---- reductions: sum / mean / max / min over all axes or `axis=`

SVal Sema::reduction(const ast::Expr &c, ir::Prim p, bool mean) {
  auto a = bindArgs(c, {"x", "axis"}, 1);
  ir::Value *x = evalArray(*a[0]);
  if (x->type.dtype == ir::DType::Bool)
    fail(DiagId::DTypeMismatch, c.loc, c.name + " needs numbers, got " + str(x->type),
         "cast(x, i32) to count true values");
  std::vector<int64_t> axes;
  if (a[1]) {
    axes = normAxes(staticIntList(*a[1], "axis"), x->type.rank(), a[1]->loc, "axis");
  } else {
    for (int64_t i = 0; i < x->type.rank(); ++i) axes.push_back(i);
  }
  // mean: integers become floats (i32 -> f32, i64 -> f64, as JAX's mean); f16 and bf16 are
  // summed and divided in f32 and rounded once (as jnp.mean, which upcasts them).
  if (mean && !ir::isFloat(x->type.dtype)) x = convert(x, floatFor(x->type.dtype), c.loc);
  ir::DType resultType = x->type.dtype;
  if (mean && ir::isHalf(resultType)) x = convert(x, ir::DType::F32, c.loc);
  if (axes.empty()) return SVal::array(convert(x, resultType, c.loc), c.loc);
  ir::Type t = x->type;
  t.shape.clear();
  int64_t count = 1;
  for (int64_t i = 0; i < x->type.rank(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end())
      t.shape.push_back(x->type.shape[i]);
    else
      count *= x->type.shape[i];
  }
  ir::Value *r = emit(p, {x}, t, c.loc, {{"axes", axes}});
  if (mean) r = emit(ir::Prim::Div, {r, constant(t.dtype, t.shape, {(double)count}, c.loc)}, t, c.loc);
  return SVal::array(convert(r, resultType, c.loc), c.loc);
}
SVal Sema::bSum(const ast::Expr &c) { return reduction(c, ir::Prim::ReduceSum, false); }
SVal Sema::bMean(const ast::Expr &c) { return reduction(c, ir::Prim::ReduceSum, true); }
SVal Sema::bMax(const ast::Expr &c) { return reduction(c, ir::Prim::ReduceMax, false); }
SVal Sema::bMin(const ast::Expr &c) { return reduction(c, ir::Prim::ReduceMin, false); }

} // namespace shmapc::sema
