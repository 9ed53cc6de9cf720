// IR helpers: primitive table look-ups, types, meshes, partition specs, param accessors.
// The printer is in Printer.cpp and the verifier in Verifier.cpp.
#include "ir/IR.h"

#include <cstdlib>
#include <cstdio>

namespace shmapc::ir {

static const PrimInfo kPrimInfos[] = {
#define PRIM(Id, Name, Kind, NumIn, NumOut) {Name, PrimKind::Kind, NumIn, NumOut},
#include "ir/Primitives.def"
#undef PRIM
};

const PrimInfo &primInfo(Prim p) { return kPrimInfos[(int)p]; }
const char *primName(Prim p) { return primInfo(p).name; }

bool primFromName(const std::string &name, Prim &out) {
  for (int i = 0; i < kNumPrims; ++i)
    if (name == kPrimInfos[i].name) {
      out = (Prim)i;
      return true;
    }
  return false;
}

const char *scheduleName(Schedule s) {
  switch (s) {
  case Schedule::GPipe: return "gpipe";
  case Schedule::OneFOneB: return "1f1b";
  case Schedule::Interleaved: return "interleaved";
  case Schedule::ZeroBubbleH1: return "zb-h1";
  case Schedule::Inference: return "inference";
  }
  return "?";
}

bool scheduleFromName(const std::string &name, Schedule &out) {
  for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved, Schedule::ZeroBubbleH1,
                     Schedule::Inference})
    if (name == scheduleName(s)) {
      out = s;
      return true;
    }
  return false;
}

int64_t PipelineFunc::numStages() const {
  return placement.empty() ? stageAxisSize * virtualStages : (int64_t)placement.size();
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::I32: return "i32";
  case DType::Bool: return "bool";
  case DType::I64: return "i64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  }
  return "?";
}

int64_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32: return 4;
  case DType::F64: return 8;
  case DType::I32: return 4;
  case DType::Bool: return 1;
  case DType::I64: return 8;
  case DType::F16: return 2;
  case DType::BF16: return 2;
  }
  return 0;
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}
bool isInt(DType t) { return t == DType::I32 || t == DType::I64; }
bool isHalf(DType t) { return t == DType::F16 || t == DType::BF16; }

// Products of sizes saturate at INT64_MAX instead of overflowing: sema and checkLimits reject
// anything above the limits (docs/limits.md), and they must see a huge count as huge.
static int64_t saturatingProduct(const std::vector<int64_t> &sizes) {
  int64_t n = 1;
  for (int64_t d : sizes)
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

int64_t Type::numElements() const { return saturatingProduct(shape); }

int64_t Type::byteSize() const {
  int64_t bytes;
  return __builtin_mul_overflow(numElements(), dtypeSize(dtype), &bytes) ? INT64_MAX : bytes;
}

int64_t Mesh::numDevices() const { return saturatingProduct(sizes); }

int64_t Mesh::groupSize(AxisSet axes) const {
  int64_t n = 1;
  for (int64_t a : axisList(axes)) n *= sizes[(size_t)a];
  return n;
}

int Mesh::axisIndex(const std::string &axis) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == axis) return (int)i;
  return -1;
}

std::vector<int64_t> axisList(AxisSet s) {
  std::vector<int64_t> out;
  for (int a = 0; a < 32; ++a)
    if (s & (AxisSet(1) << a)) out.push_back(a);
  return out;
}

AxisSet Eqn::axesParamSet() const {
  AxisSet s = 0;
  if (has("axes"))
    for (int64_t a : intsParam("axes")) s |= AxisSet(1) << a;
  return s;
}

bool changesOnlyShape(Prim p) {
  return p == Prim::BroadcastInDim || p == Prim::Reshape || p == Prim::Convert ||
         p == Prim::Transpose;
}

bool hasEffects(const Eqn &e) {
  if (primInfo(e.prim).kind == PrimKind::Effect) return true;
  for (const Func *body : e.bodies)
    for (const Eqn &q : body->eqns)
      if (hasEffects(q)) return true;
  return false;
}

AxisSet PartitionSpec::axes() const {
  AxisSet s = 0;
  for (const auto &d : dims)
    for (int a : d) s |= AxisSet(1) << a;
  return s;
}

static std::string axisName(const Mesh *mesh, int a) {
  if (mesh && a >= 0 && a < (int)mesh->axes.size()) return mesh->axes[a];
  return "#" + std::to_string(a);
}

std::string typeToString(const Type &t, const Mesh *mesh) {
  std::string s = dtypeName(t.dtype);
  s += "[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(t.shape[i]);
  }
  s += "]";
  if (t.vary) {
    s += "{";
    bool first = true;
    for (int a = 0; a < 32; ++a)
      if (t.vary & (AxisSet(1) << a)) {
        if (!first) s += ",";
        first = false;
        s += axisName(mesh, a);
      }
    s += "}";
  }
  return s;
}

std::string specToString(const PartitionSpec &spec, const Mesh &mesh) {
  std::string s = "P(";
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    if (d) s += ", ";
    const auto &axes = spec.dims[d];
    if (axes.empty()) {
      s += "None";
    } else if (axes.size() == 1) {
      s += "\"" + axisName(&mesh, axes[0]) + "\"";
    } else {
      s += "(";
      for (size_t i = 0; i < axes.size(); ++i) {
        if (i) s += ", ";
        s += "\"" + axisName(&mesh, axes[i]) + "\"";
      }
      s += ")";
    }
  }
  return s + ")";
}

// A missing or mistyped param is a compiler bug (sema builds every eqn), not a user error.
[[noreturn]] static void badParam(const Eqn &e, const std::string &k) {
  std::fprintf(stderr, "shmapc internal error: %s has no param '%s' of the expected kind\n",
               primName(e.prim), k.c_str());
  std::abort();
}

template <typename T> static const T &getParam(const Eqn &e, const std::string &k) {
  auto it = e.params.find(k);
  if (it == e.params.end()) badParam(e, k);
  const T *v = std::get_if<T>(&it->second);
  if (!v) badParam(e, k);
  return *v;
}

int64_t Eqn::intParam(const std::string &k) const { return getParam<int64_t>(*this, k); }
const std::vector<int64_t> &Eqn::intsParam(const std::string &k) const {
  return getParam<std::vector<int64_t>>(*this, k);
}
const std::string &Eqn::strParam(const std::string &k) const {
  return getParam<std::string>(*this, k);
}
const std::vector<double> &Eqn::doublesParam(const std::string &k) const {
  return getParam<std::vector<double>>(*this, k);
}
const std::vector<PartitionSpec> &Eqn::specsParam(const std::string &k) const {
  return getParam<std::vector<PartitionSpec>>(*this, k);
}

Value *Func::newValue(const Type &t, const std::string &hint) {
  values.push_back(Value{nextId++, t, hint});
  return &values.back();
}

Func *Module::newFunc(const std::string &name) {
  funcs.push_back(std::make_unique<Func>());
  funcs.back()->name = name;
  return funcs.back().get();
}

Eqn identityShmap(Module &m, Func &f, const std::string &name, int64_t mesh, const PartitionSpec &spec, Value *x,
                  const Type &block, Loc loc, const std::string &moves) {
  Func *body = m.newFunc(name);
  body->mesh = m.meshes[(size_t)mesh].get();
  body->isShmapBody = true;
  body->loc = body->returnLoc = loc;
  Value *p = body->newValue(block, x->hint);
  body->params.push_back(p);
  body->results.push_back(p);
  body->outSpecLocs.push_back(loc);
  Eqn e;
  e.prim = Prim::Shmap;
  e.loc = loc;
  e.ins = {x};
  Type global = x->type;
  global.vary = 0;
  e.outs = {f.newValue(global, x->hint)};
  e.bodies = {body};
  e.params["mesh"] = mesh;
  e.params["in_specs"] = std::vector<PartitionSpec>{spec};
  e.params["out_specs"] = std::vector<PartitionSpec>{spec};
  e.params["moves"] = moves;
  return e;
}

} // namespace shmapc::ir
