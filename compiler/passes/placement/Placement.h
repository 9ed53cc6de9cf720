// Where host code's arrays live: on the host, or as the blocks a shmap left on the devices.
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

namespace shmapc::passes {

// Host code's element-wise arithmetic on arrays that shmaps left split over a mesh (an
// optimizer's update of sharded parameters from their sharded gradients) runs where the
// blocks are: each run of such equations becomes a shmap whose specs are the operands'
// layout, so every device computes its own block and the blocks need not be gathered.
void placeOnDevices(ir::Module &m, Diagnostics &diags);

} // namespace shmapc::passes
