// The DNN algorithm tuning cache (see pyflame/backend/tuning.h). The cache
// file is text, one entry per line: key, algorithm, workspace bytes, math
// type, exhaustive flag, separated by tabs; it is rewritten atomically
// (temporary file + rename) on every update.
#include "pyflame/backend/tuning.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <shared_mutex>
#include <sstream>

#include "pyflame/errors.h"

namespace pyflame::backend::rocm {

namespace {
constexpr const char* kHeader = "# pyflame DNN tuning cache v1";
}

MIOpenTuningCache::MIOpenTuningCache(Config config) : config_(std::move(config)) {
  if (config_.enable_persistence && !config_.cache_file.empty()) load_locked(config_.cache_file);
  if (!config_.enable_persistence) config_.cache_file.clear();
}

void MIOpenTuningCache::enable_exhaustive_search(bool enable) {
  std::unique_lock lk(mu_);
  config_.enable_exhaustive_search = enable;
}

bool MIOpenTuningCache::exhaustive_search() const {
  std::shared_lock lk(mu_);
  return config_.enable_exhaustive_search;
}

void MIOpenTuningCache::enable_caching(bool enable) {
  std::unique_lock lk(mu_);
  config_.enable_caching = enable;
}

void MIOpenTuningCache::set_cache_file(const std::string& path) {
  std::unique_lock lk(mu_);
  const Config before = config_;
  config_.cache_file = path;
  config_.enable_persistence = !path.empty();
  if (path.empty()) return;
  load_locked(path);
  try {
    save_locked();
  } catch (...) {
    config_ = before;
    throw;
  }
}

std::string MIOpenTuningCache::cache_file() const {
  std::shared_lock lk(mu_);
  return config_.cache_file;
}

void MIOpenTuningCache::clear() {
  std::unique_lock lk(mu_);
  entries_.clear();
  hits_ = 0;
  misses_ = 0;
  try {
    save_locked();
  } catch (const std::exception&) {
    // As in insert: the in-memory state is what counts.
  }
}

MIOpenTuningCache::Stats MIOpenTuningCache::get_stats() const {
  std::shared_lock lk(mu_);
  return {hits_.load(), misses_.load(), entries_.size()};
}

std::optional<MIOpenTuningCache::Entry> MIOpenTuningCache::lookup(const std::string& key) {
  std::shared_lock lk(mu_);
  if (config_.enable_caching) {
    auto it = entries_.find(key);
    if (it != entries_.end() && (it->second.exhaustive || !config_.enable_exhaustive_search)) {
      ++hits_;
      return it->second;
    }
  }
  ++misses_;
  return std::nullopt;
}

void MIOpenTuningCache::insert(const std::string& key, const Entry& entry) {
  std::unique_lock lk(mu_);
  if (!config_.enable_caching) return;
  entries_[key] = entry;
  try {
    save_locked();
  } catch (const std::exception&) {
    // The in-memory entry stands; a file that became unwritable after
    // set_cache_file must not fail the convolution that was tuned.
  }
}

std::vector<std::pair<std::string, MIOpenTuningCache::Entry>> MIOpenTuningCache::entries() const {
  std::shared_lock lk(mu_);
  return {entries_.begin(), entries_.end()};
}

void MIOpenTuningCache::load_locked(const std::string& path) {
  std::ifstream f(path);
  if (!f) return;  // not created yet
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string key, algo, ws, math, exh;
    if (!std::getline(ss, key, '\t') || !std::getline(ss, algo, '\t') || !std::getline(ss, ws, '\t') ||
        !std::getline(ss, math, '\t') || !std::getline(ss, exh, '\t')) {
      continue;  // malformed line: skipped
    }
    try {
      Entry e;
      e.algo = std::stoull(algo);
      e.workspace = std::stoull(ws);
      e.math = static_cast<int32_t>(std::stol(math));
      e.exhaustive = exh == "1";
      entries_.emplace(key, e);  // entries already in memory win
    } catch (const std::exception&) {
      continue;
    }
  }
}

void MIOpenTuningCache::save_locked() const {
  if (!config_.enable_persistence || config_.cache_file.empty()) return;
  const std::string& path = config_.cache_file;
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) {
      throw RuntimeError(errmsg("set_cache_file", "cannot write the tuning cache file '" + path + "'"));
    }
    f << kHeader << '\n';
    for (const auto& [key, e] : entries_) {
      f << key << '\t' << e.algo << '\t' << e.workspace << '\t' << e.math << '\t' << (e.exhaustive ? 1 : 0)
        << '\n';
    }
    if (!f.flush()) {
      std::remove(tmp.c_str());
      throw RuntimeError(errmsg("set_cache_file", "cannot write the tuning cache file '" + path + "'"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeError(errmsg("set_cache_file", "cannot replace the tuning cache file '" + path + "'"));
  }
}

MIOpenTuningCache& get_tuning_cache() {
  static auto* cache = new MIOpenTuningCache();  // process lifetime
  return *cache;
}

}  // namespace pyflame::backend::rocm
