// ReactorLink: the only way an engine thread reaches a gRPC reactor.
// gRPC owns a reactor's lifetime: the reactor deletes itself in OnDone, which
// a gRPC thread may run at any moment after Finish (and Finish may come from
// a gRPC thread reacting to a cancel or a failed write, while an engine
// thread is about to deliver a result). So engine callbacks never capture a
// raw reactor pointer; they capture a shared ReactorLink. Thread-safe.
//
// Contract:
// - Visit(fn) runs fn(reactor) under the link's mutex while the reactor is
//   attached, and returns false (fn not run) once it is detached. A
//   callback that arrives after the call ended is dropped here.
// - The reactor's OnDone calls Detach() before it deletes itself. Detach
//   waits for a Visit that is running, so a reactor is never entered after
//   it was freed, and never freed while it is entered.
// - fn may call StartWrite/Finish: inferd's reactors are not inlineable, so
//   gRPC runs their OnDone on its own threads, never inside Finish. fn must
//   not call Visit or Detach (the mutex is not reentrant).
// - Lock order: link mutex, then the reactor's own mutex. A reactor never
//   takes its link's mutex while holding its own.
//
// AwaitReactions (below) is the other half of a reactor's OnDone: the
// ordering between its last reactions and its deletion.
#ifndef INFERD_SERVICE_GRPC_REACTOR_LINK_H_
#define INFERD_SERVICE_GRPC_REACTOR_LINK_H_

#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace inferd {

template <typename Reactor>
class ReactorLink {
 public:
  // The shared link of `reactor`; the reactor keeps one copy and hands the
  // others to engine callbacks.
  static std::shared_ptr<ReactorLink> Create(Reactor* reactor) {
    return std::shared_ptr<ReactorLink>(new ReactorLink(reactor));
  }

  ReactorLink(const ReactorLink&) = delete;
  ReactorLink& operator=(const ReactorLink&) = delete;

  template <typename Fn>
  bool Visit(Fn&& fn) {
    absl::MutexLock lock(&mu_);
    if (reactor_ == nullptr) return false;
    std::forward<Fn>(fn)(*reactor_);
    return true;
  }

  // As Visit, but fn runs without the link's mutex held, so engine
  // callbacks may Visit meanwhile: for what a reaction would do (submit a
  // request) done on a thread of inferd's instead (a request that waited
  // for an on-demand model's load). Holding the mutex there would order it
  // before the engine's locks, which order themselves before it when they
  // answer. Detach waits for fn to return.
  template <typename Fn>
  bool Enter(Fn&& fn) {
    Reactor* reactor;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr) return false;
      reactor = reactor_;
      ++entered_;
    }
    std::forward<Fn>(fn)(*reactor);
    absl::MutexLock lock(&mu_);
    --entered_;
    return true;
  }

  // Idempotent. After it returns, no Visit or Enter runs or will run fn.
  void Detach() {
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
    auto left = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return entered_ == 0;
    };
    mu_.Await(absl::Condition(&left));
  }

 private:
  explicit ReactorLink(Reactor* reactor) : reactor_(reactor) {}

  absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
};

// Called by a reactor's OnDone before it deletes itself, with the mutex
// under which each of its reactions (OnCancel, OnReadDone, OnWriteDone)
// ends. gRPC runs OnDone only after every other reaction has returned, but
// it orders them with atomics inside its prebuilt library, which
// ThreadSanitizer does not see: without this, TSan reports the destructor
// against the last reaction's accesses. Taking and releasing `mu` orders
// the deletion after the last section under it where TSan sees it too; it
// does not wait in practice (no reaction holds `mu` any more).
inline void AwaitReactions(absl::Mutex* mu) {
  mu->Lock();
  mu->Unlock();
}

}  // namespace inferd

#endif  // INFERD_SERVICE_GRPC_REACTOR_LINK_H_
