// The oneshot pattern, for servers and models without tool calling: ask for a program in a
// fenced block, run it, answer with what it printed; when it fails, show the model the error
// once and run its corrected program.
#include "llm/fence.h"
#include "llm/session.h"
#include "llm/tools.h"

namespace codebox::llm {
namespace {

// One repair turn: enough to fix a typo or a missing import; more rarely converges without
// the structured feedback the tools loop gives.
constexpr int kRepairTurns = 1;

std::string RepairPrompt(const ExecResult& r, size_t cap) {
  std::string what = r.timed_out        ? "timed out"
                     : r.out_of_memory ? "ran out of memory"
                                       : "failed with exit code " + std::to_string(r.exit_code);
  std::string prompt = "The program " + what + ".\n";
  if (!r.stderr_data.empty()) prompt += "stderr:\n```\n" + CapText(r.stderr_data, cap) + "\n```\n";
  if (!r.stdout_data.empty()) prompt += "stdout:\n```\n" + CapText(r.stdout_data, cap) + "\n```\n";
  prompt += "Reply with the corrected complete program in one ```python block.";
  return prompt;
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
    ASSIGN_OR_RETURN(ExecResult result, s.RunCode(step, *code));
    if (result.ok() || attempt >= kRepairTurns) {
      Emit(s, result.stdout_data);
      t.answer = result.stdout_data;
      t.stop_reason = result.ok() ? "answer" : "code_failed";
      return Status::Ok();
    }
    s.Notice("the program failed; asking the model to repair it");
    t.messages.push_back({"user", RepairPrompt(result, s.options().tool_output_cap), {}, {}});
    Step probe;
    ASSIGN_OR_RETURN(ChatReply reply, s.Turn(probe, /*with_tools=*/false, /*stream_text=*/false));
    content = reply.message.content;
    latency = probe.model_latency;
  }
}

}  // namespace codebox::llm
