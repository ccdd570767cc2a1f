#include "runtime/engine/admission_front.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/runtime/engine/test_gate.h"

namespace inferd {
namespace {

using testing_internal::Gate;

// A request as the front sees it: a name, and whether its caller dropped it.
struct Item {
  std::string name;
  bool cancelled = false;
  bool prepared = false;
};

// Records what the stages did; `gate` (when set) holds prepare.
struct Recorder {
  absl::Mutex mu;
  std::vector<std::string> handed ABSL_GUARDED_BY(mu);
  std::vector<std::string> answers ABSL_GUARDED_BY(mu);
  std::vector<std::string> prepared ABSL_GUARDED_BY(mu);
  int64_t downstream ABSL_GUARDED_BY(mu) = 0;
  absl::Status hand_off_status;
  Gate* gate = nullptr;

  AdmissionFront<Item>::Stages Stages() {
    AdmissionFront<Item>::Stages s;
    s.prepare = [this](Item& item) -> absl::Status {
      if (gate != nullptr) gate->Enter();
      absl::MutexLock lock(&mu);
      prepared.push_back(item.name);
      if (item.name == "bad") return absl::InvalidArgumentError("bad input");
      item.prepared = true;
      return absl::OkStatus();
    };
    s.dropped = [](const Item& item) {
      return item.cancelled ? absl::CancelledError("cancelled")
                            : absl::OkStatus();
    };
    s.hand_off = [this](Item& item) -> absl::Status {
      if (!hand_off_status.ok()) return hand_off_status;
      absl::MutexLock lock(&mu);
      EXPECT_TRUE(item.prepared);
      handed.push_back(item.name);
      ++downstream;
      return absl::OkStatus();
    };
    s.answer = [this](Item& item, const absl::Status& why) {
      absl::MutexLock lock(&mu);
      answers.push_back(item.name + ":" +
                        std::string(absl::StatusCodeToString(why.code())));
    };
    s.downstream_waiting = [this] {
      absl::MutexLock lock(&mu);
      return downstream;
    };
    return s;
  }
};

TEST(AdmissionFrontTest, InlinePreparationReturnsErrorsAndHandsOff) {
  Recorder rec;
  AdmissionFront<Item> front(4, /*prep_threads=*/0, rec.Stages());
  front.Start();
  EXPECT_TRUE(front.Submit({"a"}).ok());
  const absl::Status bad = front.Submit({"bad"});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  absl::MutexLock lock(&rec.mu);
  EXPECT_EQ(rec.handed, std::vector<std::string>{"a"});
  EXPECT_TRUE(rec.answers.empty());  // errors returned, never answered
}

TEST(AdmissionFrontTest, QueueLimitCountsPreparingAndDownstream) {
  Recorder rec;
  Gate gate;
  rec.gate = &gate;
  {
    absl::MutexLock lock(&rec.mu);
    rec.downstream = 1;
  }
  AdmissionFront<Item> front(3, /*prep_threads=*/1, rec.Stages());
  front.Start();
  ASSERT_TRUE(front.Submit({"a"}).ok());
  gate.WaitEntered(1);  // "a" is being prepared
  ASSERT_TRUE(front.Submit({"b"}).ok());
  EXPECT_EQ(front.in_prep(), 2);
  // 1 downstream + 2 in the front = 3: full.
  const absl::Status full = front.Submit({"c"});
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(full.message()).find("--max-queue-requests=3"),
            std::string::npos);
  gate.Notify();
  {
    absl::MutexLock lock(&rec.mu);
    rec.mu.Await(absl::Condition(
        +[](Recorder* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu) {
          return r->handed.size() == 2;
        },
        &rec));
    EXPECT_EQ(rec.handed, (std::vector<std::string>{"a", "b"}));
  }
  EXPECT_EQ(front.in_prep(), 0);
  front.Stop();
}

TEST(AdmissionFrontTest, StopAnswersQueuedItemsUnavailable) {
  Recorder rec;
  Gate gate;
  rec.gate = &gate;
  AdmissionFront<Item> front(8, /*prep_threads=*/1, rec.Stages());
  front.Start();
  ASSERT_TRUE(front.Submit({"a"}).ok());
  gate.WaitEntered(1);
  ASSERT_TRUE(front.Submit({"b"}).ok());
  ASSERT_TRUE(front.Submit({"c"}).ok());
  // Stop while "a" is being prepared: "a" still goes downstream; of the
  // queued ones, those the worker has not started when Stop lands are
  // answered UNAVAILABLE, the others handed off. Each exactly once.
  std::thread stopper([&] { front.Stop(); });
  gate.Notify();
  stopper.join();
  EXPECT_EQ(front.in_prep(), 0);
  EXPECT_EQ(front.Submit({"late"}).code(), absl::StatusCode::kUnavailable);
  absl::MutexLock lock(&rec.mu);
  ASSERT_FALSE(rec.handed.empty());
  EXPECT_EQ(rec.handed[0], "a");
  EXPECT_EQ(rec.handed.size() + rec.answers.size(), 3u);
  for (const std::string& a : rec.answers) {
    EXPECT_TRUE(a == "b:UNAVAILABLE" || a == "c:UNAVAILABLE") << a;
  }
}

TEST(AdmissionFrontTest, DroppedItemsAreAnsweredWithoutPreparation) {
  Recorder rec;
  Gate gate;
  rec.gate = &gate;
  AdmissionFront<Item> front(8, /*prep_threads=*/1, rec.Stages());
  front.Start();
  ASSERT_TRUE(front.Submit({"first"}).ok());
  gate.WaitEntered(1);
  Item dropped{"dropped"};
  dropped.cancelled = true;
  ASSERT_TRUE(front.Submit(dropped).ok());
  ASSERT_TRUE(front.Submit({"bad"}).ok());
  gate.Notify();
  {
    // Both queued items get their answer from the worker.
    absl::MutexLock lock(&rec.mu);
    rec.mu.Await(absl::Condition(
        +[](Recorder* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu) {
          return r->answers.size() == 2;
        },
        &rec));
    EXPECT_EQ(rec.handed, std::vector<std::string>{"first"});
    EXPECT_EQ(rec.prepared, (std::vector<std::string>{"first", "bad"}));
    EXPECT_EQ(rec.answers, (std::vector<std::string>{
                               "dropped:CANCELLED", "bad:INVALID_ARGUMENT"}));
  }
  front.Stop();
  EXPECT_EQ(front.in_prep(), 0);
}

TEST(AdmissionFrontTest, RefusedHandOffIsTheAnswerAndStopRefusesNewItems) {
  Recorder rec;
  rec.hand_off_status = absl::ResourceExhaustedError("too many tokens");
  Gate gate;
  rec.gate = &gate;
  AdmissionFront<Item> front(8, /*prep_threads=*/1, rec.Stages());
  front.Start();
  ASSERT_TRUE(front.Submit({"a"}).ok());
  gate.WaitEntered(1);
  gate.Notify();
  front.Stop();
  EXPECT_EQ(front.Submit({"late"}).code(), absl::StatusCode::kUnavailable);
  absl::MutexLock lock(&rec.mu);
  EXPECT_TRUE(rec.handed.empty());
  EXPECT_EQ(rec.answers, std::vector<std::string>{"a:RESOURCE_EXHAUSTED"});
}

}  // namespace
}  // namespace inferd
