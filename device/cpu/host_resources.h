// What this process may use of the host: memory (the cgroup's limit when one
// is set, v2 memory.max or v1 memory.limit_in_bytes, else /proc/meminfo) and
// CPUs (the affinity mask, capped by a cgroup CPU quota, v2 cpu.max or v1
// cpu.cfs_quota_us). Inside a container /proc/meminfo and the online cores
// describe the node, not the pod; these functions describe the pod.
// Thread-safe (they only read files).
#ifndef INFERD_DEVICE_CPU_HOST_RESOURCES_H_
#define INFERD_DEVICE_CPU_HOST_RESOURCES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace inferd {

// Where the files are; tests point these at a fake tree.
struct HostPaths {
  std::string proc_self_cgroup = "/proc/self/cgroup";
  std::string proc_self_mountinfo = "/proc/self/mountinfo";
  std::string proc_meminfo = "/proc/meminfo";
  // Prepended to every mount point read from mountinfo ("" on a real host).
  std::string sys_root;
};

struct HostMemory {
  // MemTotal of /proc/meminfo.
  int64_t host_total_bytes = 0;
  // MemAvailable of /proc/meminfo.
  int64_t host_available_bytes = 0;
  // The tightest cgroup memory limit on this process's cgroup or its
  // ancestors; 0 when none is set.
  int64_t cgroup_limit_bytes = 0;
  // Memory charged to that cgroup now (v2 memory.current, v1
  // memory.usage_in_bytes); 0 without a limit.
  int64_t cgroup_usage_bytes = 0;
  // "cgroup v2 memory.max of /sys/fs/cgroup/x" or "/proc/meminfo".
  std::string limit_source;

  // The limit that binds: the cgroup's when set, else MemTotal.
  int64_t limit_bytes() const {
    return cgroup_limit_bytes > 0 ? cgroup_limit_bytes : host_total_bytes;
  }
  // What the process may still take: MemAvailable, and under a cgroup limit
  // no more than limit - usage.
  int64_t available_bytes() const;
};

struct HostCpus {
  // CPUs in this process's affinity mask (sched_getaffinity).
  int affinity_cpus = 1;
  // The cgroup CPU quota in CPUs (quota / period), 0 when none is set.
  double quota_cpus = 0;
  // "cgroup v2 cpu.max of /sys/fs/cgroup/x" when a quota applies.
  std::string quota_source;
  // Worker threads to run: the affinity count, capped by the quota rounded
  // down (a thread the quota cannot keep running stalls every parallel
  // kernel waiting for it), at least 1.
  int usable() const;
};

// Reads the memory files; UNAVAILABLE when /proc/meminfo lacks MemTotal or
// MemAvailable.
absl::StatusOr<HostMemory> ReadHostMemory(const HostPaths& paths = {});

// Reads the affinity mask and the CPU quota (never fails: without readable
// files it reports the affinity mask, or 1 CPU).
HostCpus ReadHostCpus(const HostPaths& paths = {});

// CPUs this process may use (ReadHostCpus().usable()), read once and cached.
int UsableCpus();

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_HOST_RESOURCES_H_
