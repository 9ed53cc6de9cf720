// How each host value is kept (HostForms.cpp): whole on every rank, as the rank's blocks of a
// shmap layout (the blocks form: values only shmaps read, in one layout), or by one pipeline
// device group's ranks alone (what one stage program alone reads). One analysis of the IR,
// which the code generator follows and --emit=comm reports (a pipeline message's two ends).
// One process holds every block and every group's values either way.
#pragma once

#include "ir/IR.h"

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace shmapc::forms {

// A shmap operand's layout: the mesh (an index into ir::Module::meshes) and the in_spec.
struct ShmapLayout {
  int64_t mesh = -1;
  ir::PartitionSpec spec;
  bool operator==(const ShmapLayout &o) const;  // (P("x") is P("x", None))
};

// The device group of a pipeline whose ranks alone keep a host value: the group, and the
// pipeline's device -> group map and group count (as shm_run_pipeline takes them).
struct GroupOwner {
  int32_t group = 0;
  std::vector<int32_t> deviceGroups;
  int32_t groups = 0;
  bool operator==(const GroupOwner &o) const {
    return group == o.group && deviceGroups == o.deviceGroups && groups == o.groups;
  }
};

struct HostForms {
  // Host values (eqn results) that only shmaps read, each in one layout, directly or through
  // the bodies of calls, loops and conds they are passed to unchanged; and those nothing reads.
  std::unordered_map<const ir::Value *, ShmapLayout> splitLayouts;
  std::unordered_set<const ir::Value *> unread;
  // Values kept in the blocks form, by their layout. Values that share a buffer (a call's
  // argument and its callee's parameter, a loop's carries, a result and what it is returned
  // as) share their form.
  std::unordered_map<const ir::Value *, ShmapLayout> blocksLayouts;
  // Values one pipeline group's ranks alone keep; loop outputs among them that host code reads
  // whole after their loop (broadcast from the group then).
  std::unordered_map<const ir::Value *, GroupOwner> groupOwners;
  std::unordered_set<const ir::Value *> wholeAfterLoop;
  // A pipeline message's other end: for a pipe_send its receiver's value, for a pipe_recv its
  // sender's.
  std::unordered_map<const ir::Eqn *, const ir::Value *> messagePeers;

  const ShmapLayout *blocksLayout(const ir::Value *v) const {
    auto it = blocksLayouts.find(v);
    return it == blocksLayouts.end() ? nullptr : &it->second;
  }
  const GroupOwner *groupOwner(const ir::Value *v) const {
    auto it = groupOwners.find(v);
    return it == groupOwners.end() ? nullptr : &it->second;
  }
};

HostForms findHostForms(const ir::Module &m);

} // namespace shmapc::forms
