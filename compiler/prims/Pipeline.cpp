// The pipeline stage marker. It only marks a place in a differentiated function: the
// split-micro-batches pass cuts the function there and removes it before variance typing,
// autodiff and lowering, so those rules are never asked (lowering one is a compiler bug).
#include "prims/Prim.h"

namespace shmapc::prims {

template <> const Rules &define<Prim::StageBoundary>() {
  static const Rules r{
      .shape = [](ShapeCtx &) { return true; },
      .variance = VarianceRule::Effect,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t) { return fe.fail("stage_boundary reached codegen"); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims

namespace shmapc::prims {

// Each stage program takes every operand and returns its own results; the equation's results
// are theirs in order.
template <> const Rules &define<Prim::Pipeline>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        if (c.e.bodies.empty()) return c.fail("needs a stage program per device group");
        std::vector<const Type *> ins;
        for (const Value *v : c.e.ins) ins.push_back(&v->type);
        for (const Func *b : c.e.bodies) {
          if (b->mesh) return c.fail("a stage program is host code");
          if (!c.paramsMatch(*b, ins, "stage program @" + b->name)) return false;
          for (const Value *r : b->results) c.out(r->type);
        }
        return true;
      },
      .variance = VarianceRule::Effect,
      .jvp = noTangent,  // (made after the grad it runs is resolved into steps)
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitPipeline(fe.f.eqns[i]); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

// A message's send or receive. Both ends whole: the bytes as they are; else each end's layout
// (whole or blocks) goes with it, and the runtime sends each rank only the blocks it reads.
static bool emitMessage(codegen::FuncEmitter &fe, const Eqn &e, const Value *from, const Value *to, bool send) {
  const Value *mine = send ? from : to;
  llvm::Value *channel = fe.i32(e.intParam("channel"));
  if (!from || !to || (!fe.me.blocksLayout(from) && !fe.me.blocksLayout(to))) {
    fe.callRt(send ? "shm_pipe_send" : "shm_pipe_recv", {channel, fe.buffer(mine), fe.i64(mine->type.byteSize())});
    return true;
  }
  const codegen::FuncEmitter::BlocksArgs a = fe.blocksArgs(from), b = fe.blocksArgs(to);
  fe.callRt(send ? "shm_pipe_send_blocks" : "shm_pipe_recv_blocks",
            {channel, fe.buffer(mine), a.dtype, a.rank, a.shape, a.meshRank, a.meshSizes, a.spec, b.meshRank,
             b.meshSizes, b.spec});
  return true;
}

template <> const Rules &define<Prim::PipeSend>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        int64_t channel;
        return c.param("channel", channel);
      },
      .variance = VarianceRule::Effect,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        return emitMessage(fe, e, e.ins[0], fe.me.messagePeer(e), true);
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::PipeStep>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        int64_t v;
        return c.param("kind", v) && c.param("stage", v) && c.param("mb", v) && c.param("begin", v);
      },
      .variance = VarianceRule::Effect,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        fe.callRt("shm_pipe_step", {fe.i32(e.intParam("kind")), fe.i32(e.intParam("stage")), fe.i32(e.intParam("mb")),
                                    fe.i32(e.intParam("begin"))});
        return true;
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::PipeRecv>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        int64_t channel;
        return c.param("channel", channel) && c.out(c.declared());
      },
      .variance = VarianceRule::Effect,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        return emitMessage(fe, e, fe.me.messagePeer(e), e.outs[0], false);
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
