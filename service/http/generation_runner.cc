#include "service/http/generation_runner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/request/outbox.h"

namespace inferd::http {
namespace {

using GenOutbox = Outbox<GenerateOutput>;

// Ends the call as cancelled when the client left before the answer was
// written whole.
void OnLeft(const std::shared_ptr<GenOutbox>& outbox,
            const std::shared_ptr<HttpCall>& call, bool success, bool done) {
  if (success && done) return;
  const absl::Status left =
      absl::CancelledError("the client closed the connection");
  outbox->Cancel(left);
  call->set_status(left);
}

void Stream(httplib::Response& res, std::shared_ptr<HttpCall> call,
            std::shared_ptr<GenOutbox> outbox,
            std::shared_ptr<AnswerWriter> writer) {
  res.set_header("Cache-Control", "no-cache");
  auto done = std::make_shared<bool>(false);
  res.set_chunked_content_provider(
      "text/event-stream",
      [outbox, call, writer, done](size_t, httplib::DataSink& sink) {
        if (*done) return false;
        GenOutbox::Next next = outbox->Pull();
        std::string text;
        if (!next.item.has_value()) {
          text = writer->StreamError(call->Named(*next.end));
        } else {
          text = writer->Add(*next.item);
          if (!next.item->last) {
            return text.empty() || sink.write(text.data(), text.size());
          }
          text += writer->Finish();
        }
        *done = true;
        if (!sink.write(text.data(), text.size())) return false;
        sink.done();
        return true;
      },
      [outbox, call, done](bool success) {
        OnLeft(outbox, call, success, *done);
      });
  call->set_status(absl::OkStatus());
}

void Whole(httplib::Response& res, std::shared_ptr<HttpCall> call,
           std::shared_ptr<GenOutbox> outbox,
           std::shared_ptr<AnswerWriter> writer) {
  GenOutbox::Next first = outbox->Pull();
  if (!first.item.has_value()) {
    call->Fail(res, *first.end);
    return;
  }
  writer->Add(*first.item);
  call->set_status(absl::OkStatus());
  if (first.item->last) {
    res.set_content(writer->Finish(), "application/json");
    return;
  }
  auto done = std::make_shared<bool>(false);
  auto next_beat = std::make_shared<absl::Time>(
      absl::Now() + absl::Seconds(kHeartbeatSeconds));
  res.set_chunked_content_provider(
      "application/json",
      [outbox, call, writer, done, next_beat](size_t, httplib::DataSink& sink) {
        // A heartbeat (JSON's leading whitespace) when one is due.
        if (absl::Now() >= *next_beat) {
          *next_beat = absl::Now() + absl::Seconds(kHeartbeatSeconds);
          if (!sink.write(" ", 1)) return false;
        }
        GenOutbox::Next m = outbox->Pull(*next_beat - absl::Now());
        if (!m.item.has_value() && !m.end.has_value()) return true;
        std::string body;
        if (!m.item.has_value()) {
          body = writer->BodyError(call->Named(*m.end));
        } else {
          writer->Add(*m.item);
          if (!m.item->last) return true;
          body = writer->Finish();
        }
        *done = true;
        if (!sink.write(body.data(), body.size())) return false;
        sink.done();
        return true;
      },
      [outbox, call, done](bool success) {
        OnLeft(outbox, call, success, *done);
      });
}

}  // namespace

std::string NamedEvent(const std::string& name, const Json& data) {
  return absl::StrCat("event: ", name, "\ndata: ",
                      data.dump(-1, ' ', false, Json::error_handler_t::replace),
                      "\n\n");
}

void RunGeneration(const HttpContext& ctx, std::shared_ptr<HttpCall> call,
                   GenerateInput in, std::shared_ptr<AnswerWriter> writer,
                   bool stream, httplib::Response& res) {
  auto outbox = std::make_shared<GenOutbox>();
  std::string model;
  absl::StatusOr<std::shared_ptr<RequestHandle>> handle =
      ctx.requests->Generate(
          std::move(in),
          [outbox](absl::StatusOr<GenerateOutput> m) {
            if (!m.ok()) {
              outbox->End(m.status());
              return;
            }
            const bool last = m->last;
            outbox->Push(*std::move(m));
            if (last) outbox->End(absl::OkStatus());
          },
          &model);
  call->set_model(model);
  if (!handle.ok()) {
    call->Fail(res, handle.status());
    return;
  }
  outbox->SetCancel([h = *handle] { h->Abort(); });
  writer->Start(model);
  if (stream) {
    Stream(res, call, outbox, writer);
  } else {
    Whole(res, call, outbox, writer);
  }
}

}  // namespace inferd::http
