/* The C ABI between code that shmapc emits and the runtime library (libshmap_runtime.a).
 *
 * Every emitted function has the signature  void f(shm_device *dev, void **outs, void **ins):
 * `ins[i]` points at input i's buffer, `outs[i]` at a buffer the caller allocated for result i
 * (the callee writes it). Buffers are dense, row-major, of the value's static type. `dev` is the
 * device a shmap body runs on, or NULL in host code (main and what it calls outside shmaps).
 *
 * The executable's main() lives in the runtime: it reads `--stats` / SHMAP_STATS=1, calls the
 * emitted `shm_user_main(NULL, NULL, NULL)`, and prints the collective statistics table.
 *
 * dtype codes: 0 = f32, 1 = f64, 2 = i32, 3 = bool (1 byte, 0 or 1), 4 = i64, 5 = f16 (IEEE
 * binary16), 6 = bf16 (bfloat16); f16 and bf16 are 16-bit patterns (runtime/abi/half.h): kernels
 * compute on them in f32 and round each result once.
 * Partition specs are encoded as int32 arrays: for each array dimension in order, the number of
 * mesh axes it is split over, then those axis indices (major to minor). P(("x","y"), None) on a
 * mesh (x, y) is {2, 0, 1, 0}.
 * Axis lists (`axes`, `naxes`) are mesh axis indices in the order the program listed them; a
 * device's index in the group is row-major over them.
 */
#ifndef SHMAP_RUNTIME_H
#define SHMAP_RUNTIME_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { SHM_F32 = 0, SHM_F64 = 1, SHM_I32 = 2, SHM_BOOL = 3, SHM_I64 = 4, SHM_F16 = 5, SHM_BF16 = 6 };
enum { SHM_REDUCE_SUM = 0, SHM_REDUCE_MAX = 1, SHM_REDUCE_MIN = 2 };
/* all-reduce ops only (shm_pprod, shm_pand, shm_por, shm_pxor): the last three on integers and bools */
enum { SHM_REDUCE_PROD = 3, SHM_REDUCE_AND = 4, SHM_REDUCE_OR = 5, SHM_REDUCE_XOR = 6 };
enum { SHM_RANDOM_NORMAL = 0, SHM_RANDOM_UNIFORM = 1 };

typedef struct shm_device shm_device;
typedef void (*shm_fn)(shm_device *dev, void **outs, void **ins);

/* A shmap's global input or output, for shm_run_shmap (shm_entries.def). */
typedef struct {
  int32_t rank;
  const int64_t *shape;   /* global shape */
  int32_t dtype;
  const int32_t *spec;    /* encoded partition spec, see above */
  int32_t flags;          /* outputs: SHM_OUT_COLLECTIVE_ONLY | SHM_OUT_SAME_ELSEWHERE |
                             SHM_OUT_STAYS_SPLIT | SHM_BLOCKS | SHM_OUT_OVER_INPUT,
                             inputs: SHM_BLOCKS, or 0 */
} shm_array_desc;

/* An output the body writes only as the result of an all-reduce (shm_psum, shm_pmax,
 * shm_pmin) or an all_gather, and reads nowhere: a device whose block is not used (not the
 * writer, see above) gets a null buffer for it, and the collective then gives that device
 * nothing, so the mesh holds the result once per writer instead of once per device. */
enum { SHM_OUT_COLLECTIVE_ONLY = 1 };
/* An output whose blocks are the same on every device that differs only along the mesh axes
 * its spec leaves out (the variance checker proved it: check_vma on). Under MPI each rank then
 * takes such a block from one of its own devices instead of from the writer's rank. */
enum { SHM_OUT_SAME_ELSEWHERE = 2 };
/* An output that nothing but shmaps read, with this mesh and spec, and that each rank's own
 * devices write the blocks of (shmapc proved it): under MPI the ranks keep only their blocks
 * instead of exchanging them. */
enum { SHM_OUT_STAYS_SPLIT = 4 };
/* The buffer is in the blocks form, not the global array: the rank's slots, one per distinct
 * block its devices hold under the spec, in the order of the first local device holding each
 * (shm_blocks_bytes). A device reads its slot in place; an output's slot is written by the
 * first local device holding it, and stays split (it is never exchanged). */
enum { SHM_BLOCKS = 8 };
/* An output whose buffer is also an input's (the caller updates that value in place: a
 * pipeline stage's optimizer update of its parameters): devices that share a block read it
 * while others would write it, so every device computes the output into a block of its own,
 * and the writers copy them out only once every device of this process has finished its
 * body. */
enum { SHM_OUT_OVER_INPUT = 16 };

/* The entry points: their prototypes, from the list that documents them */
#define SHM_ENTRY(Ret, Name, Sig, Params) Ret Name Params;
#include "shm_entries.def"
#undef SHM_ENTRY

#ifdef __cplusplus
}
#endif
#endif
