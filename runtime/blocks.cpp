// Host values kept as blocks (array_plan.h): their size on this rank, and the producers that
// write the blocks form directly (a load reads only the rank's blocks, random numbers are
// drawn only for them, a splat fills them) or from a global array (shm_to_blocks).
#include "array_plan.h"
#include "ranks.h"
#include "rng.h"
#include "shmap_runtime.h"
#include "util.h"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace shm {

ArrayPlan blocks_plan(const MeshCall &c, int32_t dtype, int32_t rank, const int64_t *shape, const int32_t *spec,
                      const char *what) {
  const shm_array_desc d{rank, shape, dtype, spec, SHM_BLOCKS};
  return plan_array(c, d, what, 0);
}

namespace {

// The host's allocations in the blocks form (shm_blocks_alloc): their bytes now and at most.
struct BlocksHeld {
  std::mutex m;
  std::unordered_map<void *, std::pair<int64_t, int64_t>> bytes;  // (all, kept by the rank's pipeline group)
  int64_t live = 0, peak = 0, group_live = 0, group_peak = 0;
};
BlocksHeld &held() {
  static BlocksHeld h;
  return h;
}

} // namespace

void blocks_report() {
  if (!log_ranks()) return;
  std::fprintf(stderr, "shmap ranks: rank %d: host values kept as blocks: at most %lld bytes at once\n", rank_id(),
               (long long)held().peak);
  if (held().group_peak > 0)
    std::fprintf(stderr, "shmap ranks: rank %d: host values kept by the rank's pipeline group alone: at most %lld bytes at once\n",
                 rank_id(), (long long)held().group_peak);
}

} // namespace shm

using namespace shm;

// (group_bytes: those of its bytes that hold values one pipeline group's ranks alone keep)
extern "C" void *shm_blocks_alloc(int64_t bytes, int64_t group_bytes) {
  void *p = shm_alloc(bytes);
  BlocksHeld &h = held();
  std::lock_guard<std::mutex> lock(h.m);
  h.bytes[p] = {bytes, group_bytes};
  h.live += bytes;
  h.group_live += group_bytes;
  h.peak = std::max(h.peak, h.live);
  h.group_peak = std::max(h.group_peak, h.group_live);
  return p;
}

extern "C" void shm_blocks_free(void *p) {
  {
    BlocksHeld &h = held();
    std::lock_guard<std::mutex> lock(h.m);
    auto it = h.bytes.find(p);
    if (it != h.bytes.end()) {
      h.live -= it->second.first;
      h.group_live -= it->second.second;
      h.bytes.erase(it);
    }
  }
  shm_free(p);
}

extern "C" int64_t shm_blocks_bytes(int32_t mesh_rank, const int64_t *mesh_sizes, int32_t dtype, int32_t rank,
                                    const int64_t *shape, const int32_t *spec) {
  int64_t bytes = 0;
  SHM_GUARD_BEGIN
  const std::unique_ptr<MeshCall> c = local_call(mesh_rank, mesh_sizes, "blocks");
  const ArrayPlan p = blocks_plan(*c, dtype, rank, shape, spec, "blocks of");
  bytes = p.block_bytes * (int64_t)p.slot_offset.size();
  SHM_GUARD_END("blocks")
  return bytes;
}

extern "C" void shm_to_blocks(int32_t mesh_rank, const int64_t *mesh_sizes, int32_t dtype, int32_t rank,
                              const int64_t *shape, const int32_t *spec, const void *global, void *out) {
  SHM_GUARD_BEGIN
  const std::unique_ptr<MeshCall> c = local_call(mesh_rank, mesh_sizes, "blocks");
  const ArrayPlan p = blocks_plan(*c, dtype, rank, shape, spec, "blocks of");
  for (size_t s = 0; s < p.slot_offset.size(); ++s)
    copy_strided(p.esize, p.rank, p.bshape, (const char *)global + p.slot_offset[s] * p.esize, p.gstrides,
                 (char *)out + (int64_t)s * p.block_bytes, p.bstrides);
  SHM_GUARD_END("blocks")
}

extern "C" void shm_load_npy_blocks(const char *path, const char *key, int32_t dtype, int32_t rank,
                                    const int64_t *shape, int32_t mesh_rank, const int64_t *mesh_sizes,
                                    const int32_t *spec, void *out) {
  SHM_GUARD_BEGIN
  const std::unique_ptr<MeshCall> c = local_call(mesh_rank, mesh_sizes, "load");
  const ArrayPlan p = blocks_plan(*c, dtype, rank, shape, spec, "load of");
  for_each_slot(p, *c, [&](size_t s, const int64_t *start) {
    shm_load_npy_block(path, key, dtype, rank, shape, start, p.bshape, (char *)out + (int64_t)s * p.block_bytes);
  });
  if (log_ranks())
    std::fprintf(stderr, "shmap ranks: rank %d: load %s%s%s: %lld of %lld bytes (%zu blocks)\n", rank_id(), path,
                 key ? " key " : "", key ? key : "", (long long)(p.block_bytes * (int64_t)p.slot_offset.size()),
                 (long long)(num_elements(p.rank, p.gshape) * p.esize), p.slot_offset.size());
  SHM_GUARD_END("load")
}

// Each element is drawn at its index in the global array (the generator is counter-based), so
// the blocks hold exactly what random_normal of the whole shape would put there.
extern "C" void shm_random_blocks(int32_t dtype, int32_t kind, int64_t seed, int32_t mesh_rank,
                                  const int64_t *mesh_sizes, int32_t rank, const int64_t *shape, const int32_t *spec,
                                  void *out) {
  SHM_GUARD_BEGIN
  const std::unique_ptr<MeshCall> c = local_call(mesh_rank, mesh_sizes, "random");
  const ArrayPlan p = blocks_plan(*c, dtype, rank, shape, spec, "random of");
  const int64_t n = num_elements(p.rank, p.bshape);
  const int64_t run = p.rank > 0 ? p.bshape[p.rank - 1] : 1;  // a row of the block: consecutive indices
  for_each_slot(p, *c, [&](size_t s, const int64_t *start) {
    char *slot = (char *)out + (int64_t)s * p.block_bytes;
    for (int64_t k = 0; run > 0 && k < n; k += run) {
      int64_t global = 0, rest = k;  // the global index of the row's first element
      for (int32_t d = p.rank - 1; d >= 0; --d) {
        global += (start[d] + rest % p.bshape[d]) * p.gstrides[d];
        rest /= p.bshape[d];
      }
      random_range(dtype, kind, seed, slot + k * p.esize, run, global);
    }
  });
  SHM_GUARD_END("random")
}

extern "C" void shm_fill(void *out, int64_t bytes, const void *element, int32_t element_bytes) {
  SHM_GUARD_BEGIN
  if (bytes < 0 || element_bytes <= 0 || bytes % element_bytes != 0) fatalf("fill: bad sizes");
  for (int64_t at = 0; at < bytes; at += element_bytes) std::memcpy((char *)out + at, element, (size_t)element_bytes);
  SHM_GUARD_END("fill")
}
