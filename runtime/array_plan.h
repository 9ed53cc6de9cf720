// How a shmap operand, or a host value kept as blocks, maps onto a mesh (private header).
//
// A value in the blocks form (SHM_BLOCKS) is the rank's share of a global array: one slot
// per distinct block its devices hold, in the order of the first local device holding each.
// One process holds every block once (the global array's bytes, in another order); under MPI
// a rank holds only its devices' blocks, so a model split over N ranks costs each 1/N.
#ifndef SHMAP_RUNTIME_ARRAY_PLAN_H
#define SHMAP_RUNTIME_ARRAY_PLAN_H
#include "device.h"

#include <memory>
#include <vector>

namespace shm {

struct ArrayPlan {
  int32_t rank = 0;
  int32_t dtype = 0;
  int64_t esize = 0;
  int64_t gshape[kMaxRank], bshape[kMaxRank];
  int64_t gstrides[kMaxRank], bstrides[kMaxRank];
  int naxes[kMaxRank];                // mesh axes each dimension is split over
  int32_t axes[kMaxRank][kMaxMeshRank]; // ... major to minor
  bool mentioned[kMaxMeshRank];       // does the spec name this mesh axis?
  bool whole = true;                  // no dimension split: the block is the global array
  bool contiguous = true;             // every device's block is one run of the global array
  bool collective_only = false;       // written only by an all-reduce or all_gather (SHM_OUT_...)
  bool same_elsewhere = false;        // SHM_OUT_SAME_ELSEWHERE
  bool stays_split = false;           // SHM_OUT_STAYS_SPLIT
  bool blocks = false;                // SHM_BLOCKS: the buffer holds the rank's slots
  bool over_input = false;            // SHM_OUT_OVER_INPUT: written once every body has finished
  int64_t block_bytes = 0;
  // The blocks form: each slot's block offset in the global array (elements) and its first
  // local device; each local device's slot (by id - first).
  std::vector<int64_t> slot_offset;
  std::vector<int> slot_device, slot_of;
};

// `kind` and `index` name the operand in errors ("input", 2).
ArrayPlan plan_array(const MeshCall &c, const shm_array_desc &d, const char *kind, int index);
// Where a device's block starts in each dimension of the global array.
void block_start(const ArrayPlan &p, const MeshCall &c, const int64_t *coords, int64_t *start);
// Element offset of a device's block inside the global array.
int64_t block_offset(const ArrayPlan &p, const MeshCall &c, const int64_t *coords);
// The device that provides an output's block: coordinate 0 on every axis the spec leaves out.
bool is_writer(const ArrayPlan &p, const MeshCall &c, const int64_t *coords);
// The devices of a mesh this process runs (all of them, or under MPI the rank's share).
std::unique_ptr<MeshCall> local_call(int32_t mesh_rank, const int64_t *mesh_sizes, const char *what);
// The slots of the blocks form (fills slot_offset, slot_device, slot_of).
void plan_slots(ArrayPlan &p, const MeshCall &c);
// The plan of an array in the blocks form of `spec` (`what` names it in errors).
ArrayPlan blocks_plan(const MeshCall &c, int32_t dtype, int32_t rank, const int64_t *shape, const int32_t *spec,
                      const char *what);
// fn(slot, start) for each slot of the blocks form: its index and where its block starts.
template <class F> void for_each_slot(const ArrayPlan &p, const MeshCall &c, F fn) {
  int64_t coords[kMaxMeshRank], start[kMaxRank];
  for (size_t s = 0; s < p.slot_offset.size(); ++s) {
    coords_of(c, p.slot_device[s], coords);
    block_start(p, c, coords, start);
    fn(s, start);
  }
}
// Under SHMAP_LOG_RANKS=1, the most bytes the host held as blocks at once (shm_blocks_alloc):
// a rank's share of the parameters and optimizer state kept on the devices, and of what else
// stayed split (gradients).
void blocks_report();

} // namespace shm
#endif
