// Creation: constant, iota, random_normal, random_uniform. They make values from no operands
// (a random draw may take its seed as one), so they have no tangent and are never linear.
#include "prims/Prim.h"

#include "half.h"

#include <cmath>

namespace shmapc::prims {

// A constant with a full value list is a constant global; it is used in place (values are
// never written after they are defined) unless it must land in the caller's result buffer.
// A splat (one value) is fused into the loops that read it.
namespace {

// A splat is the same everywhere: any sharding of it is computed where it is used, with no
// communication. A constant array is indexed by position: whole on every device.
FactorRule constantFactors(const Eqn &e) {
  return FactorRule{e.doublesParam("value").size() == 1 ? FactorRule::Free : FactorRule::Replicated, {}, {}, nullptr};
}

// iota's dimensions other than the one it counts along may take any sharding (each device
// makes its block; the values do not depend on where along them it is): factors of the result
// alone. The counted one is computed whole.
FactorRule iotaFactors(const Eqn &e) {
  FactorRule r;
  for (int d = 0; d < (int)e.outs[0]->type.rank(); ++d)
    if (d != (int)e.intParam("dimension")) r.factors.push_back({{}, {{0, d}}});
  return r;
}

} // namespace

template <> const Rules &define<Prim::Constant>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // the declared type; one value (a splat) or one per element
        std::vector<double> none;
        auto it = c.e.params.find("value");
        const auto *values = it == c.e.params.end() ? nullptr : std::get_if<std::vector<double>>(&it->second);
        if (!values) return c.fail("needs a value list param 'value'");
        if (values->size() != 1 && (int64_t)values->size() != c.declared().numElements())
          return c.fail(std::to_string(values->size()) + " values for " + typeText(c.declared()));
        return c.out(c.declared());
      },
      .variance = VarianceRule::Invariant,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        if (FuncEmitter::isFusible(e)) return fe.emitElementwiseGroup(i, i);
        const Value *out = e.outs[0];
        const std::vector<double> &values = e.doublesParam("value");
        if ((int64_t)values.size() != out->type.numElements())
          return fe.fail("constant: " + std::to_string(values.size()) + " values for " +
                         std::to_string(out->type.numElements()) + " elements");
        if (values.empty()) return true;
        llvm::Constant *data = fe.me.dataArray(out->type.dtype, values);
        if (fe.storage(out).kind == codegen::StorageKind::Global)
          fe.setBuffer(out, data);
        else
          fe.copyBytes(fe.buffer(out), data, out->type.byteSize());
        return true;
      },
      .scalar = [](ScalarCtx &c) -> llvm::Value * {
        double v = c.e.doublesParam("value")[0];
        switch (c.out) {
        case DType::F32:
        case DType::F64: return llvm::ConstantFP::get(c.fe.me.elemType(c.out), v);
        case DType::I32: {  // saturating, NaN -> 0, as a float -> int conversion
          double s = std::isnan(v) ? 0.0 : std::fmax(-2147483648.0, std::fmin(2147483647.0, v));
          return c.b.getInt32((uint32_t)(int32_t)s);
        }
        case DType::Bool: return c.b.getInt8(v != 0 ? 1 : 0);
        case DType::I64: return c.b.getInt64((uint64_t)codegen::saturateToI64(v));
        case DType::F16:  // the f32 value of the rounded constant (an element in a fused loop)
        case DType::BF16:
          return llvm::ConstantFP::get(c.b.getFloatTy(),
                                       c.out == DType::F16 ? shm::f16_to_f32(codegen::halfConstant(c.out, v))
                                                           : shm::bf16_to_f32(codegen::halfConstant(c.out, v)));
        }
        return nullptr;
      },
      .sharding = constantFactors,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::Iota>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // the declared type: numeric, rank >= 1, `dimension` one of its dims
        int64_t dim;
        const Type &t = c.declared();
        if (t.dtype == DType::Bool || t.rank() == 0) return c.fail("cannot make " + typeText(t));
        return c.param("dimension", dim) && c.inRange(dim, t.rank(), "dimension") && c.out(t);
      },
      .variance = VarianceRule::Invariant,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &t = e.outs[0]->type;
        fe.callRt("shm_iota", {fe.dtypeCode(t.dtype), fe.buffer(e.outs[0]), fe.i32(t.rank()),
                               fe.me.i64Array(t.shape), fe.i32(e.intParam("dimension"))});
        return true;
      },
      .scalar = nullptr,
      .sharding = iotaFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// The declared float type; the seed is a `seed` param or one i32[] operand.
static bool randomShape(ShapeCtx &c) {
  int64_t seed;
  if (c.numIns() > 1) return c.fail("takes at most one operand (the seed)");
  if (c.numIns() == 1 ? !c.i32Scalar(0, "the seed") : !c.param("seed", seed)) return false;
  if (!isFloat(c.declared().dtype)) return c.fail("makes floats, not " + typeText(c.declared()));
  return c.out(c.declared());
}

// Deterministic across runs and machines (docs/numerics.md); `kind` is SHM_RANDOM_NORMAL or
// SHM_RANDOM_UNIFORM. The seed is the `seed` param, or an i32[] operand read at run time.
static bool lowerRandom(FuncEmitter &fe, size_t i, int kind) {
  const Eqn &e = fe.f.eqns[i];
  const Type &t = e.outs[0]->type;
  llvm::Value *seed = fe.i64(e.has("seed") ? e.intParam("seed") : 0);
  if (!e.ins.empty()) seed = fe.b.CreateSExt(fe.b.CreateLoad(fe.me.i32Ty, fe.buffer(e.ins[0])), fe.me.i64Ty);
  if (fe.me.blocksLayout(e.outs[0])) {  // only the rank's blocks (Blocks.cpp)
    const codegen::FuncEmitter::BlocksArgs b = fe.blocksArgs(e.outs[0]);
    fe.callRt("shm_random_blocks", {b.dtype, fe.i32(kind), seed, b.meshRank, b.meshSizes, b.rank, b.shape, b.spec,
                                    fe.buffer(e.outs[0])});
    return true;
  }
  fe.callRt("shm_random", {fe.dtypeCode(t.dtype), fe.i32(kind), seed, fe.buffer(e.outs[0]),
                           fe.i64(t.numElements())});
  return true;
}

// With a seed operand the result varies as the seed does (a per-device seed gives per-device
// draws); without one it is invariant (SameAsOperands of no operands).
template <> const Rules &define<Prim::RandomNormal>() {
  static const Rules r{
      .shape = randomShape,
      .variance = VarianceRule::SameAsOperands,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return lowerRandom(fe, i, 0); },
      .scalar = nullptr,
      .sharding = replicatedFactors,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::RandomUniform>() {
  static const Rules r{
      .shape = randomShape,
      .variance = VarianceRule::SameAsOperands,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return lowerRandom(fe, i, 1); },
      .scalar = nullptr,
      .sharding = replicatedFactors,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
