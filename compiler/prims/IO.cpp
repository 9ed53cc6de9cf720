// The host's input and output: print, numpy .npy files (runtime/npy.cpp) with load and
// save, and program arguments. Host only (sema refuses them inside shmap bodies); differentiated code drops the
// effects (flattenInto), and a load is a constant to autodiff.
#include "prims/Prim.h"

namespace shmapc::prims {

namespace {

// (path, dtype, rank, shape) arguments of the runtime's npy calls. The path is a literal or a
// str program argument's value (runtime/cli.cpp).
std::vector<llvm::Value *> fileArgs(FuncEmitter &fe, const Eqn &e, const Type &t) {
  llvm::Value *path = e.has("path_arg")
                          ? static_cast<llvm::Value *>(fe.callRt("shm_arg_str", {fe.i32(e.intParam("path_arg"))}))
                          : fe.me.cString(e.strParam("path"));
  return {path, fe.dtypeCode(t.dtype), fe.i32(t.rank()), fe.me.i64Array(t.shape)};
}

} // namespace

template <> const Rules &define<Prim::Print>() {
  static const Rules r{
      .variance = VarianceRule::Effect,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &t = e.ins[0]->type;
        std::string label = e.has("label") ? e.strParam("label") : "";
        fe.callRt("shm_print", {fe.me.cString(label), fe.dtypeCode(t.dtype), fe.i32(t.rank()),
                                fe.me.i64Array(t.shape), fe.buffer(e.ins[0])});
        return true;
      },
      .scalar = nullptr,
  };
  return r;
}

// Writes version 1 through a temporary file and a rename.
template <> const Rules &define<Prim::Save>() {
  static const Rules r{
      .variance = VarianceRule::Effect,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        std::vector<llvm::Value *> args = fileArgs(fe, e, e.ins[0]->type);
        args.push_back(fe.buffer(e.ins[0]));
        fe.callRt("shm_save_npy", args);
        return true;
      },
      .scalar = nullptr,
  };
  return r;
}

// The runtime checks the file's dtype and shape against the static type and fails naming the
// file and what differs.
template <> const Rules &define<Prim::Load>() {
  static const Rules r{
      .variance = VarianceRule::Invariant,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        std::vector<llvm::Value *> args = fileArgs(fe, e, e.outs[0]->type);
        args.push_back(fe.buffer(e.outs[0]));
        fe.callRt("shm_load_npy", args);
        return true;
      },
      .scalar = nullptr,
  };
  return r;
}

// A numeric or bool program argument's value (--NAME=VALUE, else the declared default), read
// from the runtime's parsed table.
template <> const Rules &define<Prim::ArgValue>() {
  static const Rules r{
      .variance = VarianceRule::Invariant,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        DType t = e.outs[0]->type.dtype;
        llvm::IRBuilder<> &b = fe.b;
        llvm::Value *index = fe.i32(e.intParam("index")), *v;
        if (isFloat(t)) {
          v = fe.callRt("shm_arg_f64", {index});
          if (t != DType::F64) v = b.CreateFPTrunc(v, b.getFloatTy());  // halves: via f32
          if (isHalf(t)) v = codegen::f32ToHalf(b, v, t);
        } else {
          v = b.CreateTrunc(fe.callRt("shm_arg_i64", {index}), fe.me.elemType(t));
        }
        b.CreateStore(v, fe.buffer(e.outs[0]));
        return true;
      },
      .scalar = nullptr,
  };
  return r;
}

} // namespace shmapc::prims
