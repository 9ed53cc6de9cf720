// Unit tests of the runtime library: mesh execution, collectives (against a sequential
// reference written independently of the runtime's algorithms), kernels, printing, the
// random generator (against tests/numpy/shm_rng.py) and the statistics table.
#include <catch2/catch.hpp>
#include "child.h"

#include "half.h"
#include "array_plan.h"
#include "pool.h"
#include "reshard.h"
#include "shmap_runtime.h"
#include "stats.h"
#include "trace.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cblas.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define SHM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHM_TSAN 1
#endif
#endif

using Shape = std::vector<int64_t>;
using Values = std::vector<double>;

namespace {

// ---- helpers ------------------------------------------------------------------------------

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape unravel(int64_t flat, const Shape &shape) {
  Shape idx(shape.size());
  for (int d = (int)shape.size() - 1; d >= 0; --d) {
    idx[(size_t)d] = flat % shape[(size_t)d];
    flat /= shape[(size_t)d];
  }
  return idx;
}

int64_t ravel(const Shape &idx, const Shape &shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

template <typename V> V erase_at(V v, int64_t pos) {
  v.erase(v.begin() + pos);
  return v;
}
template <typename V, typename T> V insert_at(V v, int64_t pos, T x) {
  v.insert(v.begin() + pos, x);
  return v;
}

int64_t esize(int32_t dtype) {
  return dtype == SHM_F64 || dtype == SHM_I64 ? 8 : dtype == SHM_BOOL ? 1 : dtype == SHM_F16 || dtype == SHM_BF16 ? 2 : 4;
}

// A value as the dtype holds it (f16 / bf16: rounded; the references compute in double on
// the rounded inputs and round their results once, as the runtime does).
double as_dtype(double v, int32_t dtype) {
  if (dtype == SHM_F16) return shm::f16_to_f32(shm::f32_to_f16((float)v));
  if (dtype == SHM_BF16) return shm::bf16_to_f32(shm::f32_to_bf16((float)v));
  return v;
}

std::vector<unsigned char> to_bytes(const Values &v, int32_t dtype) {
  std::vector<unsigned char> b((size_t)(v.size() * esize(dtype)) + 1);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dtype) {
    case SHM_F32: ((float *)b.data())[i] = (float)v[i]; break;
    case SHM_F64: ((double *)b.data())[i] = v[i]; break;
    case SHM_I32: ((int32_t *)b.data())[i] = (int32_t)v[i]; break;
    case SHM_BOOL: b[i] = v[i] != 0; break;
    case SHM_I64: ((int64_t *)b.data())[i] = (int64_t)v[i]; break;
    case SHM_F16: ((uint16_t *)b.data())[i] = shm::f32_to_f16((float)v[i]); break;
    case SHM_BF16: ((uint16_t *)b.data())[i] = shm::f32_to_bf16((float)v[i]); break;
    }
  }
  return b;
}

Values from_bytes(const void *p, int64_t n, int32_t dtype) {
  Values v((size_t)n);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case SHM_F32: v[(size_t)i] = ((const float *)p)[i]; break;
    case SHM_F64: v[(size_t)i] = ((const double *)p)[i]; break;
    case SHM_I32: v[(size_t)i] = ((const int32_t *)p)[i]; break;
    case SHM_BOOL: v[(size_t)i] = ((const unsigned char *)p)[i]; break;
    case SHM_I64: v[(size_t)i] = (double)((const int64_t *)p)[i]; break;
    case SHM_F16: v[(size_t)i] = shm::f16_to_f32(((const uint16_t *)p)[i]); break;
    case SHM_BF16: v[(size_t)i] = shm::bf16_to_f32(((const uint16_t *)p)[i]); break;
    }
  }
  return v;
}

// Runs fn with stdout redirected to a temporary file and returns what it printed.
std::string capture_stdout(const std::function<void()> &fn) {
  std::fflush(stdout);
  char path[] = "/tmp/shm_test_stdout_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  int saved = dup(1);
  dup2(fd, 1);
  fn();
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  std::string out;
  lseek(fd, 0, SEEK_SET);
  char buf[4096];
  ssize_t k;
  while ((k = read(fd, buf, sizeof buf)) > 0) out.append(buf, (size_t)k);
  close(fd);
  unlink(path);
  return out;
}

// ---- a sequential model of the mesh, written without the runtime's tricks ----------------

struct Mesh {
  Shape sizes;
  int ndev() const { return (int)numel(sizes); }
  Shape coords(int d) const { return unravel(d, sizes); }
};

// Group of device d over `axes`: every device agreeing with d off `axes`, indexed row-major
// over the coordinates on `axes` in the listed order.
std::vector<int> group_members(const Mesh &m, int d, const std::vector<int32_t> &axes, int *me) {
  Shape axis_sizes;
  for (int32_t a : axes) axis_sizes.push_back(m.sizes[(size_t)a]);
  std::vector<int> members((size_t)numel(axis_sizes), -1);
  const Shape cd = m.coords(d);
  for (int e = 0; e < m.ndev(); ++e) {
    const Shape ce = m.coords(e);
    bool same = true;
    for (size_t a = 0; a < m.sizes.size(); ++a) {
      bool listed = false;
      for (int32_t x : axes) listed |= x == (int32_t)a;
      if (!listed && ce[a] != cd[a]) same = false;
    }
    if (!same) continue;
    Shape sub;
    for (int32_t a : axes) sub.push_back(ce[(size_t)a]);
    const int64_t j = ravel(sub, axis_sizes);
    members[(size_t)j] = e;
    if (e == d) *me = (int)j;
  }
  return members;
}

enum Kind {
  PSUM, PMAX, PMIN, ALL_GATHER, PSUM_SCATTER, ALL_TO_ALL, PPERMUTE, AXIS_INDEX,
  PPROD, PAND, POR, PXOR, BROADCAST, REDUCE_TO, GATHER_TO, SCATTER_FROM  // (rooted)
};

struct Case {
  Kind kind = PSUM;
  int32_t dtype = SHM_F32;
  Shape shape; // per-device input block
  std::vector<int32_t> axes;
  int a1 = 0, a2 = 0; // axis / dim / split_axis, concat_axis
  int tiled = 0;
  std::vector<int64_t> pairs;
  int root = 0;             // rooted collectives: a group index
  int op = SHM_REDUCE_SUM;  // reduce_to
};

// The element-wise reduction `op` (SHM_REDUCE_*) of a and b in `dtype`'s arithmetic: integers
// wrap, bools are logical.
double combine_ref(int op, double a, double b, int32_t dtype) {
  const bool isInt = dtype == SHM_I32 || dtype == SHM_I64, isBool = dtype == SHM_BOOL;
  switch (op) {
  case SHM_REDUCE_SUM: return isBool ? (double)(a || b) : a + b;
  case SHM_REDUCE_MAX: return isBool ? (double)(a || b) : std::max(a, b);
  case SHM_REDUCE_MIN: return isBool ? (double)(a && b) : std::min(a, b);
  case SHM_REDUCE_PROD: return isBool ? (double)(a && b) : a * b;
  case SHM_REDUCE_AND: return (double)((int64_t)a & (int64_t)b);
  case SHM_REDUCE_OR: return (double)((int64_t)a | (int64_t)b);
  case SHM_REDUCE_XOR: return (double)((int64_t)a ^ (int64_t)b);
  }
  (void)isInt;
  return 0;
}

// The reference result of device d, given every device's input; sets out_shape.
Values reference(const Mesh &m, const Case &c, int d, const std::vector<Values> &in,
                 Shape *out_shape) {
  int me = 0;
  const std::vector<int> mem = group_members(m, d, c.axes, &me);
  const int64_t n = (int64_t)mem.size();
  const Shape &s = c.shape;
  Values out;
  switch (c.kind) {
  case PPROD:
  case PAND:
  case POR:
  case PXOR: {
    *out_shape = s;
    const int op = c.kind == PPROD ? SHM_REDUCE_PROD : c.kind == PAND ? SHM_REDUCE_AND : c.kind == POR ? SHM_REDUCE_OR : SHM_REDUCE_XOR;
    out = in[(size_t)mem[0]];
    for (int64_t j = 1; j < n; ++j)
      for (size_t i = 0; i < out.size(); ++i) out[i] = combine_ref(op, out[i], in[(size_t)mem[(size_t)j]][i], c.dtype);
    return out;
  }
  case BROADCAST:
    *out_shape = s;
    return in[(size_t)mem[(size_t)c.root]];
  case REDUCE_TO: {
    *out_shape = s;
    if (me != c.root) return Values((size_t)numel(s), 0.0);
    out = in[(size_t)mem[0]];
    for (int64_t j = 1; j < n; ++j)
      for (size_t i = 0; i < out.size(); ++i) out[i] = combine_ref(c.op, out[i], in[(size_t)mem[(size_t)j]][i], c.dtype);
    return out;
  }
  case GATHER_TO:
  case SCATTER_FROM: {
    // all_gather's result on the root, zeros elsewhere; the root's block [:, me, :] along a1.
    Case like = c;
    like.kind = c.kind == GATHER_TO ? ALL_GATHER : PSUM_SCATTER;
    if (c.kind == GATHER_TO) {
      out = reference(m, like, d, in, out_shape);
      if (me != c.root) out.assign(out.size(), 0.0);
      return out;
    }
    std::vector<Values> only_root((size_t)m.ndev(), Values((size_t)numel(s), 0.0));
    only_root[(size_t)mem[(size_t)c.root]] = in[(size_t)mem[(size_t)c.root]];
    return reference(m, like, d, only_root, out_shape);
  }
  case PSUM:
  case PMAX:
  case PMIN: {
    *out_shape = s;
    out = in[(size_t)mem[0]];
    for (int64_t j = 1; j < n; ++j)
      for (size_t i = 0; i < out.size(); ++i) {
        const double x = in[(size_t)mem[(size_t)j]][i];
        if (c.dtype == SHM_BOOL) out[i] = c.kind == PMIN ? (out[i] && x) : (out[i] || x);
        else if (c.kind == PSUM) out[i] += x;
        else if (c.kind == PMAX) out[i] = std::max(out[i], x);
        else out[i] = std::min(out[i], x);
      }
    return out;
  }
  case ALL_GATHER: {
    Shape os = s;
    if (c.tiled) os[(size_t)c.a1] *= n;
    else os = insert_at(s, c.a1, n);
    *out_shape = os;
    for (int64_t f = 0; f < numel(os); ++f) {
      Shape o = unravel(f, os), i = o;
      int64_t j;
      if (c.tiled) {
        j = o[(size_t)c.a1] / s[(size_t)c.a1];
        i[(size_t)c.a1] = o[(size_t)c.a1] % s[(size_t)c.a1];
      } else {
        j = o[(size_t)c.a1];
        i = erase_at(o, c.a1);
      }
      out.push_back(in[(size_t)mem[(size_t)j]][(size_t)ravel(i, s)]);
    }
    return out;
  }
  case PSUM_SCATTER: {
    Shape os = s;
    if (c.tiled) os[(size_t)c.a1] /= n;
    else os = erase_at(s, c.a1);
    *out_shape = os;
    for (int64_t f = 0; f < numel(os); ++f) {
      Shape o = unravel(f, os), i;
      if (c.tiled) {
        i = o;
        i[(size_t)c.a1] += me * os[(size_t)c.a1];
      } else {
        i = insert_at(o, c.a1, (int64_t)me);
      }
      double acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += in[(size_t)mem[(size_t)j]][(size_t)ravel(i, s)];
      out.push_back(acc);
    }
    return out;
  }
  case ALL_TO_ALL: {
    const int split = c.a1, concat = c.a2;
    Shape os;
    if (c.tiled) {
      os = s;
      os[(size_t)split] /= n;
      os[(size_t)concat] *= n;
    } else {
      os = insert_at(erase_at(s, split), concat, n);
    }
    *out_shape = os;
    for (int64_t f = 0; f < numel(os); ++f) {
      Shape o = unravel(f, os), i;
      int64_t j;
      if (c.tiled) {
        const int64_t b = s[(size_t)split] / n; // block size along split
        const int64_t cb = os[(size_t)concat] / n; // one sender's extent along concat
        j = o[(size_t)concat] / cb;
        i = o;
        i[(size_t)concat] = o[(size_t)concat] % cb;
        i[(size_t)split] += me * b;
      } else {
        j = o[(size_t)concat];
        i = insert_at(erase_at(o, concat), split, (int64_t)me);
      }
      out.push_back(in[(size_t)mem[(size_t)j]][(size_t)ravel(i, s)]);
    }
    return out;
  }
  case PPERMUTE: {
    *out_shape = s;
    out.assign((size_t)numel(s), 0.0);
    for (size_t p = 0; p + 1 < c.pairs.size(); p += 2)
      if (c.pairs[p + 1] == me) out = in[(size_t)mem[(size_t)c.pairs[p]]];
    return out;
  }
  case AXIS_INDEX:
    *out_shape = {};
    return {(double)me};
  }
  return out;
}

// Read-only while the devices run (written before shm_run_shmap starts the threads).
Case g_case;

void collective_body(shm_device *dev, void **outs, void **ins) {
  const Case &c = g_case;
  const int32_t rank = (int32_t)c.shape.size();
  const int32_t *axes = c.axes.data();
  const int32_t na = (int32_t)c.axes.size();
  switch (c.kind) {
  case PSUM: shm_psum(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), axes, na); break;
  case PMAX: shm_pmax(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), axes, na); break;
  case PMIN: shm_pmin(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), axes, na); break;
  case ALL_GATHER:
    shm_all_gather(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), c.a1, c.tiled, axes, na);
    break;
  case PSUM_SCATTER:
    shm_psum_scatter(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), c.a1, c.tiled, axes, na);
    break;
  case ALL_TO_ALL:
    shm_all_to_all(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), c.a1, c.a2, c.tiled, axes, na);
    break;
  case PPERMUTE:
    shm_ppermute(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), c.pairs.data(), (int32_t)(c.pairs.size() / 2), axes, na);
    break;
  case AXIS_INDEX: *(int32_t *)outs[0] = shm_axis_index(dev, axes, na); break;
  case PPROD: shm_pprod(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), axes, na); break;
  case PAND: shm_pbitwise(dev, SHM_REDUCE_AND, c.dtype, ins[0], outs[0], rank, c.shape.data(), axes, na); break;
  case POR: shm_pbitwise(dev, SHM_REDUCE_OR, c.dtype, ins[0], outs[0], rank, c.shape.data(), axes, na); break;
  case PXOR: shm_pbitwise(dev, SHM_REDUCE_XOR, c.dtype, ins[0], outs[0], rank, c.shape.data(), axes, na); break;
  case BROADCAST: shm_broadcast(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), c.root, axes, na); break;
  case REDUCE_TO: shm_reduce_to(dev, c.op, c.dtype, ins[0], outs[0], rank, c.shape.data(), c.root, axes, na); break;
  case GATHER_TO:
    shm_gather_to(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), c.a1, c.tiled, c.root, axes, na);
    break;
  case SCATTER_FROM:
    shm_scatter_from(dev, c.dtype, ins[0], outs[0], rank, c.shape.data(), c.a1, c.tiled, c.root, axes, na);
    break;
  }
}

// Runs one collective on the mesh: device d's input block is in[d]; returns each device's
// output block and checks it against the reference.
void check_case(const Mesh &m, const Case &c) {
  const int nd = m.ndev();
  std::vector<Values> in((size_t)nd);
  for (int d = 0; d < nd; ++d)
    for (int64_t e = 0; e < numel(c.shape); ++e) {
      double v;
      if (c.dtype == SHM_BOOL) v = ((d * 3 + e) % 4) == 0;
      else if (c.kind == PMAX || c.kind == PMIN) v = (double)((d * 7 + e * 3) % 11) - 5;
      else if (c.kind == PPROD || (c.kind == REDUCE_TO && c.op == SHM_REDUCE_PROD)) v = (double)((d + e) % 3) - 1 + (e % 2) * 2;
      else if (c.kind == PAND || c.kind == POR || c.kind == PXOR) v = (double)((d * 37 + e * 11) % 64);
      else v = d * 100 + e; // exact in f32
      in[(size_t)d].push_back(as_dtype(v, c.dtype));
    }
  std::vector<Values> want((size_t)nd);
  Shape out_shape;
  for (int d = 0; d < nd; ++d) {
    want[(size_t)d] = reference(m, c, d, in, &out_shape);
    for (double &w : want[(size_t)d]) w = as_dtype(w, c.dtype);  // sums: rounded once
  }
  const int32_t out_dtype = c.kind == AXIS_INDEX ? SHM_I32 : c.dtype;

  // Global arrays [ndev, block...] with dimension 0 split over all mesh axes (row-major), so
  // device d's block is row d.
  Values gin;
  for (auto &v : in) gin.insert(gin.end(), v.begin(), v.end());
  auto in_bytes = to_bytes(gin, c.dtype);
  Shape gin_shape = insert_at(c.shape, 0, (int64_t)nd);
  Shape gout_shape = insert_at(out_shape, 0, (int64_t)nd);
  std::vector<unsigned char> out_bytes((size_t)(numel(gout_shape) * esize(out_dtype)) + 1, 0xAB);
  auto spec_for = [&](size_t rank) {
    std::vector<int32_t> sp{(int32_t)m.sizes.size()};
    for (size_t a = 0; a < m.sizes.size(); ++a) sp.push_back((int32_t)a);
    for (size_t d = 1; d < rank; ++d) sp.push_back(0);
    return sp;
  };
  auto in_spec = spec_for(gin_shape.size()), out_spec = spec_for(gout_shape.size());
  shm_array_desc in_desc{(int32_t)gin_shape.size(), gin_shape.data(), c.dtype, in_spec.data(), 0};
  shm_array_desc out_desc{(int32_t)gout_shape.size(), gout_shape.data(), out_dtype, out_spec.data(), 0};
  void *ins[1] = {in_bytes.data()};
  void *outs[1] = {out_bytes.data()};
  g_case = c;
  shm_run_shmap((int32_t)m.sizes.size(), m.sizes.data(), nullptr, collective_body, 1, ins,
                &in_desc, 1, outs, &out_desc);
  const Values got = from_bytes(out_bytes.data(), numel(gout_shape), out_dtype);
  const int64_t blk = numel(out_shape);
  for (int d = 0; d < nd; ++d) {
    INFO("device " << d);
    const Values row(got.begin() + d * blk, got.begin() + (d + 1) * blk);
    CHECK(row == want[(size_t)d]);
  }
}

struct MeshAxes {
  Mesh mesh;
  std::vector<int32_t> axes;
  const char *name;
};

std::vector<MeshAxes> mesh_configs() {
  return {
      {{{4}}, {0}, "mesh 4, axis x"},
      {{{2, 4}}, {0}, "mesh 2x4, axis x"},
      {{{2, 4}}, {1}, "mesh 2x4, axis y"},
      {{{2, 4}}, {0, 1}, "mesh 2x4, axes (x, y)"},
      {{{2, 4}}, {1, 0}, "mesh 2x4, axes (y, x)"},
      {{{2, 4}}, {}, "mesh 2x4, no axes"},
      {{{2, 2, 2}}, {2, 0}, "mesh 2x2x2, axes (z, x)"},
  };
}

int64_t group_size(const MeshAxes &ma) {
  int64_t n = 1;
  for (int32_t a : ma.axes) n *= ma.mesh.sizes[(size_t)a];
  return n;
}

} // namespace

// ---- collectives ----------------------------------------------------------------------------

TEST_CASE("all-reduce collectives match the sequential reference", "[collectives]") {
  for (const MeshAxes &ma : mesh_configs()) {
    for (Kind k : {PSUM, PMAX, PMIN})
      for (int32_t dt : {SHM_F32, SHM_F64, SHM_I32, SHM_BOOL, SHM_I64, SHM_F16, SHM_BF16}) {
        // sizes below, equal to and above the group size (uneven chunks), and a scalar
        for (Shape shape : {Shape{}, Shape{3}, Shape{2, 5}, Shape{17}}) {
          Case c;
          c.kind = k;
          c.dtype = dt;
          c.shape = shape;
          c.axes = ma.axes;
          INFO(ma.name << ", kind " << k << ", dtype " << dt << ", elements " << numel(shape));
          check_case(ma.mesh, c);
        }
      }
  }
}

TEST_CASE("pprod and the bitwise all-reduces match the sequential reference", "[collectives]") {
  for (const MeshAxes &ma : mesh_configs())
    for (Kind k : {PPROD, PAND, POR, PXOR})
      for (int32_t dt : {SHM_F32, SHM_F64, SHM_I32, SHM_BOOL, SHM_I64, SHM_F16, SHM_BF16}) {
        if (k != PPROD && dt != SHM_I32 && dt != SHM_I64 && dt != SHM_BOOL) continue;
        for (Shape shape : {Shape{}, Shape{3}, Shape{2, 5}, Shape{17}}) {
          Case c;
          c.kind = k;
          c.dtype = dt;
          c.shape = shape;
          c.axes = ma.axes;
          INFO(ma.name << ", kind " << k << ", dtype " << dt << ", elements " << numel(shape));
          check_case(ma.mesh, c);
        }
      }
}

TEST_CASE("rooted collectives match the sequential reference", "[collectives]") {
  for (const MeshAxes &ma : mesh_configs()) {
    const int n = (int)group_size(ma);
    for (int root : {0, n - 1}) {
      for (int op : {(int)SHM_REDUCE_SUM, (int)SHM_REDUCE_MAX, (int)SHM_REDUCE_MIN, (int)SHM_REDUCE_PROD})
        for (int32_t dt : {SHM_F32, SHM_I32, SHM_F16, SHM_I64}) {
          Case c;
          c.kind = REDUCE_TO;
          c.op = op;
          c.dtype = dt;
          c.shape = {2, 5};
          c.axes = ma.axes;
          c.root = root;
          INFO(ma.name << ", reduce_to op " << op << ", root " << root << ", dtype " << dt);
          check_case(ma.mesh, c);
        }
      for (int32_t dt : {SHM_F32, SHM_BOOL, SHM_BF16}) {
        Case c;
        c.kind = BROADCAST;
        c.dtype = dt;
        c.shape = {3, 2};
        c.axes = ma.axes;
        c.root = root;
        INFO(ma.name << ", broadcast, root " << root << ", dtype " << dt);
        check_case(ma.mesh, c);
      }
      for (int tiled : {0, 1})
        for (int axis = 0; axis <= 1; ++axis) {
          Case g;
          g.kind = GATHER_TO;
          g.dtype = SHM_F32;
          g.shape = {3, 2};
          g.axes = ma.axes;
          g.root = root;
          g.tiled = tiled;
          g.a1 = axis;
          INFO(ma.name << ", gather_to, root " << root << ", tiled " << tiled << ", axis " << axis);
          check_case(ma.mesh, g);
          Case sc = g;
          sc.kind = SCATTER_FROM;
          sc.shape = {tiled ? 2 * n : n, 3};
          if (axis == 1) sc.shape = {3, tiled ? 2 * n : n};
          INFO("scatter_from");
          check_case(ma.mesh, sc);
        }
    }
  }
}

TEST_CASE("a traced run records each device's collectives and its waits", "[collectives][trace]") {
  // (under ThreadSanitizer too: each device records on its own track, merged after the join)
  char path[] = "/tmp/shmap-trace-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  shm::trace_begin(path);
  for (Kind k : {PSUM, ALL_GATHER, BROADCAST}) {
    Case c;
    c.kind = k;
    c.shape = {4};
    c.axes = {1};
    check_case(Mesh{{2, 4}}, c);
  }
  shm::trace_write();
  shm::g_tracing = false;
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path);
  CHECK(text.find("\"name\":\"host\"") != std::string::npos);
  CHECK(text.find("device 7 (") != std::string::npos);
  for (const char *name : {"\"psum\"", "\"all_gather\"", "\"broadcast\"", "\"shmap body\"", "\"shmap\""})
    CHECK(text.find(name) != std::string::npos);
}

TEST_CASE("all_gather matches the reference, tiled and untiled", "[collectives]") {
  for (const MeshAxes &ma : mesh_configs()) {
    for (int tiled : {0, 1})
      for (int axis = 0; axis <= 2; ++axis) {
        if (tiled && axis == 2) continue;
        for (int32_t dt : {SHM_F32, SHM_F64, SHM_BOOL, SHM_I64, SHM_BF16}) {
          Case c;
          c.kind = ALL_GATHER;
          c.dtype = dt;
          c.shape = {3, 2};
          c.axes = ma.axes;
          c.a1 = axis;
          c.tiled = tiled;
          INFO(ma.name << ", axis " << axis << ", tiled " << tiled << ", dtype " << dt);
          check_case(ma.mesh, c);
        }
      }
    Case scalar; // untiled gather of a scalar: a vector of the group's values
    scalar.kind = ALL_GATHER;
    scalar.shape = {};
    scalar.axes = ma.axes;
    check_case(ma.mesh, scalar);
  }
}

TEST_CASE("psum_scatter matches the reference, tiled and untiled", "[collectives]") {
  for (const MeshAxes &ma : mesh_configs()) {
    const int64_t n = group_size(ma);
    for (int dim = 0; dim < 2; ++dim) {
      Case c;
      c.kind = PSUM_SCATTER;
      c.axes = ma.axes;
      c.a1 = dim;
      INFO(ma.name << ", dim " << dim);
      c.tiled = 1;
      c.shape = dim == 0 ? Shape{2 * n, 3} : Shape{3, 2 * n};
      check_case(ma.mesh, c);
      c.tiled = 0;
      c.shape = dim == 0 ? Shape{n, 3} : Shape{3, n};
      check_case(ma.mesh, c);
      c.shape = dim == 0 ? Shape{n} : Shape{2, n};
      check_case(ma.mesh, c);
      c.dtype = SHM_I32;
      check_case(ma.mesh, c);
    }
  }
}

TEST_CASE("all_to_all matches the reference, tiled and untiled", "[collectives]") {
  for (const MeshAxes &ma : mesh_configs()) {
    const int64_t n = group_size(ma);
    for (int split = 0; split < 3; ++split)
      for (int concat = 0; concat < 3; ++concat)
        for (int tiled : {0, 1}) {
          Case c;
          c.kind = ALL_TO_ALL;
          c.axes = ma.axes;
          c.a1 = split;
          c.a2 = concat;
          c.tiled = tiled;
          c.shape = {2, 3, 2};
          c.shape[(size_t)split] = tiled ? 2 * n : n;
          INFO(ma.name << ", split " << split << ", concat " << concat << ", tiled " << tiled);
          check_case(ma.mesh, c);
          c.dtype = SHM_F64;
          check_case(ma.mesh, c);
        }
  }
}

TEST_CASE("ppermute matches the reference; unsent devices get zeros", "[collectives]") {
  for (const MeshAxes &ma : mesh_configs()) {
    const int64_t n = group_size(ma);
    Case c;
    c.kind = PPERMUTE;
    c.axes = ma.axes;
    c.shape = {2, 3};
    INFO(ma.name);
    for (int64_t j = 0; j < n; ++j) { // ring shift by one
      c.pairs.push_back(j);
      c.pairs.push_back((j + 1) % n);
    }
    check_case(ma.mesh, c);
    c.pairs = {0, n - 1}; // only one message: everybody else receives zeros
    check_case(ma.mesh, c);
    c.pairs = {};
    check_case(ma.mesh, c);
    c.dtype = SHM_BOOL;
    c.pairs = {n - 1, 0};
    check_case(ma.mesh, c);
  }
}

TEST_CASE("axis_index is the row-major index over the listed axes", "[collectives]") {
  for (const MeshAxes &ma : mesh_configs()) {
    Case c;
    c.kind = AXIS_INDEX;
    c.dtype = SHM_I32;
    c.axes = ma.axes;
    INFO(ma.name);
    check_case(ma.mesh, c);
  }
}

namespace {
// Several collectives back to back, with results feeding each other: exercises slot reuse
// between consecutive collectives (a device racing ahead must not clobber a slot in use).
void chained_body(shm_device *dev, void **outs, void **ins) {
  const int32_t x = 0;
  float a[64], b[64], c[256];
  const int64_t shape[1] = {64};
  for (int i = 0; i < 64; ++i) a[i] = ((const float *)ins[0])[0] + (float)i;
  for (int round = 0; round < 50; ++round) {
    shm_psum(dev, SHM_F32, a, b, 1, shape, &x, 1);
    shm_all_gather(dev, SHM_F32, b, c, 1, shape, 0, 1, &x, 1);
    for (int i = 0; i < 64; ++i) a[i] = c[64 * (round % 4) + i] / 4.0f;
  }
  std::memcpy(outs[0], a, sizeof a);
}
} // namespace

TEST_CASE("consecutive collectives do not interfere", "[collectives]") {
  const int64_t mesh[1] = {4};
  float in[4] = {0, 1, 2, 3};
  std::vector<float> out(4 * 64);
  const int64_t in_shape[1] = {4}, out_shape[1] = {256};
  const int32_t spec[2] = {1, 0};
  shm_array_desc din{1, in_shape, SHM_F32, spec, 0}, dout{1, out_shape, SHM_F32, spec, 0};
  void *ins[1] = {in}, *outs[1] = {out.data()};
  shm_run_shmap(1, mesh, nullptr, chained_body, 1, ins, &din, 1, outs, &dout);
  // round 0: a[i] = psum = 6 + 4i, gathered, /4 -> 1.5 + i; afterwards psum of equal values
  // times 4 / 4 keeps it: every device ends with 1.5 + i.
  for (int d = 0; d < 4; ++d)
    for (int i = 0; i < 64; ++i) REQUIRE(out[(size_t)(d * 64 + i)] == 1.5f + (float)i);
}

namespace {
// psum and all_gather of the device's 4 inputs straight into the two outputs; records which
// devices were given an output buffer.
std::atomic<int> g_with_output[8];
void reduce_only_body(shm_device *dev, void **outs, void **ins) {
  const int32_t axis[1] = {0};
  const int64_t shape[1] = {4};
  shm_psum(dev, SHM_F32, ins[0], outs[0], 1, shape, axis, 1);
  shm_all_gather(dev, SHM_F32, ins[0], outs[1], 1, shape, 0, 1, axis, 1);
  int me = shm_axis_index(dev, axis, 1);
  g_with_output[me] = (outs[0] != nullptr) + 2 * (outs[1] != nullptr);
}
} // namespace

TEST_CASE("outputs written only by an all-reduce or all_gather exist only on their writer", "[collectives]") {
  // SHM_OUT_COLLECTIVE_ONLY: the devices whose block is not used get no buffer and receive
  // nothing; the writer's result is complete.
  const int64_t mesh[1] = {4};
  std::vector<float> in(16);
  for (int i = 0; i < 16; ++i) in[(size_t)i] = (float)i;
  std::vector<float> sum(4, -1), all(16, -1);
  const int64_t in_shape[1] = {16}, sum_shape[1] = {4}, all_shape[1] = {16};
  const int32_t split[2] = {1, 0}, whole[1] = {0};
  shm_array_desc din{1, in_shape, SHM_F32, split, 0};
  shm_array_desc douts[2] = {{1, sum_shape, SHM_F32, whole, SHM_OUT_COLLECTIVE_ONLY},
                             {1, all_shape, SHM_F32, whole, SHM_OUT_COLLECTIVE_ONLY}};
  void *ins[1] = {in.data()}, *outs[2] = {sum.data(), all.data()};
  shm_run_shmap(1, mesh, nullptr, reduce_only_body, 1, ins, &din, 2, outs, douts);
  for (int i = 0; i < 4; ++i) CHECK(sum[(size_t)i] == (float)(i + (4 + i) + (8 + i) + (12 + i)));
  CHECK(all == in);
  CHECK(g_with_output[0] == 3);
  for (int d = 1; d < 4; ++d) CHECK(g_with_output[d] == 0);
}

namespace {
// y = 2 x over x's own buffer, and each device's sum of x; device 1 reads x only after device
// 0 would have written its y.
void doubled_over_input_body(shm_device *dev, void **outs, void **ins) {
  const int32_t axis[1] = {0};
  if (shm_axis_index(dev, axis, 1) == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const float *x = (const float *)ins[0];
  float sum = 0;
  for (int i = 0; i < 4; ++i) {
    sum += x[i];
    ((float *)outs[0])[i] = 2 * x[i];
  }
  *(float *)outs[1] = sum;
}
} // namespace

TEST_CASE("an output written over an input goes in once every device has read it", "[shmap]") {
  // SHM_OUT_OVER_INPUT: y's buffer is x's and both devices read all of x (replicated), so
  // device 0, y's writer, must not write it while device 1 still reads x.
  const int64_t mesh[1] = {2};
  std::vector<float> x = {1, 2, 3, 4}, sums(2, -1);
  const int64_t x_shape[1] = {4}, sums_shape[1] = {2};
  const int32_t whole[1] = {0}, split[2] = {1, 0};
  shm_array_desc din{1, x_shape, SHM_F32, whole, 0};
  shm_array_desc douts[2] = {{1, x_shape, SHM_F32, whole, SHM_OUT_OVER_INPUT}, {1, sums_shape, SHM_F32, split, 0}};
  void *ins[1] = {x.data()}, *outs[2] = {x.data(), sums.data()};
  shm_run_shmap(1, mesh, nullptr, doubled_over_input_body, 1, ins, &din, 2, outs, douts);
  CHECK(x == std::vector<float>({2, 4, 6, 8}));
  CHECK(sums == std::vector<float>({10, 10}));
}

// ---- shmap split / assemble -----------------------------------------------------------------

namespace {
// Per-device record of what the body saw (each device writes only its own entry).
struct Seen {
  std::vector<float> block;
  int32_t id = -1;
};
std::vector<Seen> g_seen(64);
int64_t g_block_elems = 0;

void record_body(shm_device *dev, void **outs, void **ins) {
  const int32_t xy[2] = {0, 1};
  const int32_t id = shm_axis_index(dev, xy, 2);
  const float *in = (const float *)ins[0];
  g_seen[(size_t)id].block.assign(in, in + g_block_elems);
  g_seen[(size_t)id].id = id;
  // out 0: the input block unchanged; out 1: the device id, as f32[1]
  std::memcpy(outs[0], in, (size_t)g_block_elems * sizeof(float));
  *(float *)outs[1] = (float)id;
}

// Runs record_body on mesh (x=2, y=4) with the given global input and specs.
std::vector<float> run_record(const Shape &gshape, const std::vector<int32_t> &in_spec,
                              const Shape &id_shape, const std::vector<int32_t> &id_spec,
                              int64_t block_elems, std::vector<float> *ids) {
  const int64_t mesh[2] = {2, 4};
  const char *names[2] = {"x", "y"};
  std::vector<float> in((size_t)numel(gshape));
  for (size_t i = 0; i < in.size(); ++i) in[i] = (float)i;
  std::vector<float> out(in.size(), -1.0f);
  ids->assign((size_t)numel(id_shape), -1.0f);
  g_block_elems = block_elems;
  shm_array_desc din{(int32_t)gshape.size(), gshape.data(), SHM_F32, in_spec.data(), 0};
  shm_array_desc douts[2] = {din, {(int32_t)id_shape.size(), id_shape.data(), SHM_F32, id_spec.data(), 0}};
  void *ins[1] = {in.data()};
  void *outs[2] = {out.data(), ids->data()};
  shm_run_shmap(2, mesh, names, record_body, 1, ins, &din, 2, outs, douts);
  CHECK(out == in); // the identity body reassembles the input exactly
  return in;
}
} // namespace

TEST_CASE("shmap splits and assembles by partition spec", "[shmap]") {
  std::vector<float> ids;
  SECTION("P((x, y)) on [8, 3]: device d gets row d") {
    run_record({8, 3}, {2, 0, 1, 0}, {8}, {2, 0, 1}, 3, &ids);
    for (int d = 0; d < 8; ++d) {
      CHECK(g_seen[(size_t)d].block == std::vector<float>{3.0f * d, 3.0f * d + 1, 3.0f * d + 2});
      CHECK(ids[(size_t)d] == (float)d);
    }
  }
  SECTION("P((y, x)) on [8]: y is major") {
    run_record({8}, {2, 1, 0}, {8}, {2, 1, 0}, 1, &ids);
    for (int d = 0; d < 8; ++d) {
      const int x = d / 4, y = d % 4;
      CHECK(g_seen[(size_t)d].block == std::vector<float>{(float)(y * 2 + x)});
      CHECK(ids[(size_t)(y * 2 + x)] == (float)d);
    }
  }
  SECTION("P(None, y) on [3, 8]: columns 2y, 2y+1; replicated over x") {
    run_record({3, 8}, {0, 1, 1}, {4}, {1, 1}, 6, &ids);
    for (int d = 0; d < 8; ++d) {
      const int y = d % 4;
      std::vector<float> want;
      for (int r = 0; r < 3; ++r)
        for (int c = 2 * y; c < 2 * y + 2; ++c) want.push_back((float)(r * 8 + c));
      CHECK(g_seen[(size_t)d].block == want);
    }
    // the id output P(y) is taken from the devices with x == 0: ids 0..3
    CHECK(ids == std::vector<float>{0, 1, 2, 3});
  }
  SECTION("P(x, y) on [4, 8]: a 2-D block grid") {
    run_record({4, 8}, {1, 0, 1, 1}, {2}, {1, 0}, 4, &ids);
    for (int d = 0; d < 8; ++d) {
      const int x = d / 4, y = d % 4;
      std::vector<float> want;
      for (int r = 2 * x; r < 2 * x + 2; ++r)
        for (int c = 2 * y; c < 2 * y + 2; ++c) want.push_back((float)(r * 8 + c));
      CHECK(g_seen[(size_t)d].block == want);
    }
    CHECK(ids == std::vector<float>{0, 4}); // P(x): devices with y == 0
  }
  SECTION("P() replicates; an unmapped output comes from device 0") {
    std::vector<float> in = run_record({2, 3}, {0, 0}, {1}, {0}, 6, &ids);
    for (int d = 0; d < 8; ++d) CHECK(g_seen[(size_t)d].block == in);
    CHECK(ids == std::vector<float>{0});
  }
}

TEST_CASE("shmap over a rank-0 mesh runs one device", "[shmap]") {
  float in = 2.5f, out = 0;
  const int32_t spec[1] = {0};
  shm_array_desc d{0, nullptr, SHM_F32, spec, 0};
  void *ins[1] = {&in}, *outs[1] = {&out};
  shm_run_shmap(
      0, nullptr, nullptr,
      [](shm_device *dev, void **o, void **i) {
        float v = *(float *)i[0];
        shm_psum(dev, SHM_F32, &v, o[0], 0, nullptr, nullptr, 0);
      },
      1, ins, &d, 1, outs, &d);
  CHECK(out == 2.5f);
}

// ---- the device thread pool ----------------------------------------------------------------

namespace {
// Device i writes (number of devices, by psum) * 10000 + i into block i of a P("x") output.
void count_body(shm_device *dev, void **outs, void **) {
  const int32_t x = 0;
  const float one = 1;
  float devices = 0;
  shm_psum(dev, SHM_F32, &one, &devices, 0, nullptr, &x, 1);
  *(float *)outs[0] = devices * 10000 + (float)shm_axis_index(dev, &x, 1);
}

bool every_device_counts(int64_t n) {
  const int64_t mesh[1] = {n};
  const char *names[1] = {"x"};
  const int32_t spec[2] = {1, 0};
  std::vector<float> out((size_t)n, -1);
  shm_array_desc d{1, &n, SHM_F32, spec, 0};
  void *outs[1] = {out.data()};
  shm_run_shmap(1, mesh, names, count_body, 0, nullptr, nullptr, 1, outs, &d);
  for (int64_t i = 0; i < n; ++i)
    if (out[(size_t)i] != (float)(n * 10000 + i)) return false;
  return true;
}
} // namespace

// After a big mesh grows the pool, small calls wake only the workers they need (they once woke
// all 1023, 100 times slower); each call must still run every device exactly once.
TEST_CASE("the pool runs small calls correctly after a big one", "[pool]") {
  REQUIRE(every_device_counts(1024));
  int bad = 0;
  for (int call = 0; call < 2000; ++call) {
    const int64_t n = call == 1000 ? 64 : 2 + call % 4;  // once, workers idle since the big call
    if (!every_device_counts(n)) ++bad;
  }
  CHECK(bad == 0);
  CHECK(every_device_counts(1024));
}

// ---- statistics ----------------------------------------------------------------------------

namespace {
void stats_body(shm_device *dev, void **outs, void **ins) {
  const int32_t x = 0;
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8], g[32];
  const int64_t shape[1] = {8};
  shm_psum(dev, SHM_F32, a, b, 1, shape, &x, 1);
  shm_psum(dev, SHM_F32, b, a, 1, shape, &x, 1);
  shm_all_gather(dev, SHM_F32, a, g, 1, shape, 0, 0, &x, 1);
  const int64_t pairs[4] = {0, 1, 1, 0};
  shm_ppermute(dev, SHM_F32, a, b, 1, shape, pairs, 2, &x, 1);
  shm_axis_index(dev, &x, 1);
  *(float *)outs[0] = b[0];
}
} // namespace

TEST_CASE("statistics count calls once and bytes per the documented model", "[stats]") {
  shm::stats_reset();
  const int64_t mesh[1] = {4};
  const int64_t shape[1] = {4};
  const int32_t spec[2] = {1, 0};
  float out[4];
  shm_array_desc d{1, shape, SHM_F32, spec, 0};
  void *outs[1] = {out};
  shm_run_shmap(1, mesh, nullptr, stats_body, 0, nullptr, nullptr, 1, outs, &d);
  const shm::Stats &s = shm::stats_get();
  // psum of 32 bytes on 4 devices: each device reduces an 8-byte chunk, reading it from 3
  // others and writing it to 3 others: 24 + 24 bytes per device, 96 + 96 per call.
  CHECK(s.rows[shm::kPsum].calls == 2);
  CHECK(s.rows[shm::kPsum].bytes_sent == 192);
  CHECK(s.rows[shm::kPsum].bytes_received == 192);
  // all_gather pulls 3 other 32-byte inputs per device.
  CHECK(s.rows[shm::kAllGather].calls == 1);
  CHECK(s.rows[shm::kAllGather].bytes_sent == 0);
  CHECK(s.rows[shm::kAllGather].bytes_received == 4 * 3 * 32);
  // ppermute: devices 0 and 1 each pull 32 bytes; 2 and 3 get zeros.
  CHECK(s.rows[shm::kPpermute].calls == 1);
  CHECK(s.rows[shm::kPpermute].bytes_received == 64);
  CHECK(s.rows[shm::kPmax].calls == 0);
  const std::string table = capture_stdout([] { shm::stats_print(stdout); });
  CHECK(table == "== shmap collective stats ==\n"
                 "collective      calls   bytes_sent   bytes_received\n"
                 "psum                2          192              192\n"
                 "all_gather          1            0              384\n"
                 "ppermute            1            0               64\n");
  shm::stats_reset();
  CHECK(capture_stdout([] { shm::stats_print(stdout); }) ==
        "== shmap collective stats ==\n"
        "collective      calls   bytes_sent   bytes_received\n"
        "(no collectives)\n");
}

TEST_CASE("--stats=wait adds the time devices waited at each kind of collective", "[stats]") {
  shm::stats_reset();
  shm::g_stats_wait = true;
  Case c;
  c.kind = PSUM;
  c.shape = {8};
  c.axes = {0};
  check_case(Mesh{{4}}, c);
  const std::string table = capture_stdout([] { shm::stats_print(stdout); });
  shm::g_stats_wait = false;
  shm::stats_reset();
  INFO(table);
  CHECK(table.rfind("== shmap collective stats ==\n"
                    "collective      calls   bytes_sent   bytes_received      wait_ms\n"
                    "psum                1           96               96 ",
                    0) == 0);
  const double ms = std::stod(table.substr(table.rfind(' ')));
  CHECK(ms >= 0);
  CHECK(ms < 10000);
}

// The emitted program's entry point, for the runtime_main tests.
static int g_user_main_calls = 0;
extern "C" void shm_user_main(shm_device *dev, void **outs, void **ins) {
  ++g_user_main_calls;
  const float v = 3.5f;
  shm_print("v", SHM_F32, 0, nullptr, &v);
}

TEST_CASE("runtime main: --stats, SHMAP_STATS and unknown arguments", "[main]") {
  char prog[] = "prog", stats[] = "--stats", bad[] = "--bogus";
  unsetenv("SHMAP_STATS");
  {
    char *argv[] = {prog, nullptr};
    int rc = -1;
    const std::string out = capture_stdout([&] { rc = shm::runtime_main(1, argv); });
    CHECK(rc == 0);
    CHECK(out == "v: f32[] = 3.5\n");
  }
  {
    char *argv[] = {prog, stats, nullptr};
    int rc = -1;
    const std::string out = capture_stdout([&] { rc = shm::runtime_main(2, argv); });
    CHECK(rc == 0);
    CHECK(out == "v: f32[] = 3.5\n== shmap collective stats ==\n"
                 "collective      calls   bytes_sent   bytes_received\n(no collectives)\n");
  }
  {
    setenv("SHMAP_STATS", "1", 1);
    char *argv[] = {prog, nullptr};
    const std::string out = capture_stdout([&] { shm::runtime_main(1, argv); });
    CHECK(out.find("(no collectives)") != std::string::npos);
    unsetenv("SHMAP_STATS");
  }
  {
    const int before = g_user_main_calls;
    char *argv[] = {prog, bad, nullptr};
    int rc = -1;
    // The error goes to stderr: send it to stdout's capture file too.
    const std::string out = capture_stdout([&] {
      std::fflush(stderr);
      const int saved = dup(2);
      dup2(1, 2);
      rc = shm::runtime_main(2, argv);
      std::fflush(stderr);
      dup2(saved, 2);
      close(saved);
    });
    CHECK(rc == 1);
    CHECK(out == "prog: error: unknown argument '--bogus' (see prog --help)\n");
    CHECK(g_user_main_calls == before); // the program did not run
  }
  {
    char help[] = "--help";
    char *argv[] = {prog, help, nullptr};
    int rc = -1;
    const std::string out = capture_stdout([&] { rc = shm::runtime_main(2, argv); });
    CHECK(rc == 0);
    CHECK(out.rfind("usage: prog [--stats] [--trace=FILE]\n", 0) == 0);
  }
  {
    char empty[] = "--trace=";
    char *argv[] = {prog, empty, nullptr};
    int rc = -1;
    const int before = g_user_main_calls;
    const std::string err = capture_stdout([&] {  // (stderr into the captured stdout)
      std::fflush(stderr);
      const int saved = dup(2);
      dup2(1, 2);
      rc = shm::runtime_main(2, argv);
      std::fflush(stderr);
      dup2(saved, 2);
      close(saved);
    });
    CHECK(rc == 1);
    CHECK(err == "prog: error: --trace= needs a file name, e.g. --trace=run.json\n");
    CHECK(g_user_main_calls == before);
  }
}

// ---- kernels ------------------------------------------------------------------------------

TEST_CASE("broadcast_in_dim", "[kernels]") {
  const float in[3] = {1, 2, 3};
  float out[6];
  const int64_t is[1] = {3}, os[2] = {2, 3}, bd[1] = {1};
  shm_broadcast_in_dim(SHM_F32, in, 1, is, out, 2, os, bd);
  CHECK(std::vector<float>(out, out + 6) == std::vector<float>{1, 2, 3, 1, 2, 3});
  const int64_t is2[2] = {3, 1}, os2[3] = {3, 2, 4}, bd2[2] = {0, 2}; // size-1 dim broadcasts
  float out2[24];
  shm_broadcast_in_dim(SHM_F32, in, 2, is2, out2, 3, os2, bd2);
  for (int i = 0; i < 24; ++i) CHECK(out2[i] == in[i / 8]);
  const double s = 7;
  double out3[4];
  const int64_t os3[2] = {2, 2};
  shm_broadcast_in_dim(SHM_F64, &s, 0, nullptr, out3, 2, os3, nullptr);
  for (double v : out3) CHECK(v == 7);
}

TEST_CASE("transpose", "[kernels]") {
  const Shape shape{2, 3, 4};
  std::vector<int32_t> in(24);
  for (int i = 0; i < 24; ++i) in[(size_t)i] = i;
  const int64_t perm[3] = {2, 0, 1};
  std::vector<int32_t> out(24);
  shm_transpose(SHM_I32, in.data(), 3, shape.data(), perm, out.data());
  const Shape os{4, 2, 3};
  for (int64_t f = 0; f < 24; ++f) {
    Shape o = unravel(f, os);
    Shape i{o[1], o[2], o[0]}; // out[o] = in[i] with i[perm[k]] = o[k]
    CHECK(out[(size_t)f] == in[(size_t)ravel(i, shape)]);
  }
}

TEST_CASE("reduce over sorted axes", "[kernels]") {
  const Shape shape{2, 3, 4};
  std::vector<float> in(24);
  for (int i = 0; i < 24; ++i) in[(size_t)i] = (float)((i * 7) % 10) - 3;
  auto ref = [&](std::vector<int64_t> axes, int op) {
    Shape os;
    for (int d = 0; d < 3; ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) os.push_back(shape[(size_t)d]);
    std::vector<float> r((size_t)numel(os), op == SHM_REDUCE_SUM ? 0.0f : op == SHM_REDUCE_MAX ? -INFINITY : INFINITY);
    for (int64_t f = 0; f < 24; ++f) {
      Shape i = unravel(f, shape), o;
      for (int d = 0; d < 3; ++d)
        if (std::find(axes.begin(), axes.end(), d) == axes.end()) o.push_back(i[(size_t)d]);
      float &acc = r[(size_t)ravel(o, os)];
      const float v = in[(size_t)f];
      acc = op == SHM_REDUCE_SUM ? acc + v : op == SHM_REDUCE_MAX ? std::max(acc, v) : std::min(acc, v);
    }
    return r;
  };
  for (std::vector<int64_t> axes : {std::vector<int64_t>{}, {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}})
    for (int op : {SHM_REDUCE_SUM, SHM_REDUCE_MAX, SHM_REDUCE_MIN}) {
      std::vector<float> want = ref(axes, op), got(want.size());
      shm_reduce(SHM_F32, op, in.data(), 3, shape.data(), axes.data(), (int32_t)axes.size(), got.data());
      INFO("axes " << axes.size() << " op " << op);
      CHECK(got == want);
    }
  // bool: any / all; i32 wraps; empty reduction gives the identity
  const unsigned char b[4] = {0, 1, 0, 0};
  unsigned char r;
  const int64_t s4[1] = {4}, ax0[1] = {0};
  shm_reduce(SHM_BOOL, SHM_REDUCE_SUM, b, 1, s4, ax0, 1, &r);
  CHECK(r == 1);
  shm_reduce(SHM_BOOL, SHM_REDUCE_MIN, b, 1, s4, ax0, 1, &r);
  CHECK(r == 0);
  const int32_t big[2] = {2147483647, 1};
  int32_t ri;
  const int64_t s2[1] = {2};
  shm_reduce(SHM_I32, SHM_REDUCE_SUM, big, 1, s2, ax0, 1, &ri);
  CHECK(ri == -2147483647 - 1);
  const int64_t s0[1] = {0};
  float e = 1;
  shm_reduce(SHM_F32, SHM_REDUCE_MAX, nullptr, 1, s0, ax0, 1, &e);
  CHECK(e == -INFINITY);
  const float nanin[3] = {1, NAN, 2};
  const int64_t s3[1] = {3};
  shm_reduce(SHM_F32, SHM_REDUCE_MAX, nanin, 1, s3, ax0, 1, &e);
  CHECK(std::isnan(e));
}

// Max / min of long rows (taken 16 lanes at a time) give the bits of the fold in row order:
// the last NaN's payload, the first of -0 / +0 when the extremum is zero, ties of any value.
TEST_CASE("reduce max / min of long rows as the fold in order", "[kernels]") {
  const int64_t n = 203, shape[2] = {2, n}, ax1[1] = {1};
  auto fold = [](const std::vector<float> &x, int op) {
    float acc = op == SHM_REDUCE_MAX ? -INFINITY : INFINITY;
    for (float b : x) acc = (op == SHM_REDUCE_MAX ? b > acc : b < acc) || b != b ? b : acc;
    return acc;
  };
  auto bits = [](float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-3.0f, 3.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> in((size_t)(2 * n));
    for (float &x : in) x = uni(rng);
    const int kind = trial % 5;
    for (int row = 0; row < 2; ++row) {
      float *r = in.data() + row * n;
      if (kind == 1) {  // NaNs with payloads at two places: the later one wins
        uint32_t p1 = 0x7fc00001u + (uint32_t)trial, p2 = 0xffc00002u;
        std::memcpy(&r[rng() % n], &p1, 4);
        std::memcpy(&r[rng() % n], &p2, 4);
      } else if (kind == 2) {  // every element 0 or -0 (or below zero): the first zero wins
        for (int64_t i = 0; i < n; ++i) r[i] = rng() % 3 == 0 ? -0.0f : rng() % 2 ? 0.0f : -1.0f - r[i] * r[i];
      } else if (kind == 3) {  // the extremum repeated
        for (int k = 0; k < 5; ++k) r[rng() % n] = 7.5f, r[rng() % n] = -7.5f;
      }
    }
    for (int op : {SHM_REDUCE_MAX, SHM_REDUCE_MIN}) {
      float got[2];
      shm_reduce(SHM_F32, op, in.data(), 2, shape, ax1, 1, got);
      for (int row = 0; row < 2; ++row) {
        std::vector<float> x(in.begin() + row * n, in.begin() + (row + 1) * n);
        INFO("trial " << trial << " op " << op << " row " << row);
        CHECK(bits(got[row]) == bits(fold(x, op)));
      }
    }
  }
}

// numpy's pairwise_sum (docs/numerics.md), written recursively on a gathered vector.
template <typename T> T pairwiseReference(const T *x, int64_t n) {
  if (n < 8) {
    T r = -0.0;
    for (int64_t i = 0; i < n; ++i) r += x[i];
    return r;
  }
  if (n <= 128) {
    T r[8];
    for (int k = 0; k < 8; ++k) r[k] = x[k];
    int64_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int k = 0; k < 8; ++k) r[k] += x[i + k];
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += x[i];
    return res;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return pairwiseReference(x, half) + pairwiseReference(x + half, n - half);
}

// Every output of a float reduce_sum is 0 + the pairwise tree over its inputs in row-major
// order of the reduced indices, bit for bit, whichever axes are reduced (the runtime sums
// rows of neighbouring outputs side by side where the last axis is kept).
template <typename T> void checkPairwise(const Shape &shape, std::vector<int64_t> axes) {
  const int64_t n = numel(shape);
  std::vector<T> in((size_t)n);
  uint64_t state = 12345;
  for (T &v : in) {  // deterministic values of mixed sign and magnitude
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    v = (T)((double)(int64_t)(state >> 11) / (double)(1LL << 40) - 2048.0) * (T)1.37;
  }
  Shape os, ks, rs;
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
    bool red = std::find(axes.begin(), axes.end(), d) != axes.end();
    (red ? rs : os).push_back(shape[(size_t)d]);
  }
  std::vector<std::vector<T>> gathered((size_t)numel(os));
  for (int64_t f = 0; f < n; ++f) {  // row-major over the input = row-major over reduced indices
    Shape i = unravel(f, shape), o;
    for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) o.push_back(i[(size_t)d]);
    gathered[(size_t)ravel(o, os)].push_back(in[(size_t)f]);
  }
  std::vector<T> got(gathered.size());
  shm_reduce(std::is_same_v<T, float> ? SHM_F32 : SHM_F64, SHM_REDUCE_SUM, in.data(),
             (int32_t)shape.size(), shape.data(), axes.data(), (int32_t)axes.size(), got.data());
  for (size_t k = 0; k < got.size(); ++k) {
    const std::vector<T> &g = gathered[k];
    T want = T(0) + pairwiseReference(g.data(), (int64_t)g.size());
    INFO("output " << k << " of " << got.size() << ", " << g.size() << " inputs");
    REQUIRE(std::memcmp(&got[k], &want, sizeof(T)) == 0);
  }
}

TEST_CASE("float sums are numpy's pairwise tree for any axes", "[kernels]") {
  checkPairwise<float>({1000}, {0});
  checkPairwise<float>({7}, {0});
  checkPairwise<float>({3000, 3}, {0});
  checkPairwise<float>({3, 3000}, {1});
  checkPairwise<float>({300, 600}, {0});          // tiles of 256 neighbouring outputs
  checkPairwise<float>({20, 30, 40}, {0, 2});     // gathered leaves
  checkPairwise<float>({20, 30, 40}, {1});
  checkPairwise<float>({5, 1, 300, 2}, {0, 2});   // size-1 dimension between reduced ones
  checkPairwise<float>({2, 700, 3, 5}, {1, 2});
  checkPairwise<float>({130, 260}, {0, 1});
  checkPairwise<float>({4, 5}, {});
  checkPairwise<double>({17, 1, 190}, {0, 2});
  checkPairwise<double>({5000}, {0});
}

TEST_CASE("float sums: 2^25 ones are exact; -0 and NaN", "[kernels]") {
  const int64_t n = (int64_t)1 << 25;  // summed left to right in f32 this would stop at 2^24
  std::vector<float> ones((size_t)n, 1.0f);
  float r = 0;
  const int64_t shape[1] = {n}, ax0[1] = {0};
  shm_reduce(SHM_F32, SHM_REDUCE_SUM, ones.data(), 1, shape, ax0, 1, &r);
  CHECK(r == 33554432.0f);
  const float negZero[2] = {-0.0f, -0.0f}, withNan[3] = {1, NAN, 2};
  const int64_t s2[1] = {2}, s3[1] = {3};
  shm_reduce(SHM_F32, SHM_REDUCE_SUM, negZero, 1, s2, ax0, 1, &r);
  CHECK((r == 0 && !std::signbit(r)));  // 0 + (-0), as numpy
  shm_reduce(SHM_F32, SHM_REDUCE_SUM, withNan, 1, s3, ax0, 1, &r);
  CHECK(std::isnan(r));
}

namespace {
// shm_matmul of small-integer operands (so every dtype is exact) against a double loop, for
// every combination of the transpose flags.
void check_matmul_exact(int64_t B, int64_t M, int64_t K, int64_t N, std::initializer_list<int32_t> dtypes) {
  std::vector<double> a((size_t)(B * M * K)), b((size_t)(B * K * N)), want((size_t)(B * M * N), 0);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (double)((int)(i * 5) % 7) - 3;
  for (size_t i = 0; i < b.size(); ++i) b[i] = (double)((int)(i * 3) % 5) - 2;
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k)
          want[(size_t)((bb * M + i) * N + j)] += a[(size_t)((bb * M + i) * K + k)] * b[(size_t)((bb * K + k) * N + j)];
  // The same operands stored transposed per batch block (a as [B, K, M], b as [B, N, K]), for
  // the transpose flags.
  std::vector<double> at(a.size()), bt(b.size());
  for (int64_t bb = 0; bb < B; ++bb) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) at[(size_t)((bb * K + k) * M + i)] = a[(size_t)((bb * M + i) * K + k)];
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) bt[(size_t)((bb * N + j) * K + k)] = b[(size_t)((bb * K + k) * N + j)];
  }
  for (int32_t dt : dtypes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        auto ab = to_bytes(ta ? at : a, dt), bbytes = to_bytes(tb ? bt : b, dt);
        std::vector<unsigned char> out((size_t)(B * M * N * esize(dt)));
        shm_matmul(dt, ab.data(), bbytes.data(), out.data(), B, M, K, N, ta, tb);
        INFO("[" << M << ", " << K << "] @ [" << K << ", " << N << "], dtype " << dt << ", trans_lhs " << ta
                 << ", trans_rhs " << tb);
        CHECK(from_bytes(out.data(), B * M * N, dt) == want);
      }
}
} // namespace

TEST_CASE("matmul f32 / f64 / i32 / i64 / f16 / bf16 with batch", "[kernels][blas]") {
  openblas_set_num_threads(1);
  check_matmul_exact(2, 3, 4, 5, {SHM_F32, SHM_F64, SHM_I32, SHM_I64, SHM_F16, SHM_BF16});
  // From 32^3 multiply-adds up f32 goes to oneDNN's sgemm (odd sizes: its edge kernels); f16
  // too (widened to f32), whose integers are exact up to 2048.
  check_matmul_exact(2, 37, 41, 29, {SHM_F32, SHM_F16});
  check_matmul_exact(1, 1, 1024, 64, {SHM_F32});
  float z[4] = {9, 9, 9, 9};
  shm_matmul(SHM_F32, nullptr, nullptr, z, 1, 2, 0, 2, 0, 0); // k == 0: zeros
  for (float v : z) CHECK(v == 0);
}

TEST_CASE("f16 / bf16 kernels accumulate in f32 and round once; i64 wraps", "[kernels][blas]") {
  openblas_set_num_threads(1);
  const int64_t n = 4096;
  std::vector<uint16_t> ones((size_t)n, shm::f32_to_bf16(1.0f));
  uint16_t out = 0;
  const int64_t shape[1] = {n}, axes[1] = {0};
  shm_reduce(SHM_BF16, SHM_REDUCE_SUM, ones.data(), 1, shape, axes, 1, &out);
  CHECK(shm::bf16_to_f32(out) == 4096.0f);  // a bf16 accumulator would stop at 256
  std::vector<uint16_t> h((size_t)n, shm::f32_to_f16(1.0f));
  shm_reduce(SHM_F16, SHM_REDUCE_SUM, h.data(), 1, shape, axes, 1, &out);
  CHECK(shm::f16_to_f32(out) == 4096.0f);   // an f16 accumulator would stop at 2048
  shm_matmul(SHM_BF16, ones.data(), ones.data(), &out, 1, 1, n, 1, 0, 0);
  CHECK(shm::bf16_to_f32(out) == 4096.0f);
  std::vector<uint16_t> c((size_t)n);
  shm_cumsum(SHM_BF16, 0, ones.data(), 1, n, 1, c.data());
  CHECK(shm::bf16_to_f32(c[256]) == 256.0f);  // 257 rounded (to even)
  CHECK(shm::bf16_to_f32(c[257]) == 258.0f);
  CHECK(shm::bf16_to_f32(c[(size_t)n - 1]) == 4096.0f);
  // scatter_add rounds every addition, as XLA's scatter: 300 ones into one element give 256
  std::vector<int32_t> idx(300, 0);
  uint16_t zero[1] = {0}, acc[1];
  shm_scatter_add(SHM_BF16, zero, 1, 1, 1, idx.data(), 300, ones.data(), acc);
  CHECK(shm::bf16_to_f32(acc[0]) == 256.0f);
  // max with a NaN, argmax on f16
  uint16_t x[4] = {shm::f32_to_f16(1.0f), shm::f32_to_f16(3.0f), shm::f32_to_f16(NAN), shm::f32_to_f16(2.0f)};
  const int64_t s4[1] = {4};
  shm_reduce(SHM_F16, SHM_REDUCE_MAX, x, 1, s4, axes, 1, &out);
  CHECK(std::isnan(shm::f16_to_f32(out)));
  int32_t am = -1;
  shm_argmax(SHM_F16, 0, x, 1, 4, 1, &am);
  CHECK(am == 2);
  // i64: sums and products wrap modulo 2^64
  int64_t big[2] = {INT64_MAX, 2}, s = 0;
  const int64_t s2[1] = {2};
  shm_reduce(SHM_I64, SHM_REDUCE_SUM, big, 1, s2, axes, 1, &s);
  CHECK(s == INT64_MIN + 1);
  int64_t iota6[6];
  const int64_t sh6[1] = {6};
  shm_iota(SHM_I64, iota6, 1, sh6, 0);
  CHECK(iota6[5] == 5);
  uint16_t hi[3];
  const int64_t sh3[1] = {3};
  shm_iota(SHM_F16, hi, 1, sh3, 0);
  CHECK(shm::f16_to_f32(hi[2]) == 2.0f);
}

TEST_CASE("slice with strides", "[kernels]") {
  std::vector<int32_t> in(30);
  for (int i = 0; i < 30; ++i) in[(size_t)i] = i;
  const int64_t shape[2] = {5, 6}, start[2] = {1, 0}, limit[2] = {5, 6}, strides[2] = {2, 4};
  int32_t out[4];
  shm_slice(SHM_I32, in.data(), 2, shape, start, limit, strides, out);
  CHECK(std::vector<int32_t>(out, out + 4) == std::vector<int32_t>{6, 10, 18, 22});
  const int64_t start2[2] = {2, 1}, limit2[2] = {3, 4};
  int32_t out2[3];
  shm_slice(SHM_I32, in.data(), 2, shape, start2, limit2, nullptr, out2);
  CHECK(std::vector<int32_t>(out2, out2 + 3) == std::vector<int32_t>{13, 14, 15});
}

TEST_CASE("dynamic_slice and dynamic_update_slice clamp like JAX", "[kernels]") {
  std::vector<float> in(12);
  for (int i = 0; i < 12; ++i) in[(size_t)i] = (float)i;
  const int64_t shape[2] = {3, 4}, sizes[2] = {2, 2};
  float out[4];
  const int64_t st1[2] = {1, 1};
  shm_dynamic_slice(SHM_F32, in.data(), 2, shape, st1, sizes, out);
  CHECK(std::vector<float>(out, out + 4) == std::vector<float>{5, 6, 9, 10});
  const int64_t st2[2] = {5, -3}; // clamped to (1, 0)
  shm_dynamic_slice(SHM_F32, in.data(), 2, shape, st2, sizes, out);
  CHECK(std::vector<float>(out, out + 4) == std::vector<float>{4, 5, 8, 9});
  const float upd[4] = {-1, -2, -3, -4};
  std::vector<float> res(12);
  const int64_t st3[2] = {0, 3}; // clamped to (0, 2)
  shm_dynamic_update_slice(SHM_F32, in.data(), 2, shape, upd, sizes, st3, res.data());
  CHECK(res == std::vector<float>{0, 1, -1, -2, 4, 5, -3, -4, 8, 9, 10, 11});
}

TEST_CASE("concatenate and iota", "[kernels]") {
  const float a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
  const void *ins[2] = {a, b};
  const int64_t shapes[4] = {2, 2, 2, 1};
  float out[6];
  shm_concatenate(SHM_F32, 2, ins, 2, shapes, 1, out);
  CHECK(std::vector<float>(out, out + 6) == std::vector<float>{1, 2, 5, 3, 4, 6});
  const int64_t shapes0[4] = {2, 2, 1, 2};
  const float c[2] = {7, 8};
  const void *ins0[2] = {a, c};
  shm_concatenate(SHM_F32, 2, ins0, 2, shapes0, 0, out);
  CHECK(std::vector<float>(out, out + 6) == std::vector<float>{1, 2, 3, 4, 7, 8});
  int32_t io[6];
  const int64_t is[2] = {2, 3};
  shm_iota(SHM_I32, io, 2, is, 1);
  CHECK(std::vector<int32_t>(io, io + 6) == std::vector<int32_t>{0, 1, 2, 0, 1, 2});
  double iod[6];
  shm_iota(SHM_F64, iod, 2, is, 0);
  CHECK(std::vector<double>(iod, iod + 6) == std::vector<double>{0, 0, 0, 1, 1, 1});
}

// ---- print --------------------------------------------------------------------------------

TEST_CASE("print format", "[print]") {
  auto pr = [](const char *label, int32_t dt, Shape shape, const void *data) {
    return capture_stdout([&] { shm_print(label, dt, (int32_t)shape.size(), shape.data(), data); });
  };
  const float s = 3.5f;
  CHECK(pr("x", SHM_F32, {}, &s) == "x: f32[] = 3.5\n");
  CHECK(pr("", SHM_F32, {}, &s) == "f32[] = 3.5\n");
  const float v[3] = {1, 0.5f, 12345678};
  CHECK(pr("v", SHM_F32, {3}, v) == "v: f32[3]\n[1, 0.5, 1.23457e+07]\n");
  float m[6];
  for (int i = 0; i < 6; ++i) m[i] = (float)i;
  CHECK(pr("label", SHM_F32, {2, 3}, m) == "label: f32[2,3]\n[[0, 1, 2],\n [3, 4, 5]]\n");
  CHECK(pr(nullptr, SHM_F32, {2, 3}, m) == "f32[2,3]\n[[0, 1, 2],\n [3, 4, 5]]\n");
  int32_t t[12];
  for (int i = 0; i < 12; ++i) t[i] = i - 2;
  CHECK(pr("t", SHM_I32, {2, 3, 2}, t) ==
        "t: i32[2,3,2]\n"
        "[[[-2, -1],\n"
        "  [0, 1],\n"
        "  [2, 3]],\n"
        " [[4, 5],\n"
        "  [6, 7],\n"
        "  [8, 9]]]\n");
  const unsigned char b[2] = {1, 0};
  CHECK(pr("b", SHM_BOOL, {2}, b) == "b: bool[2]\n[true, false]\n");
  CHECK(pr("b", SHM_BOOL, {}, b) == "b: bool[] = true\n");
  const double d[4] = {NAN, -NAN, INFINITY, -1e-7};
  CHECK(pr("d", SHM_F64, {4}, d) == "d: f64[4]\n[nan, nan, inf, -1e-07]\n");
  CHECK(pr("e", SHM_F32, {2, 0}, nullptr) == "e: f32[2,0]\n[[]]\n");
  const float col[2] = {1, 2};
  CHECK(pr("c", SHM_F32, {2, 1}, col) == "c: f32[2,1]\n[[1],\n [2]]\n");
}

// ---- random -------------------------------------------------------------------------------

TEST_CASE("random is deterministic and well distributed", "[random]") {
  const int64_t n = 100000;
  std::vector<float> a((size_t)n), b((size_t)n), c((size_t)n);
  shm_random(SHM_F32, SHM_RANDOM_UNIFORM, 42, a.data(), n);
  shm_random(SHM_F32, SHM_RANDOM_UNIFORM, 42, b.data(), n);
  shm_random(SHM_F32, SHM_RANDOM_UNIFORM, 43, c.data(), n);
  CHECK(a == b);
  CHECK(a != c);
  double mean = 0;
  for (float v : a) {
    REQUIRE(v >= 0.0f);
    REQUIRE(v < 1.0f);
    mean += v;
  }
  CHECK(std::abs(mean / n - 0.5) < 0.01);
  // a prefix of a longer draw is the shorter draw (counter-based)
  std::vector<float> p(10);
  shm_random(SHM_F32, SHM_RANDOM_UNIFORM, 42, p.data(), 10);
  CHECK(std::vector<float>(a.begin(), a.begin() + 10) == p);
  std::vector<double> z((size_t)n);
  shm_random(SHM_F64, SHM_RANDOM_NORMAL, 7, z.data(), n);
  double m1 = 0, m2 = 0;
  for (double v : z) {
    m1 += v;
    m2 += v * v;
  }
  m1 /= n;
  m2 /= n;
  CHECK(std::abs(m1) < 0.02);
  CHECK(std::abs(m2 - 1) < 0.02);
  std::vector<int32_t> ints(1000);
  shm_random(SHM_I32, SHM_RANDOM_UNIFORM, 1, ints.data(), 1000);
  for (int32_t v : ints) REQUIRE(v >= 0);
}

namespace {
std::string format_random(int32_t dt, int32_t kind, int64_t seed, int64_t n) {
  std::vector<unsigned char> buf((size_t)(n * 8) + 8);
  shm_random(dt, kind, seed, buf.data(), n);
  std::string s;
  char tmp[64];
  for (int64_t i = 0; i < n; ++i) {
    switch (dt) {
    case SHM_F32: std::snprintf(tmp, sizeof tmp, "%a", (double)((float *)buf.data())[i]); break;
    case SHM_F64: std::snprintf(tmp, sizeof tmp, "%a", ((double *)buf.data())[i]); break;
    case SHM_I32: std::snprintf(tmp, sizeof tmp, "%d", ((int32_t *)buf.data())[i]); break;
    case SHM_BOOL: std::snprintf(tmp, sizeof tmp, "%s", buf[(size_t)i] ? "true" : "false"); break;
    case SHM_F16: std::snprintf(tmp, sizeof tmp, "%a", (double)shm::f16_to_f32(((uint16_t *)buf.data())[i])); break;
    case SHM_BF16: std::snprintf(tmp, sizeof tmp, "%a", (double)shm::bf16_to_f32(((uint16_t *)buf.data())[i])); break;
    }
    s += tmp;
    s += '\n';
  }
  return s;
}

std::string run_python_rng(const char *kind, const char *dt, int64_t seed, int64_t n) {
  const std::string cmd = "/usr/bin/python3 " + std::string(SHMAPC_TESTS_DIR) + "/numpy/shm_rng.py " + kind + " " + dt +
                          " " + std::to_string(seed) + " " + std::to_string(n);
  std::FILE *p = popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
  pclose(p);
  return out;
}

// Python's float.hex() and C's %a spell the same double differently; normalise both to the
// bit pattern.
std::string normalise_hex(const std::string &text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.find("0x") != std::string::npos) {
      double v = std::strtod(line.c_str(), nullptr);
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      line = std::to_string(bits);
    }
    out += line + "\n";
  }
  return out;
}
} // namespace

TEST_CASE("random matches the numpy re-implementation bit for bit", "[random][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) {
    WARN("no /usr/bin/python3: skipped");
    return;
  }
  struct {
    const char *kind, *dt;
    int32_t k, d;
    int64_t seed;
  } cases[] = {{"uniform", "f32", SHM_RANDOM_UNIFORM, SHM_F32, 0},
               {"uniform", "f64", SHM_RANDOM_UNIFORM, SHM_F64, -5},
               {"uniform", "i32", SHM_RANDOM_UNIFORM, SHM_I32, 123456789012345},
               {"uniform", "bool", SHM_RANDOM_UNIFORM, SHM_BOOL, 3},
               {"normal", "f32", SHM_RANDOM_NORMAL, SHM_F32, 1},
               {"normal", "f64", SHM_RANDOM_NORMAL, SHM_F64, 2},
               {"normal", "f64", SHM_RANDOM_NORMAL, SHM_F64, -77},
               {"uniform", "f16", SHM_RANDOM_UNIFORM, SHM_F16, 4},
               {"uniform", "bf16", SHM_RANDOM_UNIFORM, SHM_BF16, 5},
               {"normal", "f16", SHM_RANDOM_NORMAL, SHM_F16, 6},
               {"normal", "bf16", SHM_RANDOM_NORMAL, SHM_BF16, -7}};
  for (auto &c : cases) {
    INFO(c.kind << " " << c.dt << " seed " << c.seed);
    const std::string py = run_python_rng(c.kind, c.dt, c.seed, 2000);
    REQUIRE(!py.empty());
    CHECK(normalise_hex(py) == normalise_hex(format_random(c.d, c.k, c.seed, 2000)));
  }
}

// ---- fatal errors (in a forked child: they exit the process) --------------------------------

#ifndef SHM_TSAN // TSan does not support forking a multi-threaded process reliably

namespace {

void bad_ppermute_body(shm_device *dev, void **outs, void **ins) {
  const int32_t x = 0;
  const int64_t pairs[4] = {0, 1, 2, 1}; // device 1 receives twice
  float a = 0, b;
  shm_ppermute(dev, SHM_F32, &a, &b, 0, nullptr, pairs, 2, &x, 1);
}
} // namespace

TEST_CASE("fatal errors exit with status 2 and a message", "[fatal]") {
  std::string err;
  SECTION("collective outside a shmap") {
    CHECK(run_child([] {
      float a = 1, b;
      const int32_t x = 0;
      shm_psum(nullptr, SHM_F32, &a, &b, 0, nullptr, &x, 1);
    }, &err) == 2);
    CHECK(err.find("shmap runtime error: psum: collective outside a shmap") != std::string::npos);
  }
  SECTION("invalid ppermute") {
    CHECK(run_child([] {
      const int64_t mesh[1] = {4};
      shm_run_shmap(1, mesh, nullptr, bad_ppermute_body, 0, nullptr, nullptr, 0, nullptr, nullptr);
    }, &err) == 2);
    CHECK(err.find("ppermute: device 1 receives twice") != std::string::npos);
  }
  SECTION("indivisible dimension") {
    CHECK(run_child([] {
      const int64_t mesh[1] = {4}, shape[1] = {6};
      const int32_t spec[2] = {1, 0};
      float in[6] = {0};
      void *ins[1] = {in};
      shm_array_desc d{1, shape, SHM_F32, spec, 0};
      shm_run_shmap(1, mesh, nullptr, bad_ppermute_body, 1, ins, &d, 0, nullptr, nullptr);
    }, &err) == 2);
    CHECK(err.find("dimension 0 of size 6 is not divisible by 4") != std::string::npos);
  }
  SECTION("untiled psum_scatter of the wrong size") {
    CHECK(run_child([] {
      const int64_t mesh[1] = {4};
      shm_run_shmap(1, mesh, nullptr, [](shm_device *dev, void **, void **) {
        const int32_t x = 0;
        const int64_t shape[1] = {3};
        float a[3] = {0}, b[1];
        shm_psum_scatter(dev, SHM_F32, a, b, 1, shape, 0, 0, &x, 1);
      }, 0, nullptr, nullptr, 0, nullptr, nullptr);
    }, &err) == 2);
    CHECK(err.find("psum_scatter: dimension 0 has size 3, not equal to the group size 4") != std::string::npos);
  }
}
#endif

TEST_CASE("shm_alloc keeps large blocks for reuse; small ones and sanitizer builds go to glibc", "[memory]") {
#if defined(__SANITIZE_ADDRESS__)
  const bool cached = false;  // memory.cpp: ASan sees every use after free
#else
  const bool cached = true;
#endif
  // A training step frees a 4 MB gradient and allocates one of the same size the next step:
  // the same block comes back (no fresh pages to fault in), aligned as aligned_alloc's.
  void *a = shm_alloc(4 << 20);
  REQUIRE(a);
  CHECK((uintptr_t)a % 64 == 0);
  std::memset(a, 1, 4 << 20);
  shm_free(a);
  void *b = shm_alloc((4 << 20) - 100);  // the same whole number of pages
  CHECK((b == a) == cached);
  void *c = shm_alloc(4 << 20);           // the cache held one block: a fresh one
  CHECK(c != b);
  CHECK((uintptr_t)c % 64 == 0);
  shm_free(b);
  shm_free(c);
  void *small = shm_alloc(100);
  CHECK((uintptr_t)small % 64 == 0);
  shm_free(small);
  shm_free(nullptr);
}

namespace {
void mark_range(void *args, int64_t lo, int64_t hi) {
  auto *hits = static_cast<std::vector<std::atomic<int>> *>(args);
  for (int64_t i = lo; i < hi; ++i) (*hits)[(size_t)i]++;
}
} // namespace

TEST_CASE("shm_parallel_for covers [0, n) once, split on the host, by its share on a device", "[pool]") {
  for (int64_t n : {0, 1, 100, 65535, 65536, 100003, 1 << 20}) {
    std::vector<std::atomic<int>> hits((size_t)n);
    shm_parallel_for(mark_range, &hits, n);
    int64_t wrong = 0;
    for (auto &h : hits) wrong += h.load() != 1;
    INFO("n = " << n);
    CHECK(wrong == 0);
  }
  // On the host a large loop is split over the usable cores (one range each).
  std::vector<std::atomic<int>> hits((size_t)1 << 20);
  std::atomic<int> calls{0};
  static std::atomic<int> *g_calls;
  g_calls = &calls;
  shm_parallel_for([](void *a, int64_t lo, int64_t hi) { g_calls->fetch_add(1); mark_range(a, lo, hi); }, &hits,
                   (int64_t)hits.size());
  CHECK(calls.load() == std::min(shm::usable_cores(), 32));
  for (auto &h : hits) h.store(0);
  calls.store(0);
  // Inside a shmap body on as many devices as cores (2 here), each device has one core: the
  // loop runs whole on its thread.
  shm::run_on_threads(2, [&](int i) {
    if (i != 0) return;
    shm_parallel_for([](void *a, int64_t lo, int64_t hi) { g_calls->fetch_add(1); mark_range(a, lo, hi); }, &hits,
                     (int64_t)hits.size());
  });
  CHECK(calls.load() == 1);
  int64_t wrong = 0;
  for (auto &h : hits) wrong += h.load() != 1;
  CHECK(wrong == 0);
}

TEST_CASE("a device thread splits its loops over its share of the cores, on threads of its own", "[pool]") {
  // A call on d devices gives each usable_cores / d of the cores (at least one): a mesh with
  // fewer devices than cores puts the idle ones to work; with as many, each loop runs whole.
  const int cores = shm::usable_cores();
  for (int devices : {1, 2, 3}) {
    // (Catch's CHECK is for the test's thread: the devices record, the test checks.)
    std::vector<std::vector<std::thread::id>> ids((size_t)devices);
    std::vector<int> teamBefore((size_t)devices), teamAfter((size_t)devices), onDeviceAfter((size_t)devices);
    std::mutex m;
    shm::run_on_threads(devices, [&](int d) {
      teamBefore[(size_t)d] = shm::team_size();
      struct Args {
        std::vector<std::thread::id> *ids;
        std::mutex *m;
      } args{&ids[(size_t)d], &m};
      shm_parallel_for([](void *a, int64_t, int64_t) {
        auto *x = static_cast<Args *>(a);
        std::lock_guard<std::mutex> lk(*x->m);
        x->ids->push_back(std::this_thread::get_id());
      }, &args, 1 << 20);
      onDeviceAfter[(size_t)d] = shm::on_device_thread();  // still, after its team ran
      teamAfter[(size_t)d] = shm::team_size();
    });
    for (int d = 0; d < devices; ++d) {
      INFO("devices " << devices << ", device " << d);
      const int share = std::max(1, cores / devices + (d < cores % devices ? 1 : 0));
      CHECK(teamBefore[(size_t)d] == share);
      CHECK(teamAfter[(size_t)d] == share);
      CHECK(onDeviceAfter[(size_t)d] == 1);
      std::set<std::thread::id> distinct(ids[(size_t)d].begin(), ids[(size_t)d].end());
      CHECK(ids[(size_t)d].size() == (size_t)std::min(share, 32));
      CHECK(distinct.size() == ids[(size_t)d].size());
    }
  }
  CHECK(!shm::on_device_thread());
}

TEST_CASE("f32 matmul: the same bits on any number of cores", "[kernels][blas][pool]") {
  // Large products are split into fixed column panels shared by the cores at hand, and a batch
  // of small ones by product: computed on the host (every core) and on a device thread of a
  // mesh of as many devices as cores (one core each), the bits must be the same.
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  struct Shape { int64_t batch, m, k, n; int32_t ta, tb; };
  for (Shape sh : {Shape{1, 256, 512, 1024, 0, 0}, Shape{1, 1024, 256, 512, 1, 0}, Shape{1, 256, 1024, 1000, 0, 1},
                   Shape{1, 300, 777, 1100, 1, 1}, Shape{1, 1141, 1100, 990, 1, 1}, Shape{64, 64, 64, 64, 0, 1}}) {
    std::vector<float> a((size_t)(sh.batch * sh.m * sh.k)), b((size_t)(sh.batch * sh.k * sh.n));
    for (float &x : a) x = normal(gen);
    for (float &x : b) x = normal(gen);
    const size_t outN = (size_t)(sh.batch * sh.m * sh.n);
    std::vector<float> host(outN), device(outN);
    shm_matmul(SHM_F32, a.data(), b.data(), host.data(), sh.batch, sh.m, sh.k, sh.n, sh.ta, sh.tb);
    const int cores = shm::usable_cores();
    shm::run_on_threads(cores, [&](int d) {
      if (d == 0) shm_matmul(SHM_F32, a.data(), b.data(), device.data(), sh.batch, sh.m, sh.k, sh.n, sh.ta, sh.tb);
    });
    INFO("batch " << sh.batch << " m " << sh.m << " k " << sh.k << " n " << sh.n << " ta " << sh.ta << " tb " << sh.tb);
    CHECK(std::memcmp(host.data(), device.data(), outN * sizeof(float)) == 0);
  }
}

// The rare path of the compiler's sin and cos: x = j pi/2 + hi + lo, checked through glibc's
// x87 long double sin (accurate for any argument): sin(x) is sin, cos, -sin or -cos of hi + lo
// by j. Also under the sanitizers (tools/test.sh).
TEST_CASE("shm_rem_pio2 reduces any double exactly", "[math]") {
  std::mt19937_64 rng(5);
  std::vector<double> xs = {1048576.0, -1048576.0, 1e6 + 0.5, 1e22, -1e22, 1.7976931348623157e308, -3.4e38,
                            std::ldexp(1.0, 1000), 6381956970095103.0 * std::ldexp(1.0, 797), 5.0, -2.5, 0.5};
  for (int i = 0; i < 20000; ++i) {
    double x = std::ldexp(1.0 + (double)(rng() >> 11) * 0x1p-53, 20 + (int)(rng() % 1000));
    xs.push_back(rng() & 1 ? -x : x);
  }
  for (double x : xs) {
    double hi, lo;
    const int32_t j = shm_rem_pio2(x, &hi, &lo);
    REQUIRE(j >= 0);
    REQUIRE(j <= 3);
    REQUIRE(std::fabs(hi) <= 0.7853981633974484);
    const long double r = (long double)hi + (long double)lo;
    const long double viaReduction = j == 0 ? sinl(r) : j == 1 ? cosl(r) : j == 2 ? -sinl(r) : -cosl(r);
    INFO("x = " << x << ", j = " << j << ", r = " << (double)r);
    CHECK(std::fabs((double)(viaReduction - sinl((long double)x))) <= 1e-17 + 1e-15 * std::fabs((double)sinl(x)));
  }
  double hi, lo;
  shm_rem_pio2(INFINITY, &hi, &lo);
  CHECK(std::isnan(hi));
  shm_rem_pio2(NAN, &hi, &lo);
  CHECK(std::isnan(hi));
}

// ---- pipelines: stage programs at once, messages between them

namespace {

// Three groups pass a counter along and back, 50 times: group g adds g + 1 on the way forward,
// group 2 doubles it, and each adds 10 * (g + 1) on the way back. The messages of each round
// are on channels of their own; each group's result is the sum of what it saw.
constexpr int kRounds = 50;
int channelOf(int round, int hop) { return round * 4 + hop; }  // hops 0, 1 forward; 2, 3 back

void stage0(shm_device *, void **outs, void **ins) {
  double seen = 0, start = *(double *)ins[0];
  for (int r = 0; r < kRounds; ++r) {
    double x = start + r + 1;
    shm_pipe_send(channelOf(r, 0), &x, sizeof x);
    double back = 0;
    shm_pipe_recv(channelOf(r, 3), &back, sizeof back);
    seen += back + 10;
  }
  *(double *)outs[0] = seen;
}

void stage1(shm_device *, void **outs, void **) {
  double seen = 0;
  for (int r = 0; r < kRounds; ++r) {
    double x = 0;
    shm_pipe_recv(channelOf(r, 0), &x, sizeof x);
    x += 2;
    shm_pipe_send(channelOf(r, 1), &x, sizeof x);
    double back = 0;
    shm_pipe_recv(channelOf(r, 2), &back, sizeof back);
    back += 20;
    shm_pipe_send(channelOf(r, 3), &back, sizeof back);
    seen += back;
  }
  *(double *)outs[0] = seen;
}

void stage2(shm_device *, void **outs, void **) {
  double seen = 0;
  for (int r = 0; r < kRounds; ++r) {
    double x = 0;
    shm_pipe_recv(channelOf(r, 1), &x, sizeof x);
    x = 2 * (x + 3) + 30;
    shm_pipe_send(channelOf(r, 2), &x, sizeof x);
    seen += x;
  }
  *(double *)outs[0] = seen;
}

} // namespace

TEST_CASE("a pipeline runs its stage programs at once and delivers every message", "[pipeline]") {
  double start = 5, r0 = 0, r1 = 0, r2 = 0;
  void *ins[] = {&start};
  void *outs[] = {&r0, &r1, &r2};
  const shm_fn bodies[] = {stage0, stage1, stage2};
  const int32_t nouts[] = {1, 1, 1};
  const int64_t bytes[] = {8, 8, 8};
  const int32_t deviceGroups[] = {0, 1, 2};
  std::vector<int32_t> ends;
  for (int r = 0; r < kRounds; ++r)
    for (int32_t e : {0, 1, 1, 2, 2, 1, 1, 0}) ends.push_back(e);
  const int64_t inBytes[] = {8};
  const int32_t inGroups[] = {-1};  // (every group's)
  shm_run_pipeline(3, bodies, 1, ins, inBytes, inGroups, nouts, outs, bytes, kRounds * 4, ends.data(), 3, deviceGroups, "ping-pong", 0.0);
  double want0 = 0, want1 = 0, want2 = 0;
  for (int r = 0; r < kRounds; ++r) {
    double x = start + r + 1 + 2, at2 = 2 * (x + 3) + 30, at1 = at2 + 20;
    want2 += at2;
    want1 += at1;
    want0 += at1 + 10;
  }
  REQUIRE(r0 == want0);
  REQUIRE(r1 == want1);
  REQUIRE(r2 == want2);
}

namespace {
// Each group's stage program runs a shmap of 4 devices (back-to-back psums and all_gathers)
// several times, the two groups at once, each on its own device threads, and hands the other
// group a value between rounds: the groups' shmaps must not share workers, barriers or
// slots (ThreadSanitizer runs this).
void group_program(int g, void **outs, void **ins) {
  const int64_t mesh[1] = {4};
  const int64_t in_shape[1] = {4}, out_shape[1] = {256};
  const int32_t spec[2] = {1, 0};
  shm_array_desc din{1, in_shape, SHM_F32, spec, 0}, dout{1, out_shape, SHM_F32, spec, 0};
  double total = 0;
  for (int round = 0; round < 3; ++round) {
    float in[4];
    for (int d = 0; d < 4; ++d) in[d] = (float)(*(const double *)ins[0] + g + d);
    std::vector<float> out(256);
    void *sin[1] = {in}, *sout[1] = {out.data()};
    shm_run_shmap(1, mesh, nullptr, chained_body, 1, sin, &din, 1, sout, &dout);
    double mine = out[0], theirs = 0;  // (every device: the mean of the 4 inputs)
    shm_pipe_send(2 * round + g, &mine, 8);
    shm_pipe_recv(2 * round + (1 - g), &theirs, 8);
    total += mine + theirs;
  }
  *(double *)outs[0] = total;
}
void group0(shm_device *, void **outs, void **ins) { group_program(0, outs, ins); }
void group1(shm_device *, void **outs, void **ins) { group_program(1, outs, ins); }
} // namespace

TEST_CASE("pipeline groups run their shmaps at once, each on its own devices", "[pipeline]") {
  double start = 2, r0 = 0, r1 = 0;
  void *ins[] = {&start};
  void *outs[] = {&r0, &r1};
  const shm_fn bodies[] = {group0, group1};
  const int32_t nouts[] = {1, 1};
  const int64_t bytes[] = {8, 8};
  const int32_t deviceGroups[] = {0, 0, 0, 0, 1, 1, 1, 1};  // (a 2 x 4 mesh, its stage axis first)
  const std::vector<int32_t> ends = {0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0};
  const int64_t inBytes[] = {8};
  const int32_t inGroups[] = {-1};
  shm_run_pipeline(2, bodies, 1, ins, inBytes, inGroups, nouts, outs, bytes, 6, ends.data(), 8, deviceGroups, "groups' shmaps", 0.0);
  // chained_body: every device ends with the mean of the 4 inputs plus 0 (its first element):
  // group g's inputs are start + g + d, mean start + g + 1.5; each round adds both groups'.
  const double both = (start + 1.5) + (start + 1 + 1.5);
  REQUIRE(r0 == 3 * both);
  REQUIRE(r1 == 3 * both);
}

// A rank's buffer of a value in layout `spec` on `mesh` (empty spec: whole) over `ranks` ranks:
// its slots, cut from the global array.
static std::vector<float> rankBuffer(const std::vector<float> &global, const std::vector<int64_t> &shape,
                                     const std::vector<int64_t> &mesh, const std::vector<int32_t> &spec, int ranks,
                                     int j) {
  if (spec.empty()) return global;
  int64_t ndev = 1;
  for (int64_t n : mesh) ndev *= n;
  const int64_t per = ndev / ranks;
  shm::MeshCall c((int)ndev, (int)(j * per), (int)per);
  c.mesh_rank = (int32_t)mesh.size();
  for (size_t a = 0; a < mesh.size(); ++a) c.sizes[a] = mesh[a];
  const shm::ArrayPlan p = shm::blocks_plan(c, SHM_F32, (int32_t)shape.size(), shape.data(), spec.data(), "test");
  std::vector<float> out((size_t)(p.block_bytes / 4) * p.slot_offset.size());
  int64_t gstrides[8], bstrides[8], s = 1, b = 1;
  for (int d = (int)shape.size() - 1; d >= 0; --d) gstrides[d] = s, s *= shape[(size_t)d], bstrides[d] = b, b *= p.bshape[d];
  shm::for_each_slot(p, c, [&](size_t slot, const int64_t *start) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += start[d] * gstrides[d];
    shm::copy_strided(4, (int32_t)shape.size(), p.bshape, global.data() + off, gstrides,
                      out.data() + (int64_t)slot * (p.block_bytes / 4), bstrides);
  });
  return out;
}

TEST_CASE("a pipeline message between two layouts brings each receiving rank its slots, each element once",
          "[pipeline]") {
  const std::vector<int64_t> shape{4, 4, 2}, mesh{2, 2};
  std::vector<float> global(32);
  for (size_t i = 0; i < global.size(); ++i) global[i] = (float)i;
  // per dimension: the number of mesh axes, then the axes (the runtime's encoding); {}: whole
  const std::vector<std::vector<int32_t>> specs = {
      {}, {1, 0, 0, 0}, {0, 1, 1, 0}, {1, 0, 1, 1, 0}, {1, 1, 1, 0, 0}, {2, 0, 1, 0, 0}, {0, 0, 1, 0}, {0, 2, 1, 0, 0}};
  int checked = 0;
  for (const auto &from : specs)
    for (const auto &to : specs)
      for (int sendRanks : {1, 2, 4})
        for (int recvRanks : {1, 2, 4}) {
          const shm::MessageEnd a{from.empty() ? 0 : 2, mesh.data(), from.empty() ? nullptr : from.data(), sendRanks};
          const shm::MessageEnd b{to.empty() ? 0 : 2, mesh.data(), to.empty() ? nullptr : to.data(), recvRanks};
          for (int r = 0; r < recvRanks; ++r) {
            const std::vector<float> want = rankBuffer(global, shape, mesh, to, recvRanks, r);
            std::vector<float> got(want.size(), -1.0f);
            int64_t bytes = 0;
            for (int s = 0; s < sendRanks; ++s) {
              const std::vector<float> held = rankBuffer(global, shape, mesh, from, sendRanks, s);
              const shm::MessagePlan p = shm::message_plan(SHM_F32, 3, shape.data(), a, s, b, r);
              std::vector<char> message((size_t)p.bytes);
              shm::pack_message(p, held.data(), message.data());
              shm::unpack_message(p, message.data(), got.data());
              bytes += p.bytes;
            }
            INFO("from spec " << from.size() << " entries, to " << to.size() << ", ranks " << sendRanks << " -> "
                              << recvRanks << ", receiver " << r);
            REQUIRE(got == want);
            REQUIRE(bytes == (int64_t)want.size() * 4);  // (each element of its slots once)
            ++checked;
          }
        }
  REQUIRE(checked == 8 * 8 * 7 * 3);
}
