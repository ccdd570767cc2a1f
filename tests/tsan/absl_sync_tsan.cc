// ThreadSanitizer view of the system abseil's synchronization primitives.
//
// inferd links Debian's prebuilt abseil, which is not built with
// -fsanitize=thread: absl::Mutex, absl::CondVar and absl::Notification
// synchronize with atomics and futexes TSan never sees, so every access
// guarded by an absl::Mutex would be reported as a race. This file, linked
// only into the TSan tier's binaries (which are linked with -rdynamic so the
// definitions here also take the place of the library's for calls made from
// gRPC and from abseil itself), defines the public entry points of those
// classes: each calls the library's own definition (found with
// dlsym(RTLD_NEXT)) and tells TSan what it did:
//   - taking a lock (any mode, including the re-acquisition at the end of an
//     Await or a CondVar wait) acquires the mutex's address;
//   - releasing it (including the release at the start of a wait) releases
//     that address;
//   - Notify releases the notification's flag and the waits acquire it (so
//     the header's inline HasBeenNotified, an acquire load TSan does see,
//     pairs with Notify).
// A Condition may be evaluated inside the library by a waiting thread while
// it holds the lock but before its acquisition is reported here, or by the
// thread unlocking the mutex on the waiters' behalf (Unlock wakes only a
// waiter whose condition holds) after its release was reported; reads
// during Await/LockWhen, Unlock and CondVar waits are therefore ignored
// (conditions only read).
//
// Thread-safety: the functions are as thread-safe as the ones they wrap.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/config.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

extern "C" {
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
}

namespace {

#define INFERD_TSAN_STR2(x) #x
#define INFERD_TSAN_STR(x) INFERD_TSAN_STR2(x)

// The Itanium-mangled name of absl::<inline namespace>::<rest>, where
// `rest` is the remainder of the mangled name after the namespace.
std::string AbslSymbol(const char* rest, bool is_const = false) {
#if ABSL_OPTION_USE_INLINE_NAMESPACE
  const std::string ns = INFERD_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string prefix = "4absl" + std::to_string(ns.size()) + ns;
#else
  const std::string prefix = "4absl";
#endif
  return std::string(is_const ? "_ZNK" : "_ZN") + prefix + rest;
}

void* Real(const char* rest, bool is_const = false) {
  const std::string name = AbslSymbol(rest, is_const);
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_sync_tsan: %s not found in the abseil library\n",
                 name.c_str());
    std::abort();
  }
  return fn;
}

// Resolves the library's definition once per wrapper.
#define INFERD_REAL(type, rest, ...) \
  static const auto real = reinterpret_cast<type>(Real(rest, ##__VA_ARGS__))

void Acquired(const void* mu) { __tsan_acquire(const_cast<void*>(mu)); }
void Releasing(const void* mu) { __tsan_release(const_cast<void*>(mu)); }

struct IgnoreReads {
  IgnoreReads() { AnnotateIgnoreReadsBegin(__FILE__, __LINE__); }
  ~IgnoreReads() { AnnotateIgnoreReadsEnd(__FILE__, __LINE__); }
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  INFERD_REAL(void (*)(Mutex*), "5Mutex4LockEv");
  real(this);
  Acquired(this);
}

void Mutex::Unlock() {
  INFERD_REAL(void (*)(Mutex*), "5Mutex6UnlockEv");
  Releasing(this);
  IgnoreReads ignore;  // waiters' conditions
  real(this);
}

bool Mutex::TryLock() {
  INFERD_REAL(bool (*)(Mutex*), "5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}

void Mutex::ReaderLock() {
  INFERD_REAL(void (*)(Mutex*), "5Mutex10ReaderLockEv");
  real(this);
  Acquired(this);
}

void Mutex::ReaderUnlock() {
  INFERD_REAL(void (*)(Mutex*), "5Mutex12ReaderUnlockEv");
  Releasing(this);
  IgnoreReads ignore;  // waiters' conditions
  real(this);
}

bool Mutex::ReaderTryLock() {
  INFERD_REAL(bool (*)(Mutex*), "5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}

void Mutex::Await(const Condition& cond) {
  INFERD_REAL(void (*)(Mutex*, const Condition&), "5Mutex5AwaitERKNS0_9ConditionE");
  Releasing(this);
  {
    IgnoreReads ignore;
    real(this, cond);
  }
  Acquired(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  INFERD_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
              "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Releasing(this);
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, timeout);
  }
  Acquired(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  INFERD_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
              "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Releasing(this);
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, deadline);
  }
  Acquired(this);
  return met;
}

void Mutex::LockWhen(const Condition& cond) {
  INFERD_REAL(void (*)(Mutex*, const Condition&), "5Mutex8LockWhenERKNS0_9ConditionE");
  {
    IgnoreReads ignore;
    real(this, cond);
  }
  Acquired(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  INFERD_REAL(void (*)(Mutex*, const Condition&),
              "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  {
    IgnoreReads ignore;
    real(this, cond);
  }
  Acquired(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  INFERD_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
              "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, timeout);
  }
  Acquired(this);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  INFERD_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
              "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, deadline);
  }
  Acquired(this);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond,
                                      absl::Duration timeout) {
  INFERD_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
              "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, timeout);
  }
  Acquired(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond,
                                       absl::Time deadline) {
  INFERD_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
              "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, deadline);
  }
  Acquired(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  INFERD_REAL(void (*)(CondVar*, Mutex*), "7CondVar4WaitEPNS0_5MutexE");
  Releasing(mu);
  {
    IgnoreReads ignore;  // the unlock inside: waiters' conditions
    real(this, mu);
  }
  Acquired(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  INFERD_REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
              "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Releasing(mu);
  bool timed_out;
  {
    IgnoreReads ignore;
    timed_out = real(this, mu, timeout);
  }
  Acquired(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  INFERD_REAL(bool (*)(CondVar*, Mutex*, absl::Time),
              "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Releasing(mu);
  bool timed_out;
  {
    IgnoreReads ignore;
    timed_out = real(this, mu, deadline);
  }
  Acquired(mu);
  return timed_out;
}

void Notification::Notify() {
  INFERD_REAL(void (*)(Notification*), "12Notification6NotifyEv");
  Releasing(&notified_yet_);
  real(this);
}

void Notification::WaitForNotification() const {
  INFERD_REAL(void (*)(const Notification*), "12Notification19WaitForNotificationEv",
              true);
  real(this);
  Acquired(&notified_yet_);
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  INFERD_REAL(bool (*)(const Notification*, absl::Duration),
              "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  const bool notified = real(this, timeout);
  Acquired(&notified_yet_);
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  INFERD_REAL(bool (*)(const Notification*, absl::Time),
              "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  const bool notified = real(this, deadline);
  Acquired(&notified_yet_);
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
