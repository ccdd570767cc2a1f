#include "device/cpu/host_resources.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace inferd {
namespace {

// cgroup v1 reports "no limit" as the largest page-aligned int64.
constexpr int64_t kUnlimited = int64_t{1} << 60;

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// One cgroup hierarchy this process is in: the directory of its cgroup.
struct CgroupDir {
  int version = 0;           // 1 or 2
  std::string mount_point;   // e.g. /sys/fs/cgroup/memory
  std::string dir;           // mount_point + the process's cgroup path
};

// The process's cgroup path per controller ("" key: the v2 hierarchy).
std::vector<std::pair<std::string, std::string>> ReadProcCgroup(
    const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string text;
  if (!ReadFile(path, &text)) return out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[1].empty()) {
      out.emplace_back("", std::string(f[2]));
    } else {
      for (absl::string_view c : absl::StrSplit(f[1], ',')) {
        out.emplace_back(std::string(c), std::string(f[2]));
      }
    }
  }
  return out;
}

// Finds the hierarchy holding `controller` (v1) or the v2 hierarchy
// (`controller` empty) and joins the process's path onto its mount point.
bool FindCgroupDir(const HostPaths& paths, int version,
                   const std::string& controller, CgroupDir* out) {
  std::string cg_path;
  bool found = false;
  for (const auto& [c, p] : ReadProcCgroup(paths.proc_self_cgroup)) {
    if ((version == 2 && c.empty()) || (version == 1 && c == controller)) {
      cg_path = p;
      found = true;
      break;
    }
  }
  if (!found) return false;
  std::string text;
  if (!ReadFile(paths.proc_self_mountinfo, &text)) return false;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    // id parent dev root mount-point options [optional...] - fstype source super
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || f.end() - dash < 2) continue;
    const absl::string_view fstype = *(dash + 1);
    if (version == 2 && fstype != "cgroup2") continue;
    if (version == 1) {
      if (fstype != "cgroup" || f.end() - dash < 4) continue;
      bool has = false;
      for (absl::string_view o : absl::StrSplit(*(dash + 3), ',')) {
        if (o == controller) has = true;
      }
      if (!has) continue;
    }
    const std::string root(f[3]);
    std::string rel = cg_path;
    if (root != "/" && absl::StartsWith(rel, root)) {
      rel = rel.substr(root.size());
    } else if (root != "/") {
      rel = "";  // a path outside the mount's root: use the mount itself
    }
    if (rel == "/") rel = "";
    out->version = version;
    out->mount_point = paths.sys_root + std::string(f[4]);
    out->dir = out->mount_point + rel;
    return true;
  }
  return false;
}

// `dir`, its parent, ... up to the mount point.
std::vector<std::string> SelfAndAncestors(const CgroupDir& cg) {
  std::vector<std::string> dirs;
  std::string d = cg.dir;
  while (true) {
    dirs.push_back(d);
    if (d.size() <= cg.mount_point.size()) break;
    const size_t slash = d.rfind('/');
    if (slash == std::string::npos || slash < cg.mount_point.size()) break;
    d = d.substr(0, slash);
  }
  return dirs;
}

bool ReadInt(const std::string& path, int64_t* v) {
  std::string text;
  if (!ReadFile(path, &text)) return false;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), v);
}

// The tightest memory limit over the cgroup and its ancestors.
void ReadCgroupMemory(const HostPaths& paths, HostMemory* m) {
  for (int version : {2, 1}) {
    CgroupDir cg;
    if (!FindCgroupDir(paths, version, "memory", &cg)) continue;
    const char* limit_file = version == 2 ? "memory.max" : "memory.limit_in_bytes";
    const char* usage_file = version == 2 ? "memory.current" : "memory.usage_in_bytes";
    for (const std::string& d : SelfAndAncestors(cg)) {
      int64_t limit = 0;
      if (!ReadInt(absl::StrCat(d, "/", limit_file), &limit)) continue;  // "max"
      if (limit <= 0 || limit >= kUnlimited) continue;
      if (m->cgroup_limit_bytes > 0 && limit >= m->cgroup_limit_bytes) continue;
      m->cgroup_limit_bytes = limit;
      m->cgroup_usage_bytes = 0;
      ReadInt(absl::StrCat(d, "/", usage_file), &m->cgroup_usage_bytes);
      m->limit_source = absl::StrCat("cgroup v", version, " ", limit_file,
                                     " of ", d);
    }
  }
}

void ReadCgroupCpu(const HostPaths& paths, HostCpus* c) {
  for (int version : {2, 1}) {
    CgroupDir cg;
    if (!FindCgroupDir(paths, version, "cpu", &cg)) continue;
    for (const std::string& d : SelfAndAncestors(cg)) {
      double cpus = 0;
      std::string file;
      if (version == 2) {
        file = "cpu.max";
        std::string text;
        if (!ReadFile(absl::StrCat(d, "/cpu.max"), &text)) continue;
        std::vector<absl::string_view> f = absl::StrSplit(
            absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
        int64_t quota = 0, period = 0;
        if (f.size() != 2 || !absl::SimpleAtoi(f[0], &quota) ||
            !absl::SimpleAtoi(f[1], &period) || quota <= 0 || period <= 0) {
          continue;  // "max 100000": no quota
        }
        cpus = static_cast<double>(quota) / static_cast<double>(period);
      } else {
        file = "cpu.cfs_quota_us";
        int64_t quota = 0, period = 0;
        if (!ReadInt(absl::StrCat(d, "/cpu.cfs_quota_us"), &quota) ||
            !ReadInt(absl::StrCat(d, "/cpu.cfs_period_us"), &period) ||
            quota <= 0 || period <= 0) {
          continue;  // -1: no quota
        }
        cpus = static_cast<double>(quota) / static_cast<double>(period);
      }
      if (c->quota_cpus > 0 && cpus >= c->quota_cpus) continue;
      c->quota_cpus = cpus;
      c->quota_source = absl::StrCat("cgroup v", version, " ", file, " of ", d);
    }
  }
}

}  // namespace

int64_t HostMemory::available_bytes() const {
  int64_t avail = host_available_bytes;
  if (cgroup_limit_bytes > 0) {
    avail = std::min(avail, std::max<int64_t>(
                                cgroup_limit_bytes - cgroup_usage_bytes, 0));
  }
  return avail;
}

int HostCpus::usable() const {
  int n = std::max(1, affinity_cpus);
  if (quota_cpus > 0) {
    n = std::min(n, std::max(1, static_cast<int>(std::floor(quota_cpus + 1e-9))));
  }
  return n;
}

absl::StatusOr<HostMemory> ReadHostMemory(const HostPaths& paths) {
  HostMemory m;
  std::ifstream in(paths.proc_meminfo);
  if (!in) {
    return absl::UnavailableError(absl::StrCat("cannot read ", paths.proc_meminfo));
  }
  bool have_total = false, have_available = false;
  std::string key, unit;
  int64_t value_kb = 0;
  while (in >> key >> value_kb) {
    std::getline(in, unit);
    if (key == "MemTotal:") {
      m.host_total_bytes = value_kb * 1024;
      have_total = true;
    } else if (key == "MemAvailable:") {
      m.host_available_bytes = value_kb * 1024;
      have_available = true;
    }
  }
  if (!have_total || !have_available) {
    return absl::UnavailableError(
        absl::StrCat("MemTotal/MemAvailable not in ", paths.proc_meminfo));
  }
  m.limit_source = paths.proc_meminfo;
  ReadCgroupMemory(paths, &m);
  return m;
}

HostCpus ReadHostCpus(const HostPaths& paths) {
  HostCpus c;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    c.affinity_cpus = std::max(1, CPU_COUNT(&set));
  } else {
    c.affinity_cpus =
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  ReadCgroupCpu(paths, &c);
  return c;
}

int UsableCpus() {
  static const int n = ReadHostCpus().usable();
  return n;
}

}  // namespace inferd
