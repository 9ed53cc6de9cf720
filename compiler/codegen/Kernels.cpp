// Creation, structural primitives and print: calls into the runtime's kernels with shapes and
// int lists as pointers to constant globals.
#include "codegen/CodegenContext.h"

namespace shmapc::codegen {

// A constant with a full value list is a constant global; it is used in place (values are
// never written after they are defined) unless it must land in the caller's result buffer.
bool FuncEmitter::emitConstant(const ir::Eqn &e) {
  const ir::Value *out = e.outs[0];
  const std::vector<double> &values = e.doublesParam("value");
  if ((int64_t)values.size() != out->type.numElements())
    return fail("constant: " + std::to_string(values.size()) + " values for " +
                std::to_string(out->type.numElements()) + " elements");
  if (values.empty()) return true;
  llvm::Constant *data = me.dataArray(out->type.dtype, values);
  if (storage(out).kind == StorageKind::Global)
    setBuffer(out, data);
  else
    copyBytes(buffer(out), data, out->type.byteSize());
  return true;
}

bool FuncEmitter::emitIota(const ir::Eqn &e) {
  const ir::Type &t = e.outs[0]->type;
  callRt("shm_iota", {dtypeCode(t.dtype), buffer(e.outs[0]), i32(t.rank()), me.i64Array(t.shape),
                      i32(e.intParam("dimension"))});
  return true;
}

bool FuncEmitter::emitRandom(const ir::Eqn &e, int kind) {
  const ir::Type &t = e.outs[0]->type;
  callRt("shm_random", {dtypeCode(t.dtype), i32(kind), i64(e.intParam("seed")), buffer(e.outs[0]),
                        i64(t.numElements())});
  return true;
}

bool FuncEmitter::emitBroadcastInDim(const ir::Eqn &e) {
  const ir::Type &in = e.ins[0]->type, &out = e.outs[0]->type;
  callRt("shm_broadcast_in_dim",
         {dtypeCode(in.dtype), buffer(e.ins[0]), i32(in.rank()), me.i64Array(in.shape),
          buffer(e.outs[0]), i32(out.rank()), me.i64Array(out.shape),
          me.i64Array(e.intsParam("broadcast_dimensions"))});
  return true;
}

// reshape / pbroadcast: the bytes are unchanged, so the output usually aliases the input
// (see FuncEmitter::plan); only a result needs a real copy.
bool FuncEmitter::emitCopy(const ir::Eqn &e) {
  if (storage(e.outs[0]).kind == StorageKind::Alias) return true;
  copyBytes(buffer(e.outs[0]), buffer(e.ins[0]), e.outs[0]->type.byteSize());
  return true;
}

bool FuncEmitter::emitTranspose(const ir::Eqn &e) {
  const ir::Type &in = e.ins[0]->type;
  callRt("shm_transpose", {dtypeCode(in.dtype), buffer(e.ins[0]), i32(in.rank()),
                           me.i64Array(in.shape), me.i64Array(e.intsParam("permutation")),
                           buffer(e.outs[0])});
  return true;
}

bool FuncEmitter::emitReduce(const ir::Eqn &e, int op) {
  const ir::Type &in = e.ins[0]->type;
  const std::vector<int64_t> &axes = e.intsParam("axes");
  callRt("shm_reduce", {dtypeCode(in.dtype), i32(op), buffer(e.ins[0]), i32(in.rank()),
                        me.i64Array(in.shape), me.i64Array(axes), i32((int64_t)axes.size()),
                        buffer(e.outs[0])});
  return true;
}

bool FuncEmitter::emitMatmul(const ir::Eqn &e) {
  const ir::Type &lhs = e.ins[0]->type, &rhs = e.ins[1]->type;
  if (lhs.rank() < 2 || rhs.rank() < 2) return fail("matmul: operands must have rank >= 2");
  int64_t batch = 1;
  for (int64_t d = 0; d + 2 < lhs.rank(); ++d) batch *= lhs.shape[d];
  int64_t m = lhs.shape[lhs.rank() - 2], k = lhs.shape[lhs.rank() - 1];
  int64_t n = rhs.shape[rhs.rank() - 1];
  callRt("shm_matmul", {dtypeCode(lhs.dtype), buffer(e.ins[0]), buffer(e.ins[1]),
                        buffer(e.outs[0]), i64(batch), i64(m), i64(k), i64(n)});
  return true;
}

bool FuncEmitter::emitSlice(const ir::Eqn &e) {
  const ir::Type &in = e.ins[0]->type;
  callRt("shm_slice", {dtypeCode(in.dtype), buffer(e.ins[0]), i32(in.rank()),
                       me.i64Array(in.shape), me.i64Array(e.intsParam("start")),
                       me.i64Array(e.intsParam("limit")), me.i64Array(e.intsParam("strides")),
                       buffer(e.outs[0])});
  return true;
}

bool FuncEmitter::emitDynamicSlice(const ir::Eqn &e) {
  const ir::Type &in = e.ins[0]->type;
  std::vector<ir::Value *> starts(e.ins.begin() + 1, e.ins.end());
  if ((int64_t)starts.size() != in.rank())
    return fail("dynamic_slice: need one start index per dimension");
  callRt("shm_dynamic_slice", {dtypeCode(in.dtype), buffer(e.ins[0]), i32(in.rank()),
                               me.i64Array(in.shape), startIndices(starts),
                               me.i64Array(e.intsParam("sizes")), buffer(e.outs[0])});
  return true;
}

bool FuncEmitter::emitDynamicUpdateSlice(const ir::Eqn &e) {
  const ir::Type &in = e.ins[0]->type, &upd = e.ins[1]->type;
  std::vector<ir::Value *> starts(e.ins.begin() + 2, e.ins.end());
  if ((int64_t)starts.size() != in.rank())
    return fail("dynamic_update_slice: need one start index per dimension");
  callRt("shm_dynamic_update_slice",
         {dtypeCode(in.dtype), buffer(e.ins[0]), i32(in.rank()), me.i64Array(in.shape),
          buffer(e.ins[1]), me.i64Array(upd.shape), startIndices(starts), buffer(e.outs[0])});
  return true;
}

bool FuncEmitter::emitConcatenate(const ir::Eqn &e) {
  const ir::Type &out = e.outs[0]->type;
  std::vector<llvm::Value *> ins;
  std::vector<int64_t> shapes;
  for (const ir::Value *v : e.ins) {
    ins.push_back(buffer(v));
    shapes.insert(shapes.end(), v->type.shape.begin(), v->type.shape.end());
  }
  callRt("shm_concatenate", {dtypeCode(out.dtype), i32((int64_t)e.ins.size()), ptrArray(ins),
                             i32(out.rank()), me.i64Array(shapes), i32(e.intParam("dimension")),
                             buffer(e.outs[0])});
  return true;
}

bool FuncEmitter::emitPrint(const ir::Eqn &e) {
  const ir::Type &t = e.ins[0]->type;
  std::string label = e.has("label") ? e.strParam("label") : "";
  callRt("shm_print", {me.cString(label), dtypeCode(t.dtype), i32(t.rank()),
                       me.i64Array(t.shape), buffer(e.ins[0])});
  return true;
}

} // namespace shmapc::codegen
