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
 * binary16), 6 = bf16 (bfloat16); f16 and bf16 are 16-bit patterns (runtime/half.h): kernels
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

/* ---- memory (64-byte aligned; never returns NULL: aborts with a message on exhaustion) */
void *shm_alloc(int64_t bytes);
void shm_free(void *p);

/* ---- shmap: run `body` on every device of the mesh, one thread per device.
 * Splits each global input by its spec into per-device blocks, calls body(dev, block_outs,
 * block_ins) on each device, then assembles every global output from the blocks by its out
 * spec (for mesh axes an out spec leaves unmapped, the block of the device with coordinate 0
 * on those axes is used). */
typedef struct {
  int32_t rank;
  const int64_t *shape;   /* global shape */
  int32_t dtype;
  const int32_t *spec;    /* encoded partition spec, see above */
  int32_t flags;          /* outputs: SHM_OUT_COLLECTIVE_ONLY | SHM_OUT_SAME_ELSEWHERE |
                             SHM_OUT_STAYS_SPLIT, or 0 */
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

void shm_run_shmap(int32_t mesh_rank, const int64_t *mesh_sizes, const char *const *axis_names,
                   shm_fn body, int32_t nin, void **ins, const shm_array_desc *in_descs,
                   int32_t nout, void **outs, const shm_array_desc *out_descs);

/* fn(args, lo, hi) for a split of [0, n) into ranges, together covering it once. On the host
 * (between shmap calls, when the device threads are idle) the ranges run on up to as many
 * threads as the process may use cores; on a device thread, or for small n, fn(args, 0, n).
 * fn must compute each element independently of the split (compiled element-wise loops). */
void shm_parallel_for(void (*fn)(void *args, int64_t lo, int64_t hi), void *args, int64_t n);

/* ---- collectives (call from inside a shmap body on every device of the collective's group
 * (the devices sharing every coordinate not in `axes`), in the same order within the group;
 * other groups may run other collectives meanwhile; `in` and `out` never alias). Shapes are the per-device block shapes (`rank`
 * dimensions at `shape`); the element-wise ones (all-reduces, ppermute, broadcast, reduce)
 * read only their element count from them, and --trace shows them. */
/* The source location of a collective: before calling one, emitted code stores a pointer to a
 * constant string "file:line:col" (the collective's place in the program) into the first word
 * of `dev` (shm_device's first member is `const char *`); the collective takes it, and clears
 * it, for the watchdog's report of a collective that waits too long (docs/runtime.md, "Stuck
 * collectives"). A caller that stores nothing gets a report without a location. */
void shm_psum(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
              const int64_t *shape, const int32_t *axes, int32_t naxes);
void shm_pmax(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
              const int64_t *shape, const int32_t *axes, int32_t naxes);
void shm_pmin(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
              const int64_t *shape, const int32_t *axes, int32_t naxes);
/* the product over the group (integers wrap, as numpy's); and the bitwise and, or, xor of
 * integers and bools (of a bool: logical) */
void shm_pprod(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
               const int64_t *shape, const int32_t *axes, int32_t naxes);
void shm_pbitwise(shm_device *dev, int32_t op, int32_t dtype, const void *in, void *out, int32_t rank,
                  const int64_t *shape, const int32_t *axes, int32_t naxes);
/* untiled: out has a new dimension of size n (group size) at `axis`; tiled: dimension `axis`
 * of out is n times that of in. */
void shm_all_gather(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
                    const int64_t *in_shape, int32_t axis, int32_t tiled, const int32_t *axes,
                    int32_t naxes);
/* the sum over the group, of which this device keeps block k (its group index) of dimension
 * `dim`; untiled: in_shape[dim] == n and that dimension is removed. */
void shm_psum_scatter(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
                      const int64_t *in_shape, int32_t dim, int32_t tiled, const int32_t *axes,
                      int32_t naxes);
/* JAX all_to_all: split `split_axis` into n blocks, block k goes to group member k, received
 * blocks are concatenated along `concat_axis` in sender order. Untiled: in_shape[split_axis]
 * == n and is removed, and a new axis of size n is inserted at `concat_axis` of the output. */
void shm_all_to_all(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
                    const int64_t *in_shape, int32_t split_axis, int32_t concat_axis,
                    int32_t tiled, const int32_t *axes, int32_t naxes);
/* pairs = {src0, dst0, src1, dst1, ...} (group indices); a device nobody sends to gets zeros. */
void shm_ppermute(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
                  const int64_t *shape, const int64_t *pairs, int32_t npairs, const int32_t *axes,
                  int32_t naxes);
int32_t shm_axis_index(shm_device *dev, const int32_t *axes, int32_t naxes);
/* Rooted collectives (`root`: a group index). broadcast: every member's out is the root's in.
 * reduce: the root's out is the reduction of every member's in (SHM_REDUCE_*, member order, as
 * the all-reduces fold), the other members' out zeros. gather: the root's out is every member's
 * in along `axis` (all_gather's layout), the others' zeros. scatter: member k's out is block k
 * of the root's in along `dim` (psum_scatter's blocks). */
void shm_broadcast(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank, const int64_t *shape,
                   int32_t root, const int32_t *axes, int32_t naxes);
void shm_reduce_to(shm_device *dev, int32_t op, int32_t dtype, const void *in, void *out, int32_t rank,
                   const int64_t *shape, int32_t root, const int32_t *axes, int32_t naxes);
void shm_gather_to(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank, const int64_t *in_shape,
                   int32_t axis, int32_t tiled, int32_t root, const int32_t *axes, int32_t naxes);
void shm_scatter_from(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank, const int64_t *in_shape,
                      int32_t dim, int32_t tiled, int32_t root, const int32_t *axes, int32_t naxes);

/* ---- kernels (host or device; no communication) */
void shm_broadcast_in_dim(int32_t dtype, const void *in, int32_t in_rank, const int64_t *in_shape,
                          void *out, int32_t out_rank, const int64_t *out_shape,
                          const int64_t *bdims);
void shm_transpose(int32_t dtype, const void *in, int32_t rank, const int64_t *in_shape,
                   const int64_t *perm, void *out);
/* axes: sorted list of dimensions to reduce; they are removed from the output */
void shm_reduce(int32_t dtype, int32_t op, const void *in, int32_t rank, const int64_t *shape,
                const int64_t *axes, int32_t naxes, void *out);
/* lhs [batch, m, k] x rhs [batch, k, n] -> out [batch, m, n]; with trans_lhs the lhs is
 * stored [batch, k, m] (each block transposed), with trans_rhs the rhs [batch, n, k]: BLAS's
 * transpose flags, so a matmul of a transposed operand needs no transposed copy. */
void shm_matmul(int32_t dtype, const void *lhs, const void *rhs, void *out, int64_t batch,
                int64_t m, int64_t k, int64_t n, int32_t trans_lhs, int32_t trans_rhs);
void shm_slice(int32_t dtype, const void *in, int32_t rank, const int64_t *shape,
               const int64_t *start, const int64_t *limit, const int64_t *strides, void *out);
/* start indices are clamped into range as in JAX */
void shm_dynamic_slice(int32_t dtype, const void *in, int32_t rank, const int64_t *shape,
                       const int64_t *start, const int64_t *sizes, void *out);
/* out = copy of in with `upd` written at (clamped) start */
void shm_dynamic_update_slice(int32_t dtype, const void *in, int32_t rank, const int64_t *shape,
                              const void *upd, const int64_t *upd_shape, const int64_t *start,
                              void *out);
/* shapes: n arrays' shapes flattened (n * rank entries) */
void shm_concatenate(int32_t dtype, int32_t n, const void *const *ins, int32_t rank,
                     const int64_t *shapes, int32_t axis, void *out);
void shm_iota(int32_t dtype, void *out, int32_t rank, const int64_t *shape, int32_t dim);
/* Deterministic across runs and machines; the generator is documented in docs/numerics.md */
void shm_random(int32_t dtype, int32_t kind, int64_t seed, void *out, int64_t n);
/* sin and cos of |x| >= 2^20 (the compiler's math functions, compiler/codegen/MathTrig.cpp):
 * x = j pi/2 + *hi + *lo exactly reduced, |*hi| <= pi/4; returns j mod 4 (math_reduce.cpp) */
int32_t shm_rem_pio2(double x, double *hi, double *lo);
void shm_copy(void *dst, const void *src, int64_t bytes);

/* ---- along one axis of an array viewed as [outer, n, inner] (runtime/indexing.cpp).
 * Indices are i32 in [-n, n) (negative from the end, as numpy); others are a runtime error.
 * gather: out [outer, m, inner] = x[:, idx[j], :]; scatter_add: out = x, then
 * out[:, idx[j], :] += v[:, j, :] (v is [outer, m, inner]); argmax (is_min: argmin): the
 * first index of the extremum, NaN counting as the extremum; cumsum: running sums. */
void shm_gather(int32_t dtype, const void *x, int64_t outer, int64_t n, int64_t inner,
                const int32_t *idx, int64_t m, void *out);
void shm_scatter_add(int32_t dtype, const void *x, int64_t outer, int64_t n, int64_t inner,
                     const int32_t *idx, int64_t m, const void *v, void *out);
void shm_argmax(int32_t dtype, int32_t is_min, const void *x, int64_t outer, int64_t n,
                int64_t inner, int32_t *out);
void shm_cumsum(int32_t dtype, int32_t reverse, const void *x, int64_t outer, int64_t n,
                int64_t inner, void *out);
/* argsort: stable, ascending (descending: of the negated keys), NaN last, as numpy's. */
void shm_argsort(int32_t dtype, int32_t descending, const void *x, int64_t outer, int64_t n,
                 int64_t inner, int32_t *out);

/* ---- printing, in the fixed format of docs/language.md */
void shm_print(const char *label, int32_t dtype, int32_t rank, const int64_t *shape,
               const void *data);

/* ---- numpy .npy files and .npz archives (runtime/npy.cpp). load fills `out` (dense, of the
 * given dtype and shape) from the file, after checking that its dtype and shape are exactly
 * these; save writes version 1 through a temporary file and a rename. Any problem: shm_fatal
 * naming the file (and for an archive the key). */
void shm_load_npy(const char *path, int32_t dtype, int32_t rank, const int64_t *shape, void *out);
/* the array `key` of an .npz archive (member key.npy; stored or deflated) */
void shm_load_npz(const char *path, const char *key, int32_t dtype, int32_t rank,
                  const int64_t *shape, void *out);
/* The block [block_start, block_start + block_shape) of the array (global_shape, checked
 * against the file as above) into `out` (dense, block_shape), reading only the header and the
 * block's bytes (a deflated archive member is inflated as a stream). key: NULL for a .npy
 * file, else the array of an .npz archive. */
void shm_load_npy_block(const char *path, const char *key, int32_t dtype, int32_t rank,
                        const int64_t *global_shape, const int64_t *block_start,
                        const int64_t *block_shape, void *out);
/* In a shmap body: this device's block under the partition spec (encoded as above), as
 * shm_run_shmap would split the global array; `out` has the block shape. */
void shm_load_npy_sharded(shm_device *dev, const char *path, const char *key, int32_t dtype,
                          int32_t rank, const int64_t *global_shape, const int32_t *spec,
                          void *out);
/* On the host, an array that only shmaps read, as partition spec `spec` (encoded as above) of
 * the mesh (mesh_rank axes of mesh_sizes) splits it: under MPI each rank reads the blocks of
 * its own devices into their places in `out` (the global shape), and leaves the rest; one
 * process reads it whole. key: NULL for a .npy file. */
void shm_load_npy_split(const char *path, const char *key, int32_t dtype, int32_t rank,
                        const int64_t *shape, int32_t mesh_rank, const int64_t *mesh_sizes,
                        const int32_t *spec, void *out);
void shm_save_npy(const char *path, int32_t dtype, int32_t rank, const int64_t *shape,
                  const void *data);
/* numpy's savez: a stored zip archive of members keys[i].npy (arrays i: dtypes[i], ranks[i],
 * their shapes one after the other in `shapes`, data[i]); no zip64, so every member and the
 * whole archive must stay under 4 GiB (shm_fatal otherwise, before anything is written). */
void shm_save_npz(const char *path, int32_t n, const char *const *keys, const int32_t *dtypes,
                  const int32_t *ranks, const int64_t *shapes, const void *const *data);

/* ---- program arguments (`arg lr: f32 = 0.1;`), parsed by the runtime's main from --NAME=VALUE
 * (runtime/cli.cpp): the value of argument i as a double, an integer (i32 and bool) or a string */
double shm_arg_f64(int32_t i);
int64_t shm_arg_i64(int32_t i);
const char *shm_arg_str(int32_t i);

/* ---- runtime errors (e.g. a device thread fails): prints `shmap runtime error: msg`, exits 2 */
void shm_fatal(const char *msg);

/* ---- the start-up check (emitted as a constructor that runs before anything else): exits 2
 * with `shmap runtime error: this program was compiled for CPU ...` if this CPU lacks one of
 * `features` (comma-separated, LLVM's names: "avx2,avx512f"), which the program's code uses.
 * `target` is what --target-cpu said ("native", "x86-64-v3", "znver4"), `cpu` LLVM's CPU name. */
void shm_check_cpu(const char *target, const char *cpu, const char *features);

/* provided by the emitted code */
void shm_user_main(shm_device *dev, void **outs, void **ins);

#ifdef __cplusplus
}
#endif
#endif
