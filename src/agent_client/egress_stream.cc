// AgentClient::AcceptEgress and EgressStream: one connection a program in the box made to the
// agent's egress port, from the host's side (docs/protocol.md, "egress_accept"). The reader
// thread fills the stream's state and signals its eventfd; the box's bridge polls that, takes
// the data, acknowledges what it passed on and sends within the agent's window. The agent's
// side of the flow control is checked here: it is not trusted.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <string>
#include <variant>

#include "agent_client/agent_client.h"
#include "agent_client/agent_connection.h"
#include "base/io.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace codebox::protocol {

using msg::kEgressWindow;

struct EgressStream::Shared {
  std::mutex mu;  // guards everything below; never held while calling into the connection
  base::UniqueFd wake;
  bool connected = false;
  std::string data;  // the box's bytes not yet taken
  bool box_eof = false;
  uint64_t box_unacked = 0;   // the box's bytes received and not yet acknowledged (incl. data)
  uint64_t sent_unacked = 0;  // the host's bytes sent and not yet acknowledged by the agent
  bool eof_sent = false;
  bool closed = false;  // Close() was called
  bool ended = false;
  Status status;

  void Wake() {
    uint64_t one = 1;
    // Cannot fail short of a counter at 2^64-2, which Take's drain keeps from happening.
    (void)!::write(wake.get(), &one, sizeof one);
  }
  void Finish(const Status& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (!ended) {
      ended = true;
      status = why;
    }
    Wake();
  }
};

namespace {

Verdict EgressViolation(const std::string& what, uint32_t stream) {
  return {Verdict::kViolation,
          ProtocolError(Violation(what + " on egress stream " + std::to_string(stream)))};
}

FrameHandler EgressHandler(std::shared_ptr<EgressStream::Shared> shared) {
  return [shared](const Frame& frame, const msg::Event* event) -> Verdict {
    std::lock_guard<std::mutex> lock(shared->mu);
    if (event != nullptr) {
      if (std::holds_alternative<msg::Connected>(*event)) {
        if (shared->connected) return EgressViolation("second connected", frame.stream);
        shared->connected = true;
      } else if (const auto* ack = std::get_if<msg::Ack>(event)) {
        if (ack->bytes > shared->sent_unacked) {
          return EgressViolation("ack for " + std::to_string(ack->bytes) + " bytes, of " +
                                     std::to_string(shared->sent_unacked) +
                                     " sent and unacknowledged,",
                                 frame.stream);
        }
        shared->sent_unacked -= ack->bytes;
      } else if (std::holds_alternative<msg::Done>(*event)) {
        shared->ended = true;
        shared->Wake();
        return Done();
      } else {
        return Unexpected(frame, event, "egress_accept");
      }
      shared->Wake();
      return Continue();
    }
    if (frame.type != FrameType::kData) return Unexpected(frame, event, "egress_accept");
    if (!shared->connected) return EgressViolation("data before connected", frame.stream);
    if (shared->box_eof) return EgressViolation("data after the end of its data", frame.stream);
    if (frame.payload.empty()) {
      shared->box_eof = true;
    } else {
      if (frame.payload.size() > kEgressWindow - shared->box_unacked) {
        return EgressViolation("data past the window of " + std::to_string(kEgressWindow) +
                                   " unacknowledged bytes (" +
                                   std::to_string(shared->box_unacked + frame.payload.size()) + ")",
                               frame.stream);
      }
      shared->box_unacked += frame.payload.size();
      shared->data.append(frame.payload);
    }
    shared->Wake();
    return Continue();
  };
}

}  // namespace

StatusOr<std::unique_ptr<EgressStream>> AgentClient::AcceptEgress() {
  auto shared = std::make_shared<EgressStream::Shared>();
  shared->wake.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!shared->wake.valid()) return base::ErrnoStatus("egress_accept: eventfd");
  uint32_t stream = impl_->NewStream();
  auto pending = impl_->Register(stream, EgressHandler(shared),
                                 [shared](const Status& why) { shared->Finish(why); });
  if (!pending.ok()) return pending.status().WithContext("egress_accept");
  // From here the handle owns the stream: a failure below abandons it in its destructor.
  std::unique_ptr<EgressStream> handle(new EgressStream(impl_.get(), stream, shared));
  Status st = impl_->Send(FrameType::kControl, stream, msg::EncodeRequest(msg::EgressAccept{}));
  if (!st.ok()) return st.WithContext("egress_accept");
  return handle;
}

EgressStream::EgressStream(AgentClient::Impl* client, uint32_t stream,
                           std::shared_ptr<Shared> shared)
    : client_(client), stream_(stream), shared_(std::move(shared)) {}

EgressStream::~EgressStream() { Close(); }

int EgressStream::wake_fd() const { return shared_->wake.get(); }

EgressStream::State EgressStream::Take() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  uint64_t count;
  while (::read(shared_->wake.get(), &count, sizeof count) < 0 && errno == EINTR) {
  }
  State state;
  state.connected = shared_->connected;
  state.data = std::move(shared_->data);
  shared_->data.clear();
  state.box_eof = shared_->box_eof;
  const bool can_send =
      shared_->connected && !shared_->eof_sent && !shared_->ended && !shared_->closed;
  state.send_credit = can_send ? kEgressWindow - shared_->sent_unacked : 0;
  state.ended = shared_->ended;
  state.status = shared_->status;
  return state;
}

Status EgressStream::Ack(uint64_t bytes) {
  const std::string where = "egress stream " + std::to_string(stream_);
  if (bytes == 0 || bytes > kEgressWindow) {
    return InvalidArgument(where + ": ack of " + std::to_string(bytes) + " bytes; 1.." +
                           std::to_string(kEgressWindow) + " at a time");
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    // The agent has dropped the stream: nothing is waiting for the credit.
    if (shared_->ended || shared_->closed) return Status::Ok();
    const uint64_t taken = shared_->box_unacked - shared_->data.size();
    if (bytes > taken) {
      return InvalidArgument(where + ": ack of " + std::to_string(bytes) + " bytes, but only " +
                             std::to_string(taken) + " were taken and not yet acknowledged");
    }
    shared_->box_unacked -= bytes;
  }
  return client_->Send(FrameType::kControl, stream_, msg::EncodeRequest(msg::EgressAck{bytes}))
      .WithContext(where);
}

namespace {

// Why nothing may be sent on the stream now, or OK.
Status CheckSendable(const EgressStream::Shared& s, const std::string& where) {
  if (s.closed) return FailedPrecondition(where + " was closed by the host");
  if (s.ended) return s.status.ok() ? FailedPrecondition(where + " has ended") : s.status;
  if (!s.connected) return FailedPrecondition(where + " has no connection yet");
  if (s.eof_sent) return FailedPrecondition(where + ": the host already ended its sending");
  return Status::Ok();
}

}  // namespace

Status EgressStream::Send(std::string_view data) {
  if (data.empty()) return Status::Ok();  // an empty frame would end the host's sending
  const std::string where = "egress stream " + std::to_string(stream_);
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    RETURN_IF_ERROR(CheckSendable(*shared_, where));
    const uint64_t credit = kEgressWindow - shared_->sent_unacked;
    if (data.size() > credit) {
      return InvalidArgument(where + ": " + std::to_string(data.size()) +
                             " bytes to send, over the credit of " + std::to_string(credit));
    }
    // Counted before sending, so the agent's ack can never be ahead of the count.
    shared_->sent_unacked += data.size();
  }
  for (size_t off = 0; off < data.size(); off += kDataChunk) {
    RETURN_IF_ERROR(
        client_->Send(FrameType::kData, stream_, data.substr(off, kDataChunk)).WithContext(where));
  }
  return Status::Ok();
}

Status EgressStream::SendEof() {
  const std::string where = "egress stream " + std::to_string(stream_);
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    RETURN_IF_ERROR(CheckSendable(*shared_, where));
    shared_->eof_sent = true;
  }
  return client_->Send(FrameType::kData, stream_, {}).WithContext(where);
}

void EgressStream::Close() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->closed) return;
    shared_->closed = true;
    if (shared_->ended) return;  // done, error or the connection's end: nothing to cancel
    shared_->ended = true;
    shared_->status =
        FailedPrecondition("egress stream " + std::to_string(stream_) + " was closed by the host");
  }
  // Drops the stream's late frames and cancels it in the agent (a reset for the program).
  client_->Abandon(stream_);
}

}  // namespace codebox::protocol
