// ThreadSanitizer view of the hand-offs between threads inside gRPC.
//
// inferd links Debian's prebuilt gRPC, which is not built with
// -fsanitize=thread. gRPC's C++ API is largely header code (the callback
// reactors' streams, CallOpSet, the completion tags), compiled into the
// TSan tier's instrumented binaries; its core, which carries a batch of
// operations from the thread that starts it (grpc_call_start_batch) to the
// thread that completes it (grpc_cq_end_op, which runs the completion tag's
// callback inline or hands it to gRPC's executor), is not. TSan sees the
// header code on both threads but not the hand-off between them, and
// reports every operation set, message buffer and reactor gRPC passes from
// one to the other as a race.
//
// This file, linked only into the TSan binaries that use gRPC (with
// -rdynamic, so the definitions here take the place of the library's for
// gRPC's own calls: libgrpc and libgrpc++ call these functions through the
// PLT), defines the entry points where work changes hands; each calls the
// library's definition (found with dlsym(RTLD_NEXT)) and tells TSan what
// was handed over:
//   - grpc_call_start_batch, grpc_server_request_call and
//     grpc_server_request_registered_call release the tag before the batch
//     or request is handed to the core (what the starting thread wrote is
//     visible to whoever completes it);
//   - grpc_cq_end_op, where the core completes a tag, acquires it and
//     releases it again (to the thread that runs the completion: this one,
//     one of gRPC's executor threads, which take work under abseil's Mutex
//     and CondVar as seen through absl_sync_tsan.cc, or a thread that takes
//     it from the queue);
//   - grpc_completion_queue_next and grpc_completion_queue_pluck acquire
//     the tag of the event they return (the callback server's "nexting"
//     threads run the tag's callback next);
//   - ServerCallbackCall::ScheduleOnDone and CallOnCancel (libgrpc++)
//     acquire the call's reference and cancellation counters, whose last
//     decrement may come from inside libgrpc++ (see below).
// These are orderings gRPC provides (a tag completes after its batch was
// started; OnDone runs after the last reference is dropped); they add none
// between inferd's threads that gRPC does not provide.
//
// Thread-safety: the functions are as thread-safe as the ones they wrap.
#include <dlfcn.h>
#include <grpc/grpc.h>
#include <grpcpp/support/server_callback.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"

// gRPC core's completion entry point (src/core/lib/surface/completion_queue.h,
// not installed; grpc_error_handle is absl::Status in this gRPC).
struct grpc_cq_completion;
void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage),
                    void* done_arg, grpc_cq_completion* storage,
                    bool internal);

namespace {

// The library's definition of `self`, a function defined in this file
// (looked up by the name the executable exports it under).
void* Real(void* self) {
  Dl_info info;
  void* fn = nullptr;
  if (dladdr(self, &info) != 0 && info.dli_sname != nullptr) {
    fn = dlsym(RTLD_NEXT, info.dli_sname);
  }
  if (fn == nullptr) {
    std::fprintf(stderr,
                 "grpc_tsan: the gRPC library's definition of the function "
                 "at %p was not found (is the binary linked with -rdynamic?)\n",
                 self);
    std::abort();
  }
  return fn;
}

// The event's tag completed: the thread that takes it from the queue runs
// its callback (the callback server's "nexting" threads) or owns it.
grpc_event AcquiredEvent(grpc_event event) {
  if (event.type == GRPC_OP_COMPLETE && event.tag != nullptr) {
    __tsan_acquire(event.tag);
  }
  return event;
}

// The library's definition of a C++ function, by its mangled name.
void* RealNamed(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) {
    std::fprintf(stderr, "grpc_tsan: %s not found in the gRPC library\n",
                 name);
    std::abort();
  }
  return fn;
}

}  // namespace

namespace grpc {
namespace internal {

// The last reference to a callback call, or the last condition for its
// OnCancel, may be dropped inside libgrpc++ (the call's CompletionOp, the
// OnCancel closure): an atomic decrement TSan does not see. The other
// decrements are header code, which TSan sees release the counter. gRPC
// then runs OnDone (or OnCancel) through these two functions, which
// acquire the counter first.
void ServerCallbackCall::ScheduleOnDone(bool inline_ondone) {
  static const auto real = reinterpret_cast<void (*)(ServerCallbackCall*, bool)>(
      RealNamed("_ZN4grpc8internal18ServerCallbackCall14ScheduleOnDoneEb"));
  __tsan_acquire(&callbacks_outstanding_);
  __tsan_acquire(&on_cancel_conditions_remaining_);
  real(this, inline_ondone);
}

void ServerCallbackCall::CallOnCancel(ServerReactor* reactor) {
  static const auto real =
      reinterpret_cast<void (*)(ServerCallbackCall*, ServerReactor*)>(RealNamed(
          "_ZN4grpc8internal18ServerCallbackCall12CallOnCancelEPNS0_"
          "13ServerReactorE"));
  __tsan_acquire(&on_cancel_conditions_remaining_);
  real(this, reactor);
}

}  // namespace internal
}  // namespace grpc

grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops,
                                      size_t nops, void* tag, void* reserved) {
  using Fn = grpc_call_error (*)(grpc_call*, const grpc_op*, size_t, void*,
                                 void*);
  static const auto real =
      reinterpret_cast<Fn>(Real(reinterpret_cast<void*>(&grpc_call_start_batch)));
  if (tag != nullptr) __tsan_release(tag);
  return real(call, ops, nops, tag, reserved);
}

void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage),
                    void* done_arg, grpc_cq_completion* storage,
                    bool internal) {
  using Fn = void (*)(grpc_completion_queue*, void*, absl::Status,
                      void (*)(void*, grpc_cq_completion*), void*,
                      grpc_cq_completion*, bool);
  static const auto real =
      reinterpret_cast<Fn>(Real(reinterpret_cast<void*>(&grpc_cq_end_op)));
  if (tag != nullptr) {
    __tsan_acquire(tag);
    __tsan_release(tag);
  }
  real(cq, tag, std::move(error), done, done_arg, storage, internal);
}

grpc_call_error grpc_server_request_call(
    grpc_server* server, grpc_call** call, grpc_call_details* details,
    grpc_metadata_array* request_metadata,
    grpc_completion_queue* cq_bound_to_call,
    grpc_completion_queue* cq_for_notification, void* tag_new) {
  using Fn = grpc_call_error (*)(grpc_server*, grpc_call**, grpc_call_details*,
                                 grpc_metadata_array*, grpc_completion_queue*,
                                 grpc_completion_queue*, void*);
  static const auto real = reinterpret_cast<Fn>(
      Real(reinterpret_cast<void*>(&grpc_server_request_call)));
  if (tag_new != nullptr) __tsan_release(tag_new);
  return real(server, call, details, request_metadata, cq_bound_to_call,
              cq_for_notification, tag_new);
}

grpc_call_error grpc_server_request_registered_call(
    grpc_server* server, void* registered_method, grpc_call** call,
    gpr_timespec* deadline, grpc_metadata_array* request_metadata,
    grpc_byte_buffer** optional_payload,
    grpc_completion_queue* cq_bound_to_call,
    grpc_completion_queue* cq_for_notification, void* tag_new) {
  using Fn = grpc_call_error (*)(grpc_server*, void*, grpc_call**,
                                 gpr_timespec*, grpc_metadata_array*,
                                 grpc_byte_buffer**, grpc_completion_queue*,
                                 grpc_completion_queue*, void*);
  static const auto real = reinterpret_cast<Fn>(
      Real(reinterpret_cast<void*>(&grpc_server_request_registered_call)));
  if (tag_new != nullptr) __tsan_release(tag_new);
  return real(server, registered_method, call, deadline, request_metadata,
              optional_payload, cq_bound_to_call, cq_for_notification,
              tag_new);
}

grpc_event grpc_completion_queue_next(grpc_completion_queue* cq,
                                      gpr_timespec deadline, void* reserved) {
  using Fn = grpc_event (*)(grpc_completion_queue*, gpr_timespec, void*);
  static const auto real = reinterpret_cast<Fn>(
      Real(reinterpret_cast<void*>(&grpc_completion_queue_next)));
  return AcquiredEvent(real(cq, deadline, reserved));
}

grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag,
                                       gpr_timespec deadline, void* reserved) {
  using Fn = grpc_event (*)(grpc_completion_queue*, void*, gpr_timespec, void*);
  static const auto real = reinterpret_cast<Fn>(
      Real(reinterpret_cast<void*>(&grpc_completion_queue_pluck)));
  return AcquiredEvent(real(cq, tag, deadline, reserved));
}
