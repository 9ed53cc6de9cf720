// The host's input and output: print, numpy .npy files and .npz archives (runtime/npy.cpp)
// with load, save and savez, and program arguments. Print and the saves are host only (sema
// refuses them inside shmap bodies); so is a load, except a sharded load (a `spec` param),
// which reads each device's block inside a shmap body. Differentiated code drops the effects
// (flattenInto), and a load is a constant to autodiff.
#include "prims/Prim.h"

#include <algorithm>

namespace shmapc::prims {

namespace {

// load, save, savez: exactly one of `path` (a string) and `path_arg` (an int), and a dtype
// .npy has (not bf16); save and savez only on the host.
bool fileShape(ShapeCtx &c, const Type *t) {
  const Eqn &e = c.e;
  int64_t index;
  if (e.has("path") == e.has("path_arg")) return c.fail("needs exactly one of path and path_arg");
  if (e.has("path") && !std::holds_alternative<std::string>(e.params.at("path")))
    return c.fail("path must be a string");
  if (e.has("path_arg") && !c.param("path_arg", index)) return false;
  if (t && t->dtype == DType::BF16) return c.fail(".npy has no bfloat16 dtype: " + typeText(*t));
  if (e.prim != Prim::Load && c.f.mesh) return c.fail("file output inside a shmap body");
  return true;
}

// The path argument of the runtime's file calls: a literal or a str program argument's value
// (runtime/cli.cpp).
llvm::Value *pathArg(FuncEmitter &fe, const Eqn &e) {
  return e.has("path_arg") ? static_cast<llvm::Value *>(fe.callRt("shm_arg_str", {fe.i32(e.intParam("path_arg"))}))
                           : fe.me.cString(e.strParam("path"));
}

// (path, dtype, rank, shape) arguments of the runtime's npy calls.
std::vector<llvm::Value *> fileArgs(FuncEmitter &fe, const Eqn &e, const Type &t) {
  return {pathArg(fe, e), fe.dtypeCode(t.dtype), fe.i32(t.rank()), fe.me.i64Array(t.shape)};
}

} // namespace

template <> const Rules &define<Prim::Print>() {
  static const Rules r{
      .shape = [](ShapeCtx &) { return true; },  // any operand, no result
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
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

// Writes version 1 through a temporary file and a rename.
template <> const Rules &define<Prim::Save>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) { return fileShape(c, &c.in(0)); },
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
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

// savez(path, k1=x1, ...): a stored zip archive of members k1.npy, ... (numpy's np.savez),
// written through a temporary file and a rename. `keys` holds the names joined by ','.
template <> const Rules &define<Prim::SaveNpz>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // one key per operand
        size_t keys = 0;
        auto it = c.e.params.find("keys");
        const std::string *k = it == c.e.params.end() ? nullptr : std::get_if<std::string>(&it->second);
        if (k && !k->empty()) keys = 1 + (size_t)std::count(k->begin(), k->end(), ',');
        if (keys != c.numIns()) return c.fail("needs one key per operand");
        for (size_t i = 0; i < c.numIns(); ++i)
          if (!fileShape(c, &c.in(i))) return false;
        return c.numIns() > 0 || fileShape(c, nullptr);
      },
      .variance = VarianceRule::Effect,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        std::vector<std::string> keys;
        const std::string &joined = e.strParam("keys");
        for (size_t start = 0; !joined.empty();) {
          size_t comma = joined.find(',', start);
          keys.push_back(joined.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
        if (keys.size() != e.ins.size()) return fe.fail("savez: one key per operand expected");
        std::vector<llvm::Constant *> names;
        std::vector<llvm::Value *> data;
        std::vector<int32_t> dtypes, ranks;
        std::vector<int64_t> shapes;
        for (size_t k = 0; k < keys.size(); ++k) {
          const Type &t = e.ins[k]->type;
          names.push_back(fe.me.cString(keys[k]));
          data.push_back(fe.buffer(e.ins[k]));
          dtypes.push_back((int32_t)t.dtype);
          ranks.push_back((int32_t)t.rank());
          shapes.insert(shapes.end(), t.shape.begin(), t.shape.end());
        }
        if (e.has("checkpoint")) {  // each array's layout: null (whole) or its blocks' (Blocks.cpp)
          std::vector<llvm::Constant *> layouts;
          for (const Value *v : e.ins) {
            const codegen::ShmapLayout *layout = fe.me.blocksLayout(v);
            if (!layout) {
              layouts.push_back(llvm::ConstantPointerNull::get(llvm::PointerType::get(fe.me.ctx, 0)));
              continue;
            }
            const ir::Mesh &mesh = *fe.me.irm.meshes[(size_t)layout->mesh];
            std::vector<int64_t> l = {(int64_t)mesh.sizes.size()};
            l.insert(l.end(), mesh.sizes.begin(), mesh.sizes.end());
            for (int32_t x : codegen::encodeSpec(layout->spec, v->type.rank())) l.push_back(x);
            layouts.push_back(fe.me.i64Array(l));
          }
          fe.callRt("shm_save_checkpoint", {pathArg(fe, e), fe.i32((int64_t)keys.size()), fe.me.constPtrArray(names),
                                            fe.me.i32Array(dtypes), fe.me.i32Array(ranks), fe.me.i64Array(shapes),
                                            fe.me.constPtrArray(layouts), fe.ptrArray(data)});
          return true;
        }
        fe.callRt("shm_save_npz", {pathArg(fe, e), fe.i32((int64_t)keys.size()), fe.me.constPtrArray(names),
                                   fe.me.i32Array(dtypes), fe.me.i32Array(ranks), fe.me.i64Array(shapes),
                                   fe.ptrArray(data)});
        return true;
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

// The runtime checks the file's dtype and shape against the static type and fails naming the
// file (and key) and what differs. With `key` it reads the array of an .npz archive. With
// `spec` (inside a shmap body) the out type is this device's block: the global type is the
// block's shape times the sizes of the mesh axes the spec splits each dimension over, and each
// device reads only its own block from the file (shm_load_npy_sharded).
template <> const Rules &define<Prim::Load>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        // The declared type (the runtime checks the file against it). With `spec` (only under a
        // mesh) it is this device's block: the spec must fit the rank and name each mesh axis once.
        if (!fileShape(c, &c.declared())) return false;
        if (!c.e.has("spec")) {
          if (c.f.mesh) return c.fail("a load without a spec inside a shmap body");
          return c.out(c.declared());
        }
        std::vector<PartitionSpec> spec;
        if (!c.f.mesh) return c.fail("a sharded load (spec) outside a shmap body");
        if (!c.param("spec", spec)) return false;
        if (spec.size() != 1) return c.fail("spec must hold one partition spec");
        Type global = c.declared(), block;
        for (size_t d = 0; d < spec[0].dims.size() && d < global.shape.size(); ++d)
          for (int a : spec[0].dims[d])
            if (a >= 0 && a < (int)c.f.mesh->sizes.size() && !scaleDim(global.shape[d], c.f.mesh->sizes[a]))
              return c.fail("the global size overflows");
        return c.block(global, spec[0], *c.f.mesh, "spec", block) && c.out(block);
      },
      .variance = VarianceRule::Sharded,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &t = e.outs[0]->type;
        llvm::Value *key = e.has("key") ? static_cast<llvm::Value *>(fe.me.cString(e.strParam("key")))
                                        : llvm::ConstantPointerNull::get(llvm::PointerType::get(fe.me.ctx, 0));
        if (e.has("spec")) {
          const PartitionSpec &spec = e.specsParam("spec")[0];
          if (!fe.f.mesh || (int64_t)spec.dims.size() > t.rank())
            return fe.fail("load: a spec needs a function with a mesh and may not be longer than the rank");
          std::vector<int64_t> global = t.shape;
          for (size_t d = 0; d < spec.dims.size(); ++d)
            for (int a : spec.dims[d]) global[d] *= fe.f.mesh->sizes[a];
          fe.callRt("shm_load_npy_sharded", {fe.dev, pathArg(fe, e), key, fe.dtypeCode(t.dtype), fe.i32(t.rank()),
                                             fe.me.i64Array(global), fe.me.i32Array(codegen::encodeSpec(spec, t.rank())),
                                             fe.buffer(e.outs[0])});
          return true;
        }
        if (e.has("checkpoint") || fe.me.blocksLayout(e.outs[0])) {
          // From a checkpoint: the rank's blocks or the whole array, whatever layout wrote it;
          // from a file, an array kept as blocks: only the rank's blocks, into its slots (Blocks.cpp).
          const codegen::FuncEmitter::BlocksArgs b = fe.blocksArgs(e.outs[0]);
          fe.callRt(e.has("checkpoint") ? "shm_load_checkpoint" : "shm_load_npy_blocks",
                    {pathArg(fe, e), key, b.dtype, b.rank, b.shape, b.meshRank, b.meshSizes, b.spec,
                     fe.buffer(e.outs[0])});
          return true;
        }
        if (const codegen::ShmapLayout *layout = fe.me.splitLayout(e.outs[0])) {
          // Only shmaps read it: under MPI each rank reads its devices' blocks (forms/HostForms.cpp).
          const ir::Mesh &mesh = *fe.me.irm.meshes[(size_t)layout->mesh];
          fe.callRt("shm_load_npy_split",
                    {pathArg(fe, e), key, fe.dtypeCode(t.dtype), fe.i32(t.rank()), fe.me.i64Array(t.shape),
                     fe.i32((int64_t)mesh.sizes.size()), fe.me.i64Array(mesh.sizes),
                     fe.me.i32Array(codegen::encodeSpec(layout->spec, t.rank())), fe.buffer(e.outs[0])});
          return true;
        }
        std::vector<llvm::Value *> args = fileArgs(fe, e, t);
        if (e.has("key")) args.insert(args.begin() + 1, key);
        args.push_back(fe.buffer(e.outs[0]));
        fe.callRt(e.has("key") ? "shm_load_npz" : "shm_load_npy", args);
        return true;
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

// A numeric or bool program argument's value (--NAME=VALUE, else the declared default), read
// from the runtime's parsed table.
template <> const Rules &define<Prim::ArgValue>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // the declared scalar of the program argument `index`
        int64_t index;
        if (!c.param("index", index)) return false;
        if (index < 0 || c.declared().rank() != 0) return c.fail("must be a scalar of a program argument");
        return c.out(c.declared());
      },
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
      .sharding = replicatedFactors,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
