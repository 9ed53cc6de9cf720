// Copies of equations into another function (the pipeline passes move equations of a function
// into stage programs and stage functions).
#pragma once
#include "ir/IR.h"

#include <map>
#include <vector>

namespace shmapc::passes::pipeline {

using namespace ir;

// Appends to `out` a copy of `e` for `into`: its operands through `vm` (left as they are where
// it has none), fresh results (added to `vm`), and its bodies copied, all their flags kept, so
// that passes that rewrite a body for its one equation (a derived shmap's pruning) rewrite the
// copy's alone. `copies` maps a body to its copy within one copy of a group of equations (a
// backward body's forward part is then the copy of the forward body).
void copyEqnInto(Module &m, const Eqn &e, Func &into, std::map<const Value *, Value *> &vm,
                 std::map<const Func *, Func *> &copies, std::vector<Eqn> &out);

// A copy of `src` with every flag it has (a shmap body's variance checking, out_spec
// locations, a backward body's marks) and its bodies copied; `mesh` its mesh (and its nested
// bodies').
Func *copyFunc(Module &m, const Func &src, const Mesh *mesh);

} // namespace shmapc::passes::pipeline
