// Which axes each factor of an equation is computed along (passes/jit/Partitioner.h): the bytes a
// device puts into collectives for each choice, forward and, for a function under grad,
// backward, and the choice with the fewest.
#include "passes/jit/Partitioner.h"

#include <algorithm>
#include <limits>
#include <tuple>

namespace shmapc::passes::partition {

Refs Partitioner::partOf(const std::vector<Refs> &dims, const rules::DimRef &r, const rules::Factor &f) {
  return f.size ? projectAxes(dims[(size_t)r.dim], r.pre, f.size) : dims[(size_t)r.dim];
}

Partitioner::Assignment Partitioner::assign(const Eqn &e, const rules::FactorRule &rule, std::vector<Refs> axes,
                                            const std::vector<std::vector<Refs>> &outs) const {
  Assignment a;
  a.want.resize(e.ins.size());
  for (size_t i = 0; i < e.ins.size(); ++i) a.want[i].resize((size_t)e.ins[i]->type.rank());
  a.result.resize(e.outs.size());
  for (size_t o = 0; o < e.outs.size(); ++o) a.result[o].resize((size_t)e.outs[o]->type.rank());
  for (size_t k = 0; k < rule.factors.size(); ++k) {
    for (const rules::DimRef &r : rule.factors[k].ins) {
      Refs &d = a.want[(size_t)r.value][(size_t)r.dim];
      d.insert(d.end(), axes[k].begin(), axes[k].end());
    }
    for (const rules::DimRef &r : rule.factors[k].outs) {
      Refs &d = a.result[(size_t)r.value][(size_t)r.dim];
      d.insert(d.end(), axes[k].begin(), axes[k].end());
    }
  }
  for (auto *list : {&a.want, &a.result})
    for (std::vector<Refs> &dims : *list)
      for (Refs &d : dims) d = mergeSubAxes(d);
  for (size_t k = 0; k < rule.factors.size() && e.outs.size() == 1 && a.scatterFactor < 0; ++k) {
    const rules::Factor &f = rule.factors[k];
    if (!f.outs.empty() || axes[k].empty() || f.combine != Prim::Psum) continue;
    for (size_t d = 0; d < outs[0].size(); ++d)
      if (outs[0][d] == axes[k] && a.result[0][d].empty() && even(e.outs[0]->type.shape[d], axes[k])) {
        a.scatterFactor = (int)k, a.scatterDim = (int)d;
        break;
      }
  }
  a.axes = std::move(axes);
  return a;
}

int64_t Partitioner::cost(const Eqn &e, const rules::FactorRule &rule, const Assignment &a,
                          const std::vector<std::vector<Refs>> &outs) const {
  int64_t bytes = 0;
  for (size_t i = 0; i < e.ins.size(); ++i) bytes += moveCost(e.ins[i], a.want[i]);
  std::vector<Refs> at = a.result[0];
  if (a.scatterFactor >= 0) {
    bytes += localBytes(e.outs[0], at);
    at[(size_t)a.scatterDim] = a.axes[(size_t)a.scatterFactor];
  }
  std::set<Prim> combines;
  for (size_t k = 0; k < rule.factors.size(); ++k)
    if (rule.factors[k].outs.empty() && !a.axes[k].empty() && (int)k != a.scatterFactor)
      combines.insert(rule.factors[k].combine);
  bytes += (int64_t)combines.size() * localBytes(e.outs[0], at);
  return bytes + moveBytes(split_, e.outs[0], at, outs[0]);
}

int64_t Partitioner::backwardCost(const Eqn &e, const Assignment &a, const std::vector<std::vector<Refs>> &outs) const {
  Refs varies;
  for (const Refs &axes : a.axes) varies.insert(varies.end(), axes.begin(), axes.end());
  int64_t bytes = 0;
  for (size_t i = 0; i < e.ins.size(); ++i) {
    if (!isFloat(e.ins[i]->type.dtype)) continue;
    auto in = [](const std::vector<Refs> &dims, const AxisRef &r) {
      for (const Refs &d : dims)
        if (std::any_of(d.begin(), d.end(), [&](const AxisRef &h) { return h.overlaps(r); })) return true;
      return false;
    };
    const std::vector<Refs> &held = held_.at(e.ins[i]).dims;
    Refs summed;  // (the axes the product varies along and the operand's block does not)
    for (const AxisRef &r : varies)
      if (!in(a.want[i], r)) summed.push_back(r);
    const int64_t back = moveBytes(split_, e.ins[i], a.want[i], held);
    // (a gather's transpose keeps a block; where it was gathered along axes other than
    // those summed, the sum is made on the block: sink-reductions)
    bool sunk = back == 0;
    for (const Refs &d : held)
      for (const AxisRef &g : d) sunk = sunk && (in(a.want[i], g) || !in({summed}, g));
    if (!summed.empty()) bytes += localBytes(e.ins[i], sunk ? held : a.want[i]);
    bytes += back;
  }
  if (!isFloat(e.outs[0]->type.dtype)) return bytes;
  std::vector<Refs> at = a.result[0];
  if (a.scatterFactor >= 0) {
    at[(size_t)a.scatterDim] = a.axes[(size_t)a.scatterFactor];
    bytes += localBytes(e.outs[0], at);
  }
  return bytes + moveBytes(split_, e.outs[0], outs[0], at);
}

std::vector<Refs> Partitioner::chooseAxes(const Eqn &e, const rules::FactorRule &rule,
                                          const std::vector<std::vector<Refs>> &outs) const {
  std::vector<std::vector<Refs>> candidates(rule.factors.size());
  bool parts = false;
  for (size_t k = 0; k < rule.factors.size(); ++k) {
    const rules::Factor &f = rule.factors[k];
    parts = parts || f.size;
    auto add = [&](const Refs &c) {
      if (std::find(candidates[k].begin(), candidates[k].end(), c) == candidates[k].end()) candidates[k].push_back(c);
    };
    if (!f.outs.empty()) add(partOf(outs[(size_t)f.outs[0].value], f.outs[0], f));
    for (const rules::DimRef &r : f.ins) add(partOf(held_.at(e.ins[(size_t)r.value]).dims, r, f));
    add({});
  }
  std::vector<size_t> pick(rule.factors.size(), 0);
  auto axesOf = [&](const std::vector<size_t> &p) {
    std::vector<Refs> axes;
    for (size_t k = 0; k < p.size(); ++k) axes.push_back(candidates[k][p[k]]);
    return axes;
  };
  auto valid = [&](const std::vector<Refs> &axes) {
    Refs seen;
    for (const Refs &a : axes)
      for (const AxisRef &r : a) {
        if (std::any_of(seen.begin(), seen.end(), [&](const AxisRef &s) { return s.overlaps(r); })) return false;
        seen.push_back(r);
      }
    return true;
  };
  int64_t combinations = 1;
  for (const auto &c : candidates) combinations *= (int64_t)c.size();
  if (parts || combinations > 4096) {  // (the first candidates, a reduced factor's if free)
    std::vector<Refs> axes = axesOf(pick);
    for (size_t k = 0; k < axes.size(); ++k) {
      if (!rule.factors[k].outs.empty()) continue;
      std::vector<Refs> without = axes;
      without[k].clear();
      if (!valid(axes)) axes = without;
    }
    return axes;
  }
  // (each valid assignment: its axes, forward bytes, backward bytes, and how many ways it
  // splits the work: the product of its factors' shard counts)
  struct Scored {
    std::vector<Refs> axes;
    int64_t forward, backward, split;
  };
  std::vector<Scored> scored;
  for (int64_t n = 0; n < combinations; ++n) {
    int64_t rest = n;
    for (size_t k = 0; k < pick.size(); ++k) {
      pick[k] = (size_t)(rest % (int64_t)candidates[k].size());
      rest /= (int64_t)candidates[k].size();
    }
    std::vector<Refs> axes = axesOf(pick);
    if (!valid(axes)) continue;
    const Assignment a = assign(e, rule, axes, outs);
    int64_t split = 1;
    for (const Refs &k : axes) split *= shardCount(k);
    scored.push_back({std::move(axes), cost(e, rule, a, outs), differentiated_ ? backwardCost(e, a, outs) : 0, split});
  }
  // The fewest forward bytes; under grad, the fewest forward plus backward bytes among the
  // assignments that split the work at least as finely as that one (so the backward's
  // gradient sums are weighed against gathers, never avoided by computing whole on every
  // device what was split), at equal bytes the fewer forward bytes, then the earliest.
  const Scored *fastest = nullptr;
  for (const Scored &s : scored)
    if (!fastest || s.forward < fastest->forward) fastest = &s;
  if (!fastest) return {};
  const Scored *best = fastest;
  for (const Scored &s : scored)
    if (s.split >= fastest->split &&
        (s.forward + s.backward < best->forward + best->backward ||
         (s.forward + s.backward == best->forward + best->backward && s.forward < best->forward)))
      best = &s;
  return best->axes;
}

double Partitioner::identity(Prim combine, DType dtype) {
  if (combine == Prim::Psum) return 0;
  // (an i64's extremes as doubles that convert back: 2^63 itself does not)
  const double big = isFloat(dtype) ? std::numeric_limits<double>::infinity()
                     : dtype == DType::I32 ? 2147483647.0
                                           : 9223372036854774784.0;
  return combine == Prim::Pmax ? (isFloat(dtype) || dtype == DType::I64 ? -big : -big - 1) : big;
}

void Partitioner::keepWholeParts(const rules::FactorRule &rule, std::vector<Refs> &axes) {
  std::map<std::tuple<bool, int, int>, bool> before;  // (result?, value, dimension): parts so far whole
  for (size_t k = 0; k < rule.factors.size(); ++k) {
    const rules::Factor &f = rule.factors[k];
    if (!f.size) continue;
    for (const bool isOut : {false, true})
      for (const rules::DimRef &r : isOut ? f.outs : f.ins)
        if (!before.insert({{isOut, r.value, r.dim}, true}).first->second) axes[k].clear();
    for (const bool isOut : {false, true})
      for (const rules::DimRef &r : isOut ? f.outs : f.ins) {
        bool &whole = before[{isOut, r.value, r.dim}];
        whole = whole && shardCount(axes[k]) == f.size;
      }
  }
}

} // namespace shmapc::passes::partition
