// --emit=plan: codegen's decisions for each function, recorded where the code generator makes
// them while it emits the LLVM IR (FuncEmitter::plan and planArena, the primitives' lowering
// rules), so that the view shows what the generated code does rather than a second account
// of it: the fused element-wise loops, where each value's bytes live (the storage plan, the
// arena's offsets and which values share its bytes), the values written in place, and the
// runtime kernel each matmul calls with its dimensions and the library kernel that computes it
// (matmulKernelWords). Recording changes no code.
#pragma once
#include "ir/IR.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace shmapc::codegen {

// Where an IR value's bytes live inside the LLVM function of its Func.
enum class StorageKind {
  Param,    // ins[i]: read only
  OutSlot,  // outs[i]: computed directly into the caller's result buffer
  Alias,    // the buffer of another value (reshape / pbroadcast: same bytes)
  Global,   // a constant global (a constant with a full value list)
  Fused,    // no buffer: lives in registers inside a fused element-wise loop
  Stack,    // a small alloca in the entry block
  Heap,     // at an offset in the function's arena (FuncEmitter::planArena)
  InPlace,  // written by a fused loop over the bytes of an input that dies there (FuncEmitter::donor)
  Blocks,   // the rank's blocks of a split value (ModuleEmitter::blocksLayout): its own allocation,
            // of a size known at run time, freed on return
};

struct Storage {
  StorageKind kind = StorageKind::Heap;
  int slot = -1;                       // Param / OutSlot index
  const ir::Value *aliasOf = nullptr;  // Alias, InPlace: the value whose buffer is shared
  int64_t offset = 0;                  // Alias: where in aliasOf's buffer (bytes; a slice's view)
};

// One arena value: its bytes [offset, offset + bytes) are its own from eqn `first` to eqn
// `last` (both included; the fused loop or single eqn that defines it to the one that last
// reads it), and may be another value's outside that span.
struct ArenaSlot {
  const ir::Value *value = nullptr;
  size_t first = 0, last = 0;
  int64_t offset = 0, bytes = 0;
};

// A runtime kernel an equation's lowering calls, in words ("shm_matmul f32, m 8, ...").
struct KernelCall {
  size_t eqn = 0;
  std::string call;
};

struct FuncPlan {
  const ir::Func *func = nullptr;
  std::vector<std::pair<size_t, size_t>> groups;  // the fused loops' eqn ranges, in order
  std::unordered_map<const ir::Value *, Storage> storage;
  std::vector<ArenaSlot> arena;  // in definition order
  int64_t arenaBytes = 0;        // one shm_alloc of this many bytes per call (0: none)
  // The blocks arena (values in the blocks form): its slots, and its bytes where one process
  // runs every device (under MPI a rank's share); one more allocation per call where it has any.
  int64_t blocksSlots = 0, blocksBytesOneProcess = 0;
  // Values kept by one pipeline group's ranks (ModuleEmitter::groupOwner): the group.
  std::unordered_map<const ir::Value *, int> keptByGroup;
  std::vector<KernelCall> kernels;
};

struct Plan {
  std::vector<FuncPlan> funcs;  // in the order codegen emits them (ir::Module::funcs)
};

// The plan as text, values named as --emit=ir names them.
std::string printPlan(const ir::Module &m, const Plan &plan);

// The library kernel that shm_matmul(dtype, batch, m, k, n) runs and how it splits the work, in
// words ("oneDNN sgemm (OpenBLAS sgemm with SHMAP_BLAS=openblas), 2 column panels of 512"):
// the runtime's own choice (runtime/abi/matmul_kernels.h), made here from the static sizes.
std::string matmulKernelWords(ir::DType dtype, int64_t batch, int64_t m, int64_t k, int64_t n);

} // namespace shmapc::codegen
