// One conversation in progress: the client, the runner (one box), and the transcript they
// fill. Internal to the interpreter; the tools loop (interpreter.cc) and the oneshot pattern
// (oneshot.cc) are written in terms of its verbs.
#ifndef CODEBOX_LLM_SESSION_H_
#define CODEBOX_LLM_SESSION_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llm/client.h"
#include "llm/interpreter.h"
#include "llm/model_reply.h"

namespace codebox::llm {

// A model turn, read.
struct TurnReply {
  ModelTurn turn;
  std::string finish_reason;
  std::string shown;  // the answer text on_text got while it streamed
};

class Session {
 public:
  Session(const InterpreterOptions& options, Transcript& transcript);

  // Creates the box and copies the input files in.
  Status Open();
  // Copies what the code left in the box workdir to options.output_dir (if set), but for
  // names this conversation saved images under.
  Status CopyOutputs();

  Step& NewStep(std::string kind);
  // One model turn over transcript.messages, read whatever its shape (model_reply.h); the
  // reply goes into them as the assistant message the server expects back (thinking dropped,
  // calls as tool_calls with unique ids). Its answer text goes to on_text as it streams when
  // stream_text is set, its thinking to on_thinking; step gets the latency and the thinking.
  StatusOr<TurnReply> Turn(Step& step, bool with_tools, bool stream_text);
  // Gives on_text the part of a turn's answer it has not had yet (all of it when the server
  // did not stream, or the text came after a held-back marker).
  void ShowAnswer(const TurnReply& reply) const;
  // Ends the conversation with no answer: the model's reply held nothing to use.
  void NoAnswer(const TurnReply& reply, Step& step);
  // Runs code as a cell of the box's session, saves its images and records both in step.
  // Errors only when the box cannot run cells; an exception in the cell is a result.
  StatusOr<Execution> RunCode(Step& step, const std::string& code);

  void Notice(std::string_view text) const;
  // Text about the input and output files, for system prompts.
  std::string FilesNote() const;

  const InterpreterOptions& options() const { return options_; }
  Transcript& transcript() { return transcript_; }
  const ChatClient& client() const { return client_; }

 private:
  const InterpreterOptions& options_;
  Transcript& transcript_;
  ChatClient client_;
  std::unique_ptr<CodeRunner> runner_;
  cell_images::ImageSaver images_;
  std::vector<std::string> box_inputs_;  // /data/... paths
  int next_call_id_ = 1;
  std::string NewCallId();
};

// The two ways of running a conversation; each leaves transcript.answer and stop_reason set.
// RunToolsLoop returns true when auto mode should switch to oneshot from scratch (the server
// rejected tools).
StatusOr<bool> RunToolsLoop(Session& session);
// first_reply: the model's reply to the task when it came from the tools loop (auto mode:
// a fenced block instead of a tool call), already in the transcript, and first_step its turn's
// latency and thinking; null to ask for one.
Status RunOneShot(Session& session, const TurnReply* first_reply, const Step* first_step = nullptr);

std::string ToolsSystemPrompt(const Session& session);
// What the system prompts say of the sandbox's network: " without network access", or which
// hosts it reaches through the proxy (and that pip works when the package index is allowed).
std::string NetworkNote(const BoxOptions& box);
std::string OneShotSystemPrompt(const Session& session);

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_SESSION_H_
