// inferd: serve Hugging Face model directories over gRPC.
#include <malloc.h>
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "runtime/engine/builtins.h"
#include "runtime/engine/plugin.h"
#include "service/flags.h"
#include "service/logging.h"
#include "service/server.h"

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // Blocks of 1 MiB and more (weights, KV caches, activations) are mapped
  // on their own, so freeing them (a model unloaded) returns them to the
  // system at once. A fixed threshold also stops glibc from raising it
  // after the first large free, which would put later large blocks on the
  // heap, where they fragment and stay resident.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  // Every registry's built-ins, before flags name components and plug-ins
  // add theirs.
  inferd::RegisterBuiltins();
  auto options = inferd::ParseFlags(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "inferd: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->help) {
    std::cout << inferd::HelpText();
    return 0;
  }
  if (options->print_config) {
    std::cout << inferd::ConfigYaml(*options);
    return 0;
  }
  if (options->version) {
    std::cout << "inferd 0.1.0\n";
    return 0;
  }
  if (options->list_components) {
    absl::Status plugins = inferd::LoadPlugins(options->plugins);
    if (!plugins.ok()) {
      std::fprintf(stderr, "inferd: %s\n",
                   std::string(plugins.message()).c_str());
      return 2;
    }
    std::cout << inferd::ListComponents();
    return 0;
  }
  auto log = inferd::InitLogging(options->log_format == "json"
                                     ? inferd::LogFormat::kJson
                                     : inferd::LogFormat::kText,
                                 options->log_level);
  if (!log.ok()) {
    std::fprintf(stderr, "inferd: %s\n", std::string(log.message()).c_str());
    return 2;
  }

  // Block SIGTERM/SIGINT in every thread; this thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = inferd::Server::Start(*options);
  if (!server.ok()) {
    std::fprintf(stderr, "inferd: %s\n",
                 std::string(server.status().message()).c_str());
    return 2;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  LOG_INFO("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown(absl::Seconds(options->drain_timeout_seconds));
  return 0;
}
