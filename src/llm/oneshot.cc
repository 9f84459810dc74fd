// The oneshot pattern, for servers and models without tool calling: ask for a program in a
// fenced block, run it as a cell, answer with what it printed (and its last expression's
// value); when it fails, show the model the error once and run its corrected program.
#include "llm/fence.h"
#include "llm/session.h"
#include "llm/tools.h"

namespace codebox::llm {
namespace {

// One repair turn: enough to fix a typo or a missing import; more rarely converges without
// the structured feedback the tools loop gives.
constexpr int kRepairTurns = 1;

std::string RepairPrompt(const Execution& cell, size_t cap) {
  std::string what = cell.kernel_restarted ? "failed, and its Python session was restarted"
                     : cell.timed_out      ? "timed out"
                                           : "raised an exception";
  std::string prompt = "The program " + what + ".\n";
  if (cell.error) {
    prompt += "error: " + CapText(cell.error->name + ": " + cell.error->value, cap) + "\n";
    if (!cell.error->traceback.empty()) {
      prompt += "traceback:\n```\n" + CapText(cell.error->traceback, cap) + "\n```\n";
    }
  }
  std::string err = JoinChunks(cell.stderr_chunks);
  std::string out = JoinChunks(cell.stdout_chunks);
  if (!err.empty()) prompt += "stderr:\n```\n" + CapText(err, cap) + "\n```\n";
  if (!out.empty()) prompt += "stdout:\n```\n" + CapText(out, cap) + "\n```\n";
  prompt += "Reply with the corrected complete program in one ```python block.";
  return prompt;
}

// What a oneshot program answers: what it printed, then the value of its last expression.
std::string Answer(const Execution& cell) {
  std::string answer = JoinChunks(cell.stdout_chunks);
  std::string value = cell.text();
  if (!value.empty()) {
    if (!answer.empty() && answer.back() != '\n') answer += '\n';
    answer += value + "\n";
  }
  return answer;
}

void Emit(const Session& s, const std::string& text) {
  if (s.options().on_text && !text.empty()) s.options().on_text(text);
}

}  // namespace

Status RunOneShot(Session& s, const ChatReply* first_reply, std::chrono::milliseconds first_latency) {
  Transcript& t = s.transcript();
  t.mode = "oneshot";
  // Text streamed already (auto mode) must not be shown twice; a oneshot reply is code, which
  // is not the answer, so it is never streamed to on_text.
  std::string content;
  std::chrono::milliseconds latency = first_latency;
  if (first_reply != nullptr) {
    content = first_reply->message.content;
  } else {
    Step probe;
    ASSIGN_OR_RETURN(ChatReply reply, s.Turn(probe, /*with_tools=*/false, /*stream_text=*/false));
    content = reply.message.content;
    latency = probe.model_latency;
  }
  for (int attempt = 0;; ++attempt) {
    std::optional<std::string> code = ExtractFencedCode(content);
    Step& step = s.NewStep(attempt == 0 ? "oneshot" : "repair");
    step.model_latency = latency;
    if (!code) {
      // The model answered in prose; that is its answer.
      step.kind = "answer";
      if (first_reply == nullptr || attempt > 0) Emit(s, content);
      t.answer = content;
      t.stop_reason = "answer";
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(Execution cell, s.RunCode(step, *code));
    const bool ok = !cell.error && !cell.timed_out && !cell.kernel_restarted;
    if (ok || attempt >= kRepairTurns) {
      t.answer = Answer(cell);
      Emit(s, t.answer);
      t.stop_reason = ok ? "answer" : "code_failed";
      return Status::Ok();
    }
    s.Notice("the program failed; asking the model to repair it");
    t.messages.push_back({"user", RepairPrompt(cell, s.options().tool_output_cap), {}, {}});
    Step probe;
    ASSIGN_OR_RETURN(ChatReply reply, s.Turn(probe, /*with_tools=*/false, /*stream_text=*/false));
    content = reply.message.content;
    latency = probe.model_latency;
  }
}

}  // namespace codebox::llm
