// Sharded checkpoints (docs/runtime.md, "Checkpoints"): a folder with one .npz archive per rank
// holding the blocks that rank writes, and index.json, which names every array's global shape
// and dtype and where each of its blocks is. Each block is written once, by the rank of the
// first device holding it; a whole array by rank 0. A save writes new archives (named with the
// next generation number), then the index (atomically: a temporary file renamed over it), then
// removes the previous generation's archives: a save cut short leaves the previous checkpoint
// readable. A load reads, for each block it needs (a rank's slots, or the whole array), the
// checkpoint's blocks that overlap it, whatever mesh or rank count wrote them; each archive
// member is read whole, so its CRC-32 is checked.
#include "array_plan.h"
#include "npy.h"
#include "ranks.h"
#include "shmap_runtime.h"
#include "util.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace shm {
namespace {

[[noreturn]] void refuse(const std::string &where, const std::string &what) {
  fatalf("checkpoint %s: %s", where.c_str(), what.c_str());
}

const char *dtypeWord(int32_t dtype) {  // (null: bf16, which .npy cannot hold)
  const char *name = numpyNameOf(dtype);
  return name[0] == '?' ? nullptr : name;
}

// ---- the index: a small JSON document, read by a small reader

struct Json {
  enum Kind { Null, Number, String, Array, Object } kind = Null;
  int64_t number = 0;
  std::string text;
  std::vector<Json> items;                          // Array
  std::vector<std::pair<std::string, Json>> fields;  // Object
  const Json *get(const char *name) const {
    for (const auto &[k, v] : fields)
      if (k == name) return &v;
    return nullptr;
  }
};

class JsonReader {
public:
  JsonReader(const std::string &s, const std::string &where) : s_(s), where_(where) {}
  Json document() {
    Json v = value(0);
    space();
    if (at_ != s_.size()) fail("text after the document");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string &what) {
    refuse(where_, "not a checkpoint index (" + what + " at byte " + std::to_string(at_) + ")");
  }
  void space() {
    while (at_ < s_.size() && std::strchr(" \t\r\n", s_[at_])) ++at_;
  }
  bool eat(char c) {
    space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  std::string string() {
    if (!eat('"')) fail("a string expected");
    std::string out;
    while (at_ < s_.size() && s_[at_] != '"') {
      if (s_[at_] == '\\' || (unsigned char)s_[at_] < 0x20) fail("an escape or control character");
      out += s_[at_++];
    }
    if (at_ >= s_.size()) fail("an unterminated string");
    ++at_;
    return out;
  }
  Json value(int depth) {
    if (depth > 8) fail("nesting too deep");
    Json v;
    space();
    if (at_ >= s_.size()) fail("the end of the file");
    const char c = s_[at_];
    if (c == '"') {
      v.kind = Json::String;
      v.text = string();
    } else if (c == '[') {
      ++at_;
      v.kind = Json::Array;
      if (!eat(']')) {
        do v.items.push_back(value(depth + 1));
        while (eat(','));
        if (!eat(']')) fail("']' expected");
      }
    } else if (c == '{') {
      ++at_;
      v.kind = Json::Object;
      if (!eat('}')) {
        do {
          std::string k = string();
          if (!eat(':')) fail("':' expected");
          v.fields.push_back({k, value(depth + 1)});
        } while (eat(','));
        if (!eat('}')) fail("'}' expected");
      }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::Number;
      const size_t first = at_;
      if (c == '-') ++at_;
      while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
      if (at_ - first > 18 || at_ == first + (c == '-')) fail("a number out of range");
      v.number = std::stoll(s_.substr(first, at_ - first));
    } else {
      fail("a value expected");
    }
    return v;
  }
  const std::string &s_;
  std::string where_;
  size_t at_ = 0;
};

std::string readFile(const std::string &path, bool *missing) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    if (missing && errno == ENOENT) {
      *missing = true;
      return "";
    }
    refuse(path, std::string("cannot read: ") + std::strerror(errno));
  }
  std::ostringstream s;
  s << f.rdbuf();
  if (s.str().size() > (size_t(64) << 20)) refuse(path, "an index over 64 MiB");
  return s.str();
}

// One block of an array in the checkpoint: where it is and where it goes.
struct StoredBlock {
  std::string file, member;
  std::vector<int64_t> start, shape;
};
struct StoredArray {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<StoredBlock> blocks;
};
struct Index {
  int64_t generation = 0;
  std::map<std::string, StoredArray> arrays;
  std::vector<std::string> files;
};

std::vector<int64_t> ints(const Json *v, const std::string &where, const char *what) {
  if (!v || v->kind != Json::Array) refuse(where, std::string("not a checkpoint index (") + what + " is not a list)");
  std::vector<int64_t> out;
  for (const Json &x : v->items) {
    if (x.kind != Json::Number || x.number < 0) refuse(where, std::string("not a checkpoint index (") + what + ")");
    out.push_back(x.number);
  }
  return out;
}

std::string str(const Json *v, const std::string &where, const char *what) {
  if (!v || v->kind != Json::String) refuse(where, std::string("not a checkpoint index (no ") + what + ")");
  return v->text;
}

// A block's file must be a plain name inside the folder: an index cannot send a load elsewhere.
void checkFileName(const std::string &name, const std::string &where) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.')
    refuse(where, "not a checkpoint index (block file '" + name + "' is not a name in its folder)");
}

Index readIndex(const std::string &dir, bool *missing) {
  const std::string where = dir + "/index.json";
  const std::string text = readFile(where, missing);
  Index idx;
  if (missing && *missing) return idx;
  Json doc = JsonReader(text, where).document();
  const Json *format = doc.get("format");
  if (doc.kind != Json::Object || !format || format->kind != Json::String || format->text != "shmapc checkpoint")
    refuse(where, "not a checkpoint index (no \"format\": \"shmapc checkpoint\")");
  const Json *generation = doc.get("generation"), *arrays = doc.get("arrays");
  if (!generation || generation->kind != Json::Number || !arrays || arrays->kind != Json::Array)
    refuse(where, "not a checkpoint index (no generation or arrays)");
  idx.generation = generation->number;
  for (const Json &a : arrays->items) {
    StoredArray s;
    const std::string key = str(a.get("key"), where, "key");
    s.dtype = str(a.get("dtype"), where, "dtype");
    s.shape = ints(a.get("shape"), where, "shape");
    const Json *blocks = a.get("blocks");
    if (!blocks || blocks->kind != Json::Array) refuse(where, "not a checkpoint index (" + key + " has no blocks)");
    for (const Json &b : blocks->items) {
      StoredBlock sb;
      sb.file = str(b.get("file"), where, "file");
      checkFileName(sb.file, where);
      sb.member = str(b.get("member"), where, "member");
      sb.start = ints(b.get("start"), where, "start");
      sb.shape = ints(b.get("shape"), where, "block shape");
      if (sb.start.size() != s.shape.size() || sb.shape.size() != s.shape.size())
        refuse(where, "not a checkpoint index (a block of " + key + " of another rank)");
      for (size_t d = 0; d < s.shape.size(); ++d)
        if (sb.start[d] + sb.shape[d] > s.shape[d]) refuse(where, "a block of " + key + " lies outside the array");
      if (std::find(idx.files.begin(), idx.files.end(), sb.file) == idx.files.end()) idx.files.push_back(sb.file);
      s.blocks.push_back(std::move(sb));
    }
    idx.arrays[key] = std::move(s);
  }
  return idx;
}

// The index a load reads, parsed once per version of the file: a model's arrays are loaded
// one call each, and each would otherwise read and parse the whole index again. (A save
// replaces the file by a rename: a new inode, so a new version.)
const Index &loadedIndex(const std::string &dir) {
  static std::mutex m;
  static std::map<std::string, std::pair<std::string, Index>> cache;  // folder -> (version, index)
  struct stat st;
  std::string version;
  if (stat((dir + "/index.json").c_str(), &st) == 0)
    version = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
              std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(dir);
  if (it != cache.end() && !version.empty() && it->second.first == version) return it->second.second;
  Index idx = readIndex(dir, nullptr);  // (a missing or bad index stops the program here)
  auto &entry = cache[dir];
  entry = {version, std::move(idx)};
  return entry.second;
}

std::string list(const int64_t *v, int32_t n) {
  std::string s = "[";
  for (int32_t i = 0; i < n; ++i) {  // (piece by piece: GCC 12 warns, wrongly, about "text" + std::string)
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

std::string memberName(const std::string &key, const int64_t *start, int32_t rank) {
  std::string m = key + "@";
  for (int32_t d = 0; d < rank; ++d) {
    if (d) m += '_';
    m += std::to_string(start[d]);
  }
  return m;
}

} // namespace
} // namespace shm

using namespace shm;

// arrays k = 0..n-1: keys[k], dtypes[k], ranks[k], shapes (one after the other), data[k];
// layouts[k]: null for a whole array, or {mesh rank, mesh sizes..., encoded spec...} for one in
// the blocks form.
extern "C" void shm_save_checkpoint(const char *dir, int32_t n, const char *const *keys, const int32_t *dtypes,
                                    const int32_t *ranks, const int64_t *shapes, const int64_t *const *layouts,
                                    const void *const *data) {
  SHM_GUARD_BEGIN
  const std::string folder = dir;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) refuse(folder, std::string("cannot make the folder: ") + std::strerror(errno));
  bool missing = false;
  const Index old = readIndex(folder, &missing);  // (every rank reads it before rank 0 replaces it)
  ranks_barrier();
  const int64_t generation = old.generation + 1;
  auto fileOf = [&](int rank) { return "rank-" + std::to_string(rank) + "-" + std::to_string(generation) + ".npz"; };
  std::string index = "{\"format\": \"shmapc checkpoint\", \"version\": 1, \"generation\": " +
                      std::to_string(generation) + ",\n \"arrays\": [";
  // This rank's members (names kept alive for the writer).
  std::vector<std::string> names;
  std::vector<int32_t> mdtypes, mranks;
  std::vector<int64_t> mshapes;
  std::vector<const void *> mdata;
  const int64_t *shape = shapes;  // (array k's, advanced at the end of each)
  for (int32_t k = 0; k < n; ++k) {
    const char *word = dtypeWord(dtypes[k]);
    if (!word) refuse(folder, std::string(keys[k]) + ": a dtype .npy cannot hold");
    index += std::string(k ? "," : "") + "\n  {\"key\": \"" + keys[k] + "\", \"dtype\": \"" + word +
             "\", \"shape\": " + list(shape, ranks[k]) + ", \"blocks\": [";
    auto block = [&](int writer, const int64_t *start, const int64_t *bshape, const void *bytes, bool first) {
      const std::string member = memberName(keys[k], start, ranks[k]);
      index += std::string(first ? "" : ",") + "\n    {\"file\": \"" + fileOf(writer) + "\", \"member\": \"" + member +
               "\", \"start\": " + list(start, ranks[k]) + ", \"shape\": " + list(bshape, ranks[k]) + "}";
      if (writer != rank_id()) return;
      names.push_back(member);
      mdtypes.push_back(dtypes[k]);
      mranks.push_back(ranks[k]);
      mshapes.insert(mshapes.end(), bshape, bshape + ranks[k]);
      mdata.push_back(bytes);
    };
    if (!layouts || !layouts[k]) {
      const int64_t zeros[kMaxRank] = {0};
      block(0, zeros, shape, data[k], true);
    } else {
      const int64_t *l = layouts[k];
      const std::unique_ptr<MeshCall> c = local_call((int32_t)l[0], l + 1, "checkpoint");
      std::vector<int32_t> spec;
      for (int32_t d = 0, at = 1 + (int32_t)l[0]; d < ranks[k]; ++d) {
        const int32_t m = (int32_t)l[at++];
        spec.push_back(m);
        for (int32_t j = 0; j < m; ++j) spec.push_back((int32_t)l[at++]);
      }
      const ArrayPlan p = blocks_plan(*c, dtypes[k], ranks[k], shape, spec.data(), "checkpoint of");
      // Every block, by its first device: that device's rank writes it (from its slot).
      std::map<int64_t, int64_t> firstDevice;  // block offset -> device
      int64_t coords[kMaxMeshRank], start[kMaxRank];
      for (int64_t id = 0; id < c->ndev; ++id) {
        coords_of(*c, id, coords);
        firstDevice.emplace(block_offset(p, *c, coords), id);
      }
      bool first = true;
      for (const auto &[offset, id] : firstDevice) {
        coords_of(*c, id, coords);
        block_start(p, *c, coords, start);
        const int writer = (int)(id / c->nlocal);
        const void *bytes = nullptr;
        if (writer == rank_id()) {
          const size_t slot = (size_t)p.slot_of[(size_t)(id - c->first)];
          bytes = (const char *)data[k] + (int64_t)slot * p.block_bytes;
        }
        block(writer, start, p.bshape, bytes, first);
        first = false;
      }
    }
    index += "]}";
    shape += ranks[k];
  }
  index += "]}\n";
  if (!names.empty()) {
    std::vector<const char *> cnames;
    for (const std::string &s : names) cnames.push_back(s.c_str());
    write_npz((folder + "/" + fileOf(rank_id())).c_str(), (int32_t)names.size(), cnames.data(), mdtypes.data(),
              mranks.data(), mshapes.data(), mdata.data());
  }
  ranks_barrier();  // every rank's archive is in place
  if (writes_output()) {
    write_file_atomically((folder + "/index.json").c_str(), index);
    std::string current = "-";  // (this generation's suffix; piece by piece, as list())
    current += std::to_string(generation);
    current += ".npz";
    for (const std::string &f : old.files)  // the previous generation's archives
      if (f.find(current) == std::string::npos) unlink((folder + "/" + f).c_str());
  }
  ranks_barrier();
  SHM_GUARD_END("save_checkpoint")
}

// The array `key` into `out`: whole (spec null), or the blocks form of the spec on the mesh.
extern "C" void shm_load_checkpoint(const char *dir, const char *key, int32_t dtype, int32_t rank,
                                    const int64_t *shape, int32_t mesh_rank, const int64_t *mesh_sizes,
                                    const int32_t *spec, void *out) {
  SHM_GUARD_BEGIN
  const std::string folder = dir, where = folder + "/index.json";
  const Index &idx = loadedIndex(folder);
  auto it = idx.arrays.find(key);
  if (it == idx.arrays.end()) refuse(where, std::string("has no array ") + key);
  const StoredArray &a = it->second;
  const char *word = dtypeWord(dtype);
  if (!word || a.dtype != word || a.shape != std::vector<int64_t>(shape, shape + rank))
    refuse(where, std::string(key) + " is " + a.dtype + " " + list(a.shape.data(), (int32_t)a.shape.size()) +
                      ", but the program expects " + (word ? word : "bf16") + " " + list(shape, rank));
  // The regions to fill: each slot of this rank, or the whole array.
  struct Region {
    std::vector<int64_t> start, shape;
    char *dst;
  };
  std::vector<Region> regions;
  const int64_t esize = dtype_size(dtype);
  if (!spec) {
    regions.push_back({std::vector<int64_t>(rank, 0), std::vector<int64_t>(shape, shape + rank), (char *)out});
  } else {
    const std::unique_ptr<MeshCall> c = local_call(mesh_rank, mesh_sizes, "checkpoint");
    const ArrayPlan p = blocks_plan(*c, dtype, rank, shape, spec, "checkpoint of");
    for_each_slot(p, *c, [&](size_t s, const int64_t *start) {
      regions.push_back({std::vector<int64_t>(start, start + rank), std::vector<int64_t>(p.bshape, p.bshape + rank),
                         (char *)out + (int64_t)s * p.block_bytes});
    });
  }
  for (const Region &r : regions) {
    int64_t covered = 0;
    for (const StoredBlock &b : a.blocks) {
      int64_t lo[kMaxRank], n[kMaxRank], overlap = 1;
      for (int32_t d = 0; d < rank; ++d) {
        lo[d] = std::max(r.start[d], b.start[d]);
        n[d] = std::min(r.start[d] + r.shape[d], b.start[d] + b.shape[d]) - lo[d];
        overlap *= std::max<int64_t>(n[d], 0);
      }
      if (overlap == 0) continue;
      // The stored block, read whole (its CRC-32 checked), then the overlap copied.
      const std::string file = folder + "/" + b.file;
      std::vector<char> block((size_t)(num_elements(rank, b.shape.data()) * esize));
      shm_load_npz(file.c_str(), b.member.c_str(), dtype, rank, b.shape.data(), block.data());
      int64_t bstr[kMaxRank], rstr[kMaxRank], from = 0, to = 0;
      row_major_strides(rank, b.shape.data(), bstr);
      row_major_strides(rank, r.shape.data(), rstr);
      for (int32_t d = 0; d < rank; ++d) {
        from += (lo[d] - b.start[d]) * bstr[d];
        to += (lo[d] - r.start[d]) * rstr[d];
      }
      copy_strided(esize, rank, n, block.data() + from * esize, bstr, r.dst + to * esize, rstr);
      covered += overlap;
    }
    if (covered != num_elements(rank, r.shape.data()))
      refuse(where, std::string("the blocks of ") + key + " do not cover the array once");
  }
  SHM_GUARD_END("load_checkpoint")
}
