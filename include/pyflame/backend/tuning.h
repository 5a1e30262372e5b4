// The DNN algorithm tuning cache (spec: MIOpenTuningCache). Process-wide:
// for each problem (op, shapes, dtype, parameters, math mode, memory layout,
// library and device architecture) the algorithm the DNN library chose, or
// that it rejected a channels-last problem (backend/rocm/dnn.h), consulted
// before any search. Exhaustive search times every algorithm once per problem
// (MIOpen Find / cudnnFind*Ex); heuristic search asks the library's ranking
// (MIOpen GetSolution / cudnnGet*_v7). A cache file persists the entries:
// set_cache_file loads it and every update rewrites it. Plain data: it works
// (and is simply never consulted) in builds and on machines without a GPU.
// The 16-bit channels-last problems that cuDNN's graph API plans on NVIDIA
// keep their plans in memory instead (backend/rocm/dnn.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <map>
#include <shared_mutex>
#include <optional>
#include <string>
#include <vector>

namespace pyflame::backend::rocm {

// (Outside the class: a nested struct with member initializers cannot be a
// default argument of its enclosing class's constructor.)
struct TuningCacheConfig {
  bool enable_exhaustive_search = true;
  bool enable_caching = true;
  bool enable_persistence = false;  // true with a cache_file
  std::string cache_file;
};

class MIOpenTuningCache {
 public:
  using Config = TuningCacheConfig;
  struct Stats {
    size_t hits = 0;
    size_t misses = 0;
    size_t entries = 0;
  };
  // What was chosen for one problem. `algo` is the library's algorithm
  // (cuDNN enum value or MIOpen solution id), `math` the cuDNN math type.
  struct Entry {
    uint64_t algo = 0;
    uint64_t workspace = 0;
    int32_t math = 0;
    bool exhaustive = false;  // found by an exhaustive search
  };

  explicit MIOpenTuningCache(Config config = {});

  void enable_exhaustive_search(bool enable);
  bool exhaustive_search() const;
  void enable_caching(bool enable);
  // Loads the file's entries (the file may not exist yet), then writes the
  // merged cache back; "" stops persisting. Raises RuntimeError when the
  // file cannot be written.
  void set_cache_file(const std::string& path);
  std::string cache_file() const;
  // Drops every entry and resets the counters (and rewrites the file).
  void clear();
  Stats get_stats() const;

  // The DNN wrapper's side. lookup counts a hit or a miss; an entry from a
  // heuristic search does not answer a lookup made in exhaustive mode.
  std::optional<Entry> lookup(const std::string& key);
  void insert(const std::string& key, const Entry& entry);
  std::vector<std::pair<std::string, Entry>> entries() const;

 private:
  void load_locked(const std::string& path);
  void save_locked() const;

  // Lookups (one per convolution) read under a shared lock, so threads
  // convolving at once do not wait for each other; updates take it whole.
  mutable std::shared_mutex mu_;
  Config config_;
  std::map<std::string, Entry> entries_;
  std::atomic<size_t> hits_{0}, misses_{0};
};

MIOpenTuningCache& get_tuning_cache();

}  // namespace pyflame::backend::rocm
