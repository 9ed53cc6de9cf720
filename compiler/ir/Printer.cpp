// Prints IR in a jaxpr-like text form (`--emit=ir`):
//
//   shmap_body @f1(x:f32[3,4]{i}) -> (f32[]) mesh m {
//     w:f32[]{i} = reduce_sum[axes=(0,1)] x
//     y:f32[] = psum2[axes=(i)] w
//     return y
//   }
//
// Values print as their source name (name, name_1, ... when a name is rebound); values
// without a source name print as %N. Types print with their variance set as in JAX's note on
// efficient transposition: `{i}` when varying, nothing when invariant.
#include "ir/IR.h"

#include <cmath>

#include <cstdio>
#include <map>
#include <sstream>

namespace shmapc::ir {

namespace {

class Printer {
public:
  explicit Printer(std::ostringstream &out) : out_(out) {}

  // The names func(f) prints f's values (and its nested bodies') by.
  const std::map<const Value *, std::string> &names(const Func &f) {
    names_.clear();
    nameValues(f);
    return names_;
  }

  void func(const Func &f) {
    names_.clear();
    nameValues(f);
    out_ << (f.isShmapBody ? "shmap_body @" : "func @") << f.name << "(";
    params(f);
    out_ << ") -> (";
    for (size_t i = 0; i < f.results.size(); ++i) {
      if (i) out_ << ", ";
      out_ << typeToString(f.results[i]->type, f.mesh);
    }
    out_ << ")";
    if (f.mesh) out_ << " mesh " << f.mesh->name;
    if (f.isShmapBody && !f.checkVma) out_ << " check_vma=false";
    if (f.isShmapBody && !f.autoPbroadcast) out_ << " auto_pbroadcast=false";
    out_ << " {\n";
    body(f, 1);
    out_ << "}\n";
  }

private:
  // Names are assigned per top-level Func, nested bodies included (in print order), so a
  // loop body's values never print with the same name as an outer one: the first value
  // bound to `acc` prints as acc, the next as acc_1, ...; unnamed values as %0, %1, ...
  void nameValues(const Func &f) {
    std::map<std::string, int> seen;
    int unnamed = 0;
    assignNames(f, seen, unnamed);
  }
  void assignNames(const Func &f, std::map<std::string, int> &seen, int &unnamed) {
    for (const Value *p : f.params) assign(p, seen, unnamed);
    for (const Eqn &e : f.eqns) {
      for (const Func *b : e.bodies)
        if (b->isNested) assignNames(*b, seen, unnamed);
      for (const Value *v : e.outs) assign(v, seen, unnamed);
    }
  }
  void assign(const Value *v, std::map<std::string, int> &seen, int &unnamed) {
    if (names_.count(v)) return;
    if (v->hint.empty()) {
      names_[v] = "%" + std::to_string(unnamed++);
      return;
    }
    int k = seen[v->hint]++;
    names_[v] = k == 0 ? v->hint : v->hint + "_" + std::to_string(k);
  }

  std::string name(const Value *v) const {
    auto it = names_.find(v);
    return it == names_.end() ? "<undefined>" : it->second;
  }

  void params(const Func &f) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (i) out_ << ", ";
      out_ << name(f.params[i]) << ":" << typeToString(f.params[i]->type, f.mesh);
    }
  }

  void indent(int depth) {
    for (int i = 0; i < depth; ++i) out_ << "  ";
  }

  void body(const Func &f, int depth) {
    for (const Eqn &e : f.eqns) eqn(f, e, depth);
    indent(depth);
    out_ << "return";
    for (size_t i = 0; i < f.results.size(); ++i) out_ << (i ? ", " : " ") << name(f.results[i]);
    out_ << "\n";
  }

  void eqn(const Func &f, const Eqn &e, int depth) {
    indent(depth);
    for (size_t i = 0; i < e.outs.size(); ++i) {
      if (i) out_ << ", ";
      out_ << name(e.outs[i]) << ":" << typeToString(e.outs[i]->type, f.mesh);
    }
    if (!e.outs.empty()) out_ << " = ";
    out_ << primName(e.prim);
    paramList(f, e);
    for (const Value *v : e.ins) out_ << " " << name(v);
    if (e.prim == Prim::Loop || e.prim == Prim::Cond || e.prim == Prim::While) {
      out_ << " {\n";
      for (size_t b = 0; b < e.bodies.size(); ++b) nested(*e.bodies[b], depth + 1, e, b);
      indent(depth);
      out_ << "}";
    }
    out_ << "\n";
  }

  void nested(const Func &b, int depth, const Eqn &owner, size_t index) {
    indent(depth);
    if (owner.prim == Prim::Cond) out_ << (index == 0 ? "true " : "false ");
    if (owner.prim == Prim::While) out_ << (index == 0 ? "cond " : "body ");
    out_ << "(";
    params(b);
    out_ << ") ->\n";
    body(b, depth + 1);
  }

  void paramList(const Func &f, const Eqn &e) {
    std::vector<std::string> items;
    if (e.prim == Prim::Call || e.prim == Prim::Shmap) items.push_back("@" + e.bodies[0]->name);
    const Mesh *mesh = f.mesh;
    if (e.prim == Prim::Shmap) mesh = e.bodies[0]->mesh;
    for (const auto &[k, v] : e.params) {
      if (e.prim == Prim::Shmap && k == "mesh") {
        items.push_back("mesh=" + (mesh ? mesh->name : std::string("?")));
        continue;
      }
      // `axes` names mesh axes for collectives; for reductions it lists array dimensions.
      bool meshAxes = k == "axes" && primInfo(e.prim).kind == PrimKind::Collective;
      items.push_back(k + "=" + attr(v, meshAxes ? mesh : nullptr, mesh));
    }
    if (items.empty()) return;
    out_ << "[";
    for (size_t i = 0; i < items.size(); ++i) out_ << (i ? ", " : "") << items[i];
    out_ << "]";
  }

  static std::string number(double d) {
    char buf[64];
    // Integers below 2^53 with all their digits (an i64 constant such as 3000000001); other
    // values with 9 significant digits.
    if (d == std::floor(d) && std::fabs(d) < 9007199254740992.0)
      std::snprintf(buf, sizeof buf, "%.0f", d);
    else
      std::snprintf(buf, sizeof buf, "%.9g", d);
    return buf;
  }

  // `axesMesh` is set when an int list names mesh axes; `specMesh` names specs' axes.
  static std::string attr(const Attr &a, const Mesh *axesMesh, const Mesh *specMesh) {
    const Mesh *mesh = axesMesh;
    if (auto *i = std::get_if<int64_t>(&a)) return std::to_string(*i);
    if (auto *d = std::get_if<double>(&a)) return number(*d);
    if (auto *s = std::get_if<std::string>(&a)) return "\"" + *s + "\"";
    if (auto *v = std::get_if<std::vector<int64_t>>(&a)) {
      std::string s = "(";
      for (size_t i = 0; i < v->size(); ++i) {
        if (i) s += ",";
        if (mesh && (*v)[i] >= 0 && (*v)[i] < (int64_t)mesh->axes.size())
          s += mesh->axes[(*v)[i]];
        else s += std::to_string((*v)[i]);
      }
      return s + ")";
    }
    if (auto *v = std::get_if<std::vector<double>>(&a)) {
      std::string s = "[";
      const size_t shown = 8;  // long constants are elided: the IR is for reading
      for (size_t i = 0; i < v->size() && i < shown; ++i) s += (i ? ", " : "") + number((*v)[i]);
      if (v->size() > shown) s += ", ... (" + std::to_string(v->size()) + " values)";
      return s + "]";
    }
    if (auto *v = std::get_if<std::vector<PartitionSpec>>(&a)) {
      std::string s = "(";
      for (size_t i = 0; i < v->size(); ++i) {
        if (i) s += ", ";
        s += specMesh ? specToString((*v)[i], *specMesh) : std::string("P(?)");
      }
      return s + ")";
    }
    return "?";
  }

  std::ostringstream &out_;
  std::map<const Value *, std::string> names_;
};

} // namespace

std::string printFunc(const Func &f) {
  std::ostringstream out;
  Printer(out).func(f);
  return out.str();
}

std::map<const Value *, std::string> printedNames(const Module &m) {
  std::map<const Value *, std::string> all;
  std::ostringstream unused;
  Printer printer(unused);
  for (const auto &f : m.funcs)
    if (!f->isNested) all.merge(std::map<const Value *, std::string>(printer.names(*f)));
  return all;
}

std::string printModule(const Module &m) {
  std::ostringstream out;
  for (const auto &mesh : m.meshes) {
    out << "mesh " << mesh->name << " = <[";
    for (size_t i = 0; i < mesh->axes.size(); ++i)
      out << (i ? ", " : "") << "\"" << mesh->axes[i] << "\"=" << mesh->sizes[i];
    out << "]>\n";
  }
  for (const auto &f : m.funcs) {
    if (f->isNested) continue;
    out << "\n";
    Printer(out).func(*f);
  }
  return out.str();
}

} // namespace shmapc::ir
