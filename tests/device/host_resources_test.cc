// device/cpu/host_resources: the memory limit and CPU quota of a process's
// cgroup (v2 and v1, nested limits, "no limit" spellings) read from fake
// /proc and /sys trees, and the affinity mask of this process.
#include "device/cpu/host_resources.h"

#include "device/cpu/cpu_device.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace inferd {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

class FakeHost {
 public:
  FakeHost() {
    char tmpl[] = "/tmp/inferd_host_XXXXXX";
    root_ = mkdtemp(tmpl);
    paths_.proc_self_cgroup = root_ + "/cgroup";
    paths_.proc_self_mountinfo = root_ + "/mountinfo";
    paths_.proc_meminfo = root_ + "/meminfo";
    paths_.sys_root = root_;
    Write("meminfo", "MemTotal:       16384000 kB\nMemFree: 1 kB\n"
                     "MemAvailable:   12000000 kB\n");
  }
  ~FakeHost() {
    int rc = std::system(absl::StrCat("rm -rf ", root_).c_str());
    (void)rc;
  }

  void Write(const std::string& rel, const std::string& text) {
    const std::string path = root_ + "/" + rel;
    int rc = std::system(absl::StrCat("mkdir -p $(dirname ", path, ")").c_str());
    (void)rc;
    std::ofstream(path) << text;
  }
  const HostPaths& paths() const { return paths_; }

 private:
  std::string root_;
  HostPaths paths_;
};

TEST(HostResourcesTest, NoCgroupLimitMeansMeminfo) {
  FakeHost h;
  h.Write("cgroup", "0::/\n");
  h.Write("mountinfo",
          "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  h.Write("sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  auto m = ReadHostMemory(h.paths());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cgroup_limit_bytes, 0);
  EXPECT_EQ(m->limit_bytes(), int64_t{16384000} * 1024);
  EXPECT_EQ(m->available_bytes(), int64_t{12000000} * 1024);
}

TEST(HostResourcesTest, CgroupV2TightestAncestorLimitBinds) {
  FakeHost h;
  h.Write("cgroup", "0::/kubepods/pod1/ctr\n");
  h.Write("mountinfo",
          "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n");
  h.Write("sys/fs/cgroup/kubepods/memory.max", "max\n");
  h.Write("sys/fs/cgroup/kubepods/pod1/memory.max", "3221225472\n");
  h.Write("sys/fs/cgroup/kubepods/pod1/memory.current", "1073741824\n");
  h.Write("sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n");
  h.Write("sys/fs/cgroup/kubepods/pod1/ctr/memory.current", "5\n");
  auto m = ReadHostMemory(h.paths());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cgroup_limit_bytes, 3 * kGiB);
  EXPECT_EQ(m->cgroup_usage_bytes, kGiB);
  EXPECT_EQ(m->limit_bytes(), 3 * kGiB);
  // 3 GiB limit - 1 GiB used, below MemAvailable.
  EXPECT_EQ(m->available_bytes(), 2 * kGiB);
  EXPECT_NE(m->limit_source.find("cgroup v2 memory.max"), std::string::npos)
      << m->limit_source;
  EXPECT_NE(m->limit_source.find("kubepods/pod1"), std::string::npos);
}

TEST(HostResourcesTest, CgroupV1MountRootIsStripped) {
  FakeHost h;
  // A container whose memory hierarchy is mounted at its own cgroup: the
  // mount root is the process's cgroup path.
  h.Write("cgroup", "4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n");
  h.Write("mountinfo",
          "35 31 0:30 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup "
          "rw,memory\n"
          "36 31 0:31 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup "
          "cgroup rw,cpu,cpuacct\n");
  h.Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "2147483648\n");
  h.Write("sys/fs/cgroup/memory/memory.usage_in_bytes", "0\n");
  auto m = ReadHostMemory(h.paths());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cgroup_limit_bytes, 2 * kGiB);
  EXPECT_NE(m->limit_source.find("cgroup v1 memory.limit_in_bytes"),
            std::string::npos);
  // v1's "unlimited" is the largest page-aligned int64.
  h.Write("sys/fs/cgroup/memory/memory.limit_in_bytes",
          "9223372036854771712\n");
  m = ReadHostMemory(h.paths());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->cgroup_limit_bytes, 0);

  h.Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n");
  h.Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  HostCpus c = ReadHostCpus(h.paths());
  EXPECT_DOUBLE_EQ(c.quota_cpus, 1.5);
  EXPECT_EQ(c.usable(), 1);  // rounded down, at most the affinity mask
  h.Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(ReadHostCpus(h.paths()).quota_cpus, 0);
}

TEST(HostResourcesTest, CgroupV2CpuMax) {
  FakeHost h;
  h.Write("cgroup", "0::/pod\n");
  h.Write("mountinfo", "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  h.Write("sys/fs/cgroup/pod/cpu.max", "max 100000\n");
  HostCpus c = ReadHostCpus(h.paths());
  EXPECT_EQ(c.quota_cpus, 0);
  EXPECT_EQ(c.usable(), c.affinity_cpus);
  h.Write("sys/fs/cgroup/pod/cpu.max", "50000 100000\n");
  c = ReadHostCpus(h.paths());
  EXPECT_DOUBLE_EQ(c.quota_cpus, 0.5);
  EXPECT_EQ(c.usable(), 1);  // never below one thread
  EXPECT_NE(c.quota_source.find("cpu.max"), std::string::npos);
  HostCpus many;
  many.affinity_cpus = 16;
  many.quota_cpus = 4.0;
  EXPECT_EQ(many.usable(), 4);
  many.quota_cpus = 32.0;
  EXPECT_EQ(many.usable(), 16);
}

TEST(HostResourcesTest, AffinityMaskIsThisProcesssCpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  HostCpus c = ReadHostCpus();
  EXPECT_EQ(c.affinity_cpus, CPU_COUNT(&set));
  EXPECT_GE(UsableCpus(), 1);
  EXPECT_LE(UsableCpus(), c.affinity_cpus);
}

int64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
  }
  return -1;
}

// The KV cache's allocation: zeros that cost resident memory only where
// written.
TEST(CpuDeviceTest, AllocateZeroedIsCommittedLazily) {
  auto device = CreateCpuDevice(DeviceOptions{1});
  ASSERT_TRUE(device.ok());
  const size_t bytes = size_t{1} << 30;
  const int64_t before = ResidentBytes();
  auto p = (*device)->AllocateZeroed(bytes, 64);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 64, 0u);
  EXPECT_LT(ResidentBytes() - before, int64_t{64} << 20);
  auto* bytes_p = static_cast<unsigned char*>(*p);
  // Every 1 MiB: zero, then written (one page each, 1024 pages).
  for (size_t off = 0; off < bytes; off += size_t{1} << 20) {
    ASSERT_EQ(bytes_p[off], 0) << off;
    bytes_p[off] = 1;
  }
  const int64_t grown = ResidentBytes() - before;
  EXPECT_GE(grown, int64_t{1024} * 4096 / 2);
  EXPECT_LT(grown, int64_t{256} << 20);
  (*device)->Free(*p);
  // Plain allocations still go through Free too.
  auto q = (*device)->Allocate(4096, 64);
  ASSERT_TRUE(q.ok());
  (*device)->Free(*q);
  (*device)->Free(nullptr);
}

TEST(HostResourcesTest, MissingMeminfoIsAnError) {
  HostPaths p;
  p.proc_meminfo = "/nonexistent/meminfo";
  EXPECT_EQ(ReadHostMemory(p).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace inferd
