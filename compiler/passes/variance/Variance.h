// Device-variance typing: every value of a shmap body typed with the mesh axes it varies over
// (the rules at each primitive's definition, rules/VarianceRules.h), and the checks that rest on it.
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

#include <vector>

namespace shmapc::passes {

// Infers every value's variance set inside shmap bodies (the device-variance typing rules), inserting
// pbroadcasts where operands disagree (unless a body says auto_pbroadcast=false, where a
// mismatch is an error), and rewrites the user-level psum into psum2.
void insertPbroadcasts(ir::Module &m, Diagnostics &diags);
// Re-infers the variance of an already typed body (with automatic pbroadcasts) after its
// params came to vary over `paramVary`, a superset of what they varied over: autodiff widens
// a cond's branches to its predicate's axes this way. False (and `f` unusable) where a rule
// cannot hold then, e.g. a pscatter of a value that now varies.
bool retypeWithParams(ir::Func &f, const std::vector<ir::AxisSet> &paramVary,
                      const SourceManager &sources);
// Checks that every shmap result is invariant over the mesh axes its out_spec leaves unmapped.
void checkOutSpecs(ir::Module &m, Diagnostics &diags);

} // namespace shmapc::passes
