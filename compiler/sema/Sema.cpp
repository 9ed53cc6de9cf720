// Entry point, units and meshes, and function instantiation. A function is lowered once per
// distinct (argument types, static axis arguments, mesh context), like jax.jit tracing a
// Python function; the result is memoized in instances_.
#include "sema/SemaImpl.h"

#include <set>

namespace shmapc::sema {

Sema::Sema(const std::vector<ModuleUnit> &units, Diagnostics &diags)
    : diags_(diags), module_(std::make_unique<ir::Module>()) {
  collectUnits(units);
}

// ---- errors

void Sema::fail(DiagId id, Loc loc, const std::string &msg, const std::string &hint) {
  diags_.fatal(id, loc, msg, hint);
}

void Sema::failWithNote(DiagId id, Loc loc, const std::string &msg, const std::string &hint,
                        Loc noteLoc, const std::string &note) {
  diags_.error(id, loc, msg, hint);
  diags_.note(noteLoc, note);
  throw CompileError();
}

void Sema::failWithCallChain(DiagId id, Loc loc, const std::string &msg,
                             const std::string &hint) {
  diags_.error(id, loc, msg, hint);
  for (auto it = callChain_.rbegin(); it != callChain_.rend(); ++it)
    diags_.note(it->first, "in the call to " + it->second + " here");
  throw CompileError();
}

// ---- units and meshes

void Sema::collectUnits(const std::vector<ModuleUnit> &units) {
  for (const ModuleUnit &mu : units) {
    Unit u;
    u.name = mu.name;
    u.program = mu.program;
    for (const auto &f : mu.program->funcs) {
      auto [it, fresh] = u.funcs.emplace(f->name, f.get());
      if (!fresh)
        failWithNote(DiagId::Redefinition, f->loc, "function " + f->name + " is defined twice",
                     "rename one of them", it->second->loc, "first definition of " + f->name);
    }
    units_.push_back(std::move(u));
  }
}

// Meshes are global: every unit's meshes go into Module::meshes, in unit order.
void Sema::collectMeshes() {
  std::map<std::string, const ast::MeshDecl *> seen;
  for (const Unit &u : units_) {
    for (const ast::MeshDecl &m : u.program->meshes) {
      auto [it, fresh] = seen.emplace(m.name, &m);
      if (!fresh)
        failWithNote(DiagId::Redefinition, m.loc, "mesh " + m.name + " is defined twice",
                     "meshes are global across modules; rename one of them", it->second->loc,
                     "first definition of mesh " + m.name);
      for (size_t i = 0; i < m.axes.size(); ++i)
        for (size_t j = 0; j < i; ++j)
          if (m.axes[i] == m.axes[j])
            fail(DiagId::AxisRepeated, i < m.axisLocs.size() ? m.axisLocs[i] : m.loc,
                 "mesh " + m.name + " names axis \"" + m.axes[i] + "\" twice",
                 "give each mesh axis a distinct name");
      for (size_t i = 0; i < m.sizes.size(); ++i)
        if (m.sizes[i] <= 0)
          fail(DiagId::BadMesh, i < m.axisLocs.size() ? m.axisLocs[i] : m.loc,
               "mesh axis \"" + m.axes[i] + "\" has size " + std::to_string(m.sizes[i]),
               "axis sizes must be positive");
      if (m.axes.size() != m.sizes.size() || m.axes.empty())
        fail(DiagId::BadMesh, m.loc, "mesh " + m.name + " needs at least one axis, each with a size",
             "write mesh " + m.name + " = <[\"x\"=2]>;");
      checkMeshLimits(m);
      auto mesh = std::make_unique<ir::Mesh>();
      mesh->name = m.name;
      mesh->axes = m.axes;
      mesh->sizes = m.sizes;
      mesh->loc = m.loc;
      module_->meshes.push_back(std::move(mesh));
    }
  }
}

// The runtime runs each device as a thread and indexes axes with fixed-size arrays.
void Sema::checkMeshLimits(const ast::MeshDecl &m) {
  if (m.axes.size() > SHM_MAX_MESH_AXES)
    fail(DiagId::MeshTooLarge, m.loc,
         "mesh " + m.name + " has " + std::to_string(m.axes.size()) + " axes; at most " +
             std::to_string(SHM_MAX_MESH_AXES) + " are supported",
         "merge axes that are always used together");
  int64_t devices = 1;
  for (int64_t s : m.sizes)
    if (__builtin_mul_overflow(devices, s, &devices) || devices > SHM_MAX_DEVICES) {
      fail(DiagId::MeshTooLarge, m.loc,
           "mesh " + m.name + " has more than " + std::to_string(SHM_MAX_DEVICES) +
               " devices (the product of its axis sizes)",
           "the runtime runs one thread per device, at most " + std::to_string(SHM_MAX_DEVICES) +
               "; use smaller axes");
    }
}

// ---- program arguments

void Sema::collectProgramArgs() {
  for (size_t u = 1; u < units_.size(); ++u)
    for (const ast::ArgDecl &a : units_[u].program->args)
      fail(DiagId::BadProgramArg, a.loc, "program argument " + a.name + " declared in module " + units_[u].name,
           "declare program arguments in the main file; pass them to module functions");
  std::set<std::string> seen;
  for (const ast::ArgDecl &a : units_[0].program->args) {
    if (!seen.insert(a.name).second)
      fail(DiagId::Redefinition, a.loc, "program argument " + a.name + " is declared twice", "rename one of them");
    if (a.name == "stats" || a.name == "help" || a.name == "trace")
      fail(DiagId::BadProgramArg, a.loc, "--" + a.name + " is an option of every program",
           "choose another name for the argument");
    module_->args.push_back({a.name, a.type, a.defaultText});
  }
}

int Sema::programArgIndex(const std::string &name) const {
  for (size_t i = 0; i < module_->args.size(); ++i)
    if (module_->args[i].name == name) return (int)i;
  return -1;
}

// A numeric or bool program argument read where it is named (host code only). A str argument
// is only a path: load and save take it (pathArg).
std::optional<SVal> Sema::programArg(const std::string &name, Loc loc) {
  int index = programArgIndex(name);
  if (index < 0) return std::nullopt;
  const ir::ProgramArg &a = module_->args[index];
  if (cur_->mesh)
    fail(DiagId::BadProgramArg, loc, "program argument " + name + " used inside a shmap body",
         "pass it to the shmap function as an argument");
  if (a.type == "str")
    fail(DiagId::BadProgramArg, loc, "program argument " + name + " is a str: only load and save take it",
         "write load(" + name + ", T) or save(" + name + ", x)");
  ir::DType dt = a.type == "f32" ? ir::DType::F32 : a.type == "f64" ? ir::DType::F64
               : a.type == "i32" ? ir::DType::I32 : a.type == "i64" ? ir::DType::I64
               : a.type == "f16" ? ir::DType::F16 : a.type == "bf16" ? ir::DType::BF16
               : ir::DType::Bool;
  return SVal::array(emit(ir::Prim::ArgValue, {}, ir::Type{dt, {}, 0}, loc, {{"index", (int64_t)index}}), loc);
}

// ---- functions

// `f(...)` is looked up in the caller's unit, `nn.f(...)` in module nn (which the caller's
// unit must import).
const ast::FuncDecl *Sema::findFunction(const ast::Expr &call, const Unit *&unitOut) {
  const Unit *home = cur_->unit;
  if (call.module.empty()) {
    auto it = home->funcs.find(call.name);
    if (it == home->funcs.end()) return nullptr;
    unitOut = home;
    return it->second;
  }
  bool imported = call.module == home->name;  // a module may name its own functions
  for (const ast::ImportDecl &imp : home->program->imports) imported |= imp.module == call.module;
  const Unit *target = nullptr;
  for (const Unit &u : units_)
    if (u.name == call.module && !u.name.empty()) target = &u;
  // (numpy and JAX habits first: x.sum() on an array, jnp.sum(x) for a builtin)
  if (!imported && arrayNamed(call.module))
    fail(DiagId::UnknownFunction, call.loc, call.module + " is an array, and arrays have no methods",
         "pass it to the function instead: " + call.name + "(" + call.module + ", ...)");
  if (!imported && builtins().count(call.name))
    fail(DiagId::UnknownFunction, call.loc,
         "unknown module " + call.module + " in " + call.module + "." + call.name,
         call.name + " is a builtin: call it without a module, " + call.name + "(...)");
  if (!imported || !target)
    fail(DiagId::UnknownFunction, call.loc,
         "unknown module " + call.module + " in " + call.module + "." + call.name,
         "add `import " + call.module + ";` at the top of the file");
  auto it = target->funcs.find(call.name);
  if (it == target->funcs.end()) {
    std::vector<std::string> names;
    for (const auto &[n, f] : target->funcs) names.push_back(n);
    std::string near = closestName(call.name, names);
    fail(DiagId::UnknownFunction, call.loc,
         "module " + call.module + " has no function " + call.name,
         near.empty() ? "check the function name" : "did you mean " + call.module + "." + near + "?");
  }
  unitOut = target;
  return it->second;
}

// A call to a plain user function: binds arguments (checking written parameter types),
// instantiates the callee for these argument types and emits a `call` eqn.
std::vector<SVal> Sema::callFunction(const ast::FuncDecl &decl, const Unit &unit,
                                     const ast::Expr &call) {
  if (!call.kwargs.empty())
    fail(DiagId::BadArgument, call.kwargs[0].loc,
         "keyword argument " + call.kwargs[0].name + " passed to user function " + decl.name,
         "user functions take positional arguments only");
  checkArgCount(decl, call.items.size(), call.loc);
  std::vector<SVal> args;
  for (const ast::ExprPtr &item : call.items) args.push_back(eval(*item));
  return callFunctionWith(decl, unit, args, call.loc);
}

void Sema::checkArgCount(const ast::FuncDecl &decl, size_t given, Loc callLoc) {
  if (given != decl.params.size())
    failWithNote(DiagId::ArgCount, callLoc,
                 decl.name + " takes " + std::to_string(decl.params.size()) +
                     " argument(s) but " + std::to_string(given) + " were given",
                 "pass one argument per parameter", decl.loc, decl.name + " is defined here");
}

std::vector<SVal> Sema::callFunctionWith(const ast::FuncDecl &decl, const Unit &unit,
                                         const std::vector<SVal> &args, Loc callLoc) {
  checkArgCount(decl, args.size(), callLoc);
  if (decl.shmap) return callShmap(decl, unit, args, callLoc);
  if (decl.pipeline && cur_->mesh)
    failWithNote(DiagId::BadPipelineAttr, callLoc, "the pipeline function " + decl.name + " is called inside a shmap body",
                 "call it from host code: a pipeline runs its stages on submeshes of its mesh", decl.loc,
                 decl.name + " is defined here");
  if (decl.jit && cur_->mesh)
    failWithNote(DiagId::JitInsideShmap, callLoc, "the jit function " + decl.name + " is called inside a shmap body",
                 "call it from host code: a jit function partitions itself over its mesh", decl.loc,
                 decl.name + " is defined here");

  std::vector<ArgDesc> descs;
  std::vector<ir::Value *> ins;
  for (size_t i = 0; i < decl.params.size(); ++i) {
    const ast::Param &p = decl.params[i];
    const SVal &a = args[i];
    ArgDesc d;
    if (a.kind == SVal::Tuple) {  // its leaves in order; the callee rebuilds it
      if (p.type)
        failWithNote(DiagId::ArgType, a.loc,
                     "argument " + std::to_string(i) + " of " + decl.name + " is " + describe(a) + " but parameter " +
                         p.name + " is declared " + str(typeOf(*p.type)),
                     "pass an array, or remove the parameter's type to take a tuple", p.loc,
                     "parameter " + p.name + " is declared here");
      descs.push_back(tupleArg(a, ins));
      continue;
    }
    if (a.kind == SVal::Axes) {
      if (decl.jit)
        failWithNote(DiagId::ArgType, a.loc,
                     "argument " + std::to_string(i) + " of the jit function " + decl.name + " is the axis names " +
                         describe(a),
                     "a jit function takes arrays; it names mesh axes only in its shardings", p.loc,
                     "parameter " + p.name + " is declared here");
      if (p.type)
        failWithNote(DiagId::ArgType, a.loc,
                     "argument " + std::to_string(i) + " of " + decl.name +
                         " is the axis names " + describe(a) + " but parameter " + p.name +
                         " is declared " + str(typeOf(*p.type)),
                     "pass an array, or remove the parameter's type to take axis names",
                     p.loc, "parameter " + p.name + " is declared here");
      d.isAxes = true;
      d.axes = a.axes;
      descs.push_back(d);
      continue;
    }
    ir::Value *v = a.kind == SVal::Literal && p.type ? literalAs(a, typeOf(*p.type).dtype, {}, a.loc)
                                                     : toArray(a);
    if (p.type && !v->type.sameShape(typeOf(*p.type)))
      failWithNote(DiagId::ArgType, a.loc,
                   "argument " + std::to_string(i) + " of " + decl.name + " has type " +
                       str(v->type) + " but parameter " + p.name + " is declared " +
                       str(typeOf(*p.type)),
                   "pass a " + str(typeOf(*p.type)) + " value (or use cast/reshape)", p.loc,
                   "parameter " + p.name + " is declared here");
    d.type = v->type;
    d.type.vary = 0;
    descs.push_back(d);
    ins.push_back(v);
  }

  callChain_.push_back({callLoc, (unit.name.empty() ? "" : unit.name + ".") + decl.name});
  const Instance &inst = instantiate(decl, unit, descs, cur_->mesh, callLoc);
  callChain_.pop_back();

  ir::Eqn e;
  e.prim = ir::Prim::Call;
  e.ins = ins;
  e.bodies = {inst.func};
  e.loc = callLoc;
  for (const ir::Type &t : inst.results) e.outs.push_back(cur_->func->newValue(t));
  std::vector<SVal> out;
  size_t next = 0;
  for (const SVal &r : inst.returned) out.push_back(withLeaves(r, e.outs, next, callLoc));
  pushEqn(std::move(e));
  return out;
}

std::string Sema::uniqueFuncName(const std::string &base) {
  std::string name = base;
  for (int n = 1; usedFuncNames_.count(name); ++n) name = base + "_" + std::to_string(n);
  usedFuncNames_.insert(name);
  return name;
}

// A loop body / cond branch of the Func being built.
ir::Func *Sema::newNestedFunc(const std::string &suffix, Loc loc) {
  ir::Func *f = module_->newFunc(uniqueFuncName(cur_->func->name + "_" + suffix));
  f->loc = loc;
  f->mesh = cur_->mesh;
  f->isNested = true;
  return f;
}

const Instance &Sema::instantiate(const ast::FuncDecl &decl, const Unit &unit,
                                  const std::vector<ArgDesc> &args, const ir::Mesh *mesh,
                                  Loc callLoc) {
  InstKey key{&decl, mesh, args};
  if (auto it = instances_.find(key); it != instances_.end()) return it->second;
  if (active_.size() >= kMaxCallDepth)
    failWithNote(DiagId::CallTooDeep, callLoc,
                 "calls nest more than " + std::to_string(kMaxCallDepth) + " deep (" +
                     active_.front()->name + " -> ... -> " + active_.back()->name + " -> " +
                     decl.name + ")",
                 "flatten the chain of calls, or use a for loop", active_.front()->loc,
                 "the chain starts in " + active_.front()->name);
  for (const ast::FuncDecl *d : active_)
    if (d == &decl) {
      std::string chain;
      bool on = false;
      for (const ast::FuncDecl *a : active_) {
        on |= a == &decl;
        if (on) chain += a->name + " -> ";
      }
      failWithNote(DiagId::Recursion, callLoc,
                   decl.name + " calls itself (" + chain + decl.name + ")",
                   "recursion is not allowed; use a for loop", decl.loc,
                   decl.name + " is defined here");
    }

  ir::Func *f = module_->newFunc(
      uniqueFuncName(unit.name.empty() ? decl.name : unit.name + "." + decl.name));
  f->loc = decl.loc;
  f->mesh = mesh;
  if (decl.shmap) {
    f->isShmapBody = true;
    f->checkVma = decl.shmap->checkVma;
    f->autoPbroadcast = decl.shmap->autoPbroadcast;
  }

  FuncCtx ctx;
  ctx.func = f;
  ctx.mesh = mesh;
  ctx.unit = &unit;
  Scope scope;
  scope.owner = &ctx;
  for (size_t i = 0; i < decl.params.size(); ++i) {
    const ast::Param &p = decl.params[i];
    if (args[i].isTuple) {
      scope.names[p.name] = tupleParam(args[i], *f, p.name, p.loc);
    } else if (args[i].isAxes) {
      scope.names[p.name] = SVal::axisNames(args[i].axes, p.loc);
    } else {
      ir::Value *v = f->newValue(args[i].type, p.name);
      f->params.push_back(v);
      scope.names[p.name] = SVal::array(v, p.loc);
    }
  }

  FuncCtx *savedCtx = cur_;
  Scope *savedScope = scope_;
  cur_ = &ctx;
  scope_ = &scope;
  active_.push_back(&decl);
  Instance inst;
  inst.func = f;
  lowerFunctionBody(decl, inst);
  active_.pop_back();
  cur_ = savedCtx;
  scope_ = savedScope;
  if (decl.jit) recordJit(decl, *f, args, inst);
  if (decl.pipeline) recordPipeline(decl, *f, args);
  return instances_.emplace(key, inst).first->second;
}

std::unique_ptr<ir::Module> Sema::run() {
  collectMeshes();
  collectProgramArgs();
  const Unit &mainUnit = units_[0];
  auto it = mainUnit.funcs.find("main");
  if (it == mainUnit.funcs.end())
    fail(DiagId::NoMain, Loc{mainUnit.program->file, 1, 1}, "the program has no main function",
         "add `def main() { ... }`: it is the host program");
  const ast::FuncDecl &main = *it->second;
  if (!main.params.empty())
    fail(DiagId::NoMain, main.loc, "main must not take parameters",
         "remove main's parameters; it runs once on the host");
  if (main.shmap || main.jit || main.pipeline)
    fail(DiagId::NoMain, main.loc,
         std::string("main cannot be a @") + (main.shmap ? "shmap" : main.jit ? "jit" : "pipeline") + " function",
         "put the per-device code in another function and call it from main");
  if (main.hasResultArrow && !main.results.empty())
    fail(DiagId::MainReturnsValue, main.loc, "main must not declare results",
         "main is the host program: print or save what it computes, and drop `-> ...`");
  module_->main = instantiate(main, mainUnit, {}, nullptr, main.loc).func;
  if (!module_->main->results.empty())
    fail(DiagId::MainReturnsValue,
         module_->main->returnLoc.valid() ? module_->main->returnLoc : main.loc,
         "main returns a value, but nothing receives it",
         "print the value instead, or end main with a bare `return;`");
  return std::move(module_);
}

std::unique_ptr<ir::Module> buildModule(const std::vector<ModuleUnit> &units,
                                        Diagnostics &diags) {
  if (units.empty() || !units[0].program) {
    diags.fatal(DiagId::NoMain, Loc{}, "nothing to compile", "pass a .smp file");
  }
  Sema sema(units, diags);
  return sema.run();
}

} // namespace shmapc::sema
