// --emit=plan: the text of the decisions FuncEmitter recorded (Plan.h), one block per
// function in the order codegen emits them (tests/ir/emit_plan.smp works one out by hand):
//
//   func @main: arena 1920 bytes (one allocation a call)
//     fused loop 0: eqns 1-5: %0 = constant, %1 = mul, %2 = constant, %3 = add, b = exp
//     kernel: eqn 7 p = matmul: shm_matmul f32, batch 1, m 4, k 8, n 16 -> OpenBLAS sgemm
//     in place: b over a (fused loop 0)
//     values:
//       a:f32[4,8]    arena [0, 128)
//       %0:f32[4,8]   fused in loop 0 (no buffer)
//       b:f32[4,8]    in place: the bytes of a
//       ...
//     arena:
//       [0, 128)     a:f32[4,8]    live eqns 0-7
//       [0, 256)     %5:f32[16,4]  live eqns 9-10, reuses the bytes of a, %4
//
// Equations are numbered from 0 in their function's order (as --emit=ir lists them), values
// named as --emit=ir names them. The arena lists each value's bytes and the span of eqns it
// holds them, and which values last held them before it (values that share bytes). A matmul's
// kernel line names the library kernel the runtime will run for its sizes (matmulKernelWords).
#include "codegen/Plan.h"

#include "matmul_kernels.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

namespace shmapc::codegen {

namespace {

class PlanPrinter {
public:
  PlanPrinter(const ir::Module &m, std::ostringstream &out) : names_(ir::printedNames(m)), out_(out) {
    for (const auto &f : m.funcs)
      for (const ir::Eqn &e : f->eqns)
        if (e.prim == ir::Prim::Pipeline) stagePrograms_.insert(e.bodies.begin(), e.bodies.end());
  }

  void func(const FuncPlan &p) {
    const ir::Func &f = *p.func;
    keptByGroup_ = &p.keptByGroup;
    out_ << (f.isShmapBody ? "shmap_body @" : "func @") << f.name;
    if (f.mesh) out_ << " mesh " << f.mesh->name;
    if (f.isNested) out_ << " (a loop body or branch)";
    if (p.arenaBytes) out_ << ": arena " << p.arenaBytes << " bytes (one allocation a call)\n";
    else out_ << ": no arena\n";
    if (p.blocksSlots)
      out_ << "  blocks arena: " << p.blocksSlots << " slot" << (p.blocksSlots == 1 ? "" : "s") << ", "
           << p.blocksBytesOneProcess << " bytes where one process runs every device (under MPI a rank's "
           << "blocks only; one allocation a call)\n";
    groupOf_.assign(f.eqns.size(), -1);
    for (size_t g = 0; g < p.groups.size(); ++g) {
      const auto &[first, last] = p.groups[g];
      out_ << "  fused loop " << g << ": " << eqns(first, last) << ":";
      for (size_t i = first; i <= last; ++i) {
        groupOf_[i] = (int)g;
        out_ << (i == first ? " " : ", ") << eqn(f.eqns[i]);
      }
      out_ << "\n";
    }
    for (const KernelCall &k : p.kernels)
      out_ << "  kernel: eqn " << k.eqn << " " << eqn(f.eqns[k.eqn]) << ": " << k.call << "\n";
    slotOf_.clear();
    for (const ArenaSlot &a : p.arena) slotOf_[a.value] = &a;
    forEachValue(f, [&](const ir::Value *v, size_t def) {
      auto s = p.storage.find(v);
      if (s == p.storage.end() || s->second.kind != StorageKind::InPlace) return;
      auto over = p.storage.find(s->second.aliasOf);
      out_ << "  in place: " << name(v) << " over " << name(s->second.aliasOf);
      if (over != p.storage.end() && over->second.kind == StorageKind::Param && f.isShmapBody)
        out_ << " (this device's block of a loop's carry, updated in place)\n";
      else if (over != p.storage.end() && over->second.kind == StorageKind::Param && stagePrograms_.count(&f))
        out_ << (def < f.eqns.size() && f.eqns[def].prim == ir::Prim::Shmap
                     ? " (the group's update of a loop's carry, written over it by its devices once all have read it)\n"
                     : " (the group's update of a loop's carry, written over it)\n");
      else if (over != p.storage.end() && over->second.kind == StorageKind::Param)
        out_ << " (a loop's carry: one buffer for its old and new value)\n";
      else if (def < f.eqns.size() && (f.eqns[def].prim == ir::Prim::Loop || f.eqns[def].prim == ir::Prim::While))
        out_ << " (the loop starts from it and takes its buffer)\n";
      else
        out_ << " (fused loop " << (def < f.eqns.size() ? groupOf_[def] : -1) << ")\n";
    });
    out_ << "  values:\n";
    size_t width = 0;
    forEachValue(f, [&](const ir::Value *v, size_t) { width = std::max(width, typed(v, f).size()); });
    forEachValue(f, [&](const ir::Value *v, size_t def) {
      out_ << "    " << padded(typed(v, f), width) << "  ";
      auto s = p.storage.find(v);
      if (s == p.storage.end()) {
        out_ << "unplanned\n";
        return;
      }
      storage(s->second, v, def < f.eqns.size() ? groupOf_[def] : -1);
      out_ << "\n";
    });
    if (p.arena.empty()) return;
    out_ << "  arena:\n";
    size_t bytesWidth = 0, typedWidth = 0;
    for (const ArenaSlot &a : p.arena) {
      bytesWidth = std::max(bytesWidth, bytes(a).size());
      typedWidth = std::max(typedWidth, typed(a.value, f).size());
    }
    // Which values last held the bytes each one takes (dead by then: the live ones never
    // overlap): the arena's byte ranges painted with their values in definition order.
    std::map<int64_t, std::pair<int64_t, const ir::Value *>> painted;  // start -> (end, value)
    for (const ArenaSlot &a : p.arena) {
      const int64_t begin = a.offset, end = a.offset + a.bytes;
      std::vector<std::string> before;
      auto it = painted.upper_bound(begin);
      if (it != painted.begin() && std::prev(it)->second.first > begin) --it;
      while (it != painted.end() && it->first < end) {
        const auto [from, held] = *it;
        const std::string previous = name(held.second);
        if (std::find(before.begin(), before.end(), previous) == before.end()) before.push_back(previous);
        it = painted.erase(it);
        if (from < begin) painted[from] = {begin, held.second};  // (the parts outside stay)
        if (held.first > end) it = painted.emplace(end, std::make_pair(held.first, held.second)).first;
      }
      painted[begin] = {end, a.value};
      out_ << "    " << padded(bytes(a), bytesWidth) << "  " << padded(typed(a.value, f), typedWidth) << "  live "
           << eqns(a.first, a.last);
      for (size_t i = 0; i < before.size(); ++i) out_ << (i ? ", " : ", reuses the bytes of ") << before[i];
      out_ << "\n";
    }
  }

private:
  template <typename F> static void forEachValue(const ir::Func &f, F visit) {
    for (const ir::Value *v : f.params) visit(v, f.eqns.size());
    for (size_t i = 0; i < f.eqns.size(); ++i)
      for (const ir::Value *v : f.eqns[i].outs) visit(v, i);
  }

  void storage(const Storage &s, const ir::Value *v, int group) {
    switch (s.kind) {
    case StorageKind::Param: out_ << "param " << s.slot << " (the caller's buffer)"; break;
    case StorageKind::OutSlot: out_ << "result " << s.slot << " (computed into the caller's buffer)"; break;
    case StorageKind::Alias:
      out_ << "the bytes of " << name(s.aliasOf);
      if (s.offset) out_ << " from byte " << s.offset;
      break;
    case StorageKind::Global: out_ << "constant global"; break;
    case StorageKind::Fused: out_ << "fused in loop " << group << " (no buffer)"; break;
    case StorageKind::Stack: out_ << "stack, " << std::max<int64_t>(1, v->type.byteSize()) << " bytes"; break;
    case StorageKind::Heap:
      if (auto a = slotOf_.find(v); a != slotOf_.end()) out_ << "arena " << bytes(*a->second);
      else out_ << "arena (never written)";
      break;
    case StorageKind::InPlace: out_ << "in place: the bytes of " << name(s.aliasOf); break;
    case StorageKind::Blocks:
      if (keptByGroup_ && keptByGroup_->count(v)) out_ << "kept by pipeline group " << keptByGroup_->at(v) << "'s ranks only (sized at run time)";
      else out_ << "blocks: this rank's blocks only (sized at run time)";
      break;
    }
    if (s.kind != StorageKind::Blocks && keptByGroup_ && keptByGroup_->count(v))
      out_ << "; kept by pipeline group " << keptByGroup_->at(v) << "'s ranks only";
  }

  std::string name(const ir::Value *v) const {
    auto it = names_.find(v);
    return it == names_.end() ? "%?" : it->second;
  }
  std::string typed(const ir::Value *v, const ir::Func &f) const {
    return name(v) + ":" + ir::typeToString(v->type, f.mesh);
  }
  std::string eqn(const ir::Eqn &e) const {
    std::string s;
    for (const ir::Value *v : e.outs) s += (s.empty() ? "" : ", ") + name(v);
    return (s.empty() ? "" : s + " = ") + ir::primName(e.prim);
  }
  static std::string eqns(size_t first, size_t last) {
    return first == last ? "eqn " + std::to_string(first)
                         : "eqns " + std::to_string(first) + "-" + std::to_string(last);
  }
  static std::string padded(std::string s, size_t width) {
    s.resize(std::max(width, s.size()), ' ');
    return s;
  }
  static std::string bytes(const ArenaSlot &a) {
    return "[" + std::to_string(a.offset) + ", " + std::to_string(a.offset + a.bytes) + ")";
  }

  std::map<const ir::Value *, std::string> names_;
  std::ostringstream &out_;
  std::vector<int> groupOf_;  // the current function's eqns' fused loops (-1: none)
  std::set<const ir::Func *> stagePrograms_;  // pipelines' stage programs
  const std::unordered_map<const ir::Value *, int> *keptByGroup_ = nullptr;  // ... and its values a group keeps
  std::unordered_map<const ir::Value *, const ArenaSlot *> slotOf_;  // ... and its arena values
};

// The runtime's dtype codes are ir::DType's order (CodegenContext::dtypeCode passes it as is).
static_assert((int)ir::DType::F32 == SHM_F32 && (int)ir::DType::F64 == SHM_F64 && (int)ir::DType::I32 == SHM_I32 &&
              (int)ir::DType::Bool == SHM_BOOL && (int)ir::DType::I64 == SHM_I64 && (int)ir::DType::F16 == SHM_F16 &&
              (int)ir::DType::BF16 == SHM_BF16);

std::string kernelName(shm::MatmulKernel k, ir::DType dtype) {
  using shm::MatmulKernel;
  switch (k) {
  case MatmulKernel::None: return "nothing to compute (an empty product)";
  case MatmulKernel::Zeros: return "no kernel: k is 0, the result is zeros";
  case MatmulKernel::DnnlSgemm: return "oneDNN sgemm";
  case MatmulKernel::OpenblasSgemm: return "OpenBLAS sgemm";
  case MatmulKernel::OpenblasDgemm: return "OpenBLAS dgemm";
  case MatmulKernel::OwnLoop: return "own loop";
  case MatmulKernel::TooLarge: return "refused at run time: a dimension above 2147483647 (BLAS's int)";
  case MatmulKernel::Unsupported: return std::string("refused at run time: no matmul of ") + ir::dtypeName(dtype);
  }
  return "?";
}

// The kernel the runtime runs by default, and the one it runs instead under SHMAP_BLAS=openblas.
std::string kernelWords(shm::MatmulKernel dflt, shm::MatmulKernel openblas, ir::DType dtype) {
  std::string s = kernelName(dflt, dtype);
  if (openblas != dflt) s += " (" + kernelName(openblas, dtype) + " with SHMAP_BLAS=openblas)";
  return s;
}

} // namespace

std::string matmulKernelWords(ir::DType dtype, int64_t batch, int64_t m, int64_t k, int64_t n) {
  // oneDNN is linked into every runtime (matmul_kernels.h): only SHMAP_BLAS turns it off.
  const shm::MatmulChoice on = shm::matmul_choice((int32_t)dtype, batch, m, k, n, true);
  const shm::MatmulChoice off = shm::matmul_choice((int32_t)dtype, batch, m, k, n, false);
  std::string s = kernelWords(on.kernel, off.kernel, dtype);
  if (on.widened) s += std::string(" on the operands widened to f32, the product rounded once to ") + ir::dtypeName(dtype);
  if (on.panels > 1) {
    s += ", " + std::to_string(on.panels) + " column panels of " + std::to_string(shm::kPanel);
    if (on.last_width != shm::kPanel) s += ", the last " + std::to_string(on.last_width) + " wide";
    if (on.last_kernel != on.kernel || off.last_kernel != off.kernel)
      s += " and by " + kernelWords(on.last_kernel, off.last_kernel, dtype);
  }
  if (on.batch_shared) s += ", the batch's " + std::to_string(batch) + " products shared by the team's cores";
  return s;
}

std::string printPlan(const ir::Module &m, const Plan &plan) {
  std::ostringstream out;
  PlanPrinter printer(m, out);
  for (size_t i = 0; i < plan.funcs.size(); ++i) {
    if (i) out << "\n";
    printer.func(plan.funcs[i]);
  }
  return out.str();
}

} // namespace shmapc::codegen
