// The oneshot pattern, for servers and models without tool calling: ask for a program in a
// fenced block, run it as a cell, answer with what it printed (and its last expression's
// value); when it fails, show the model the error once and run its corrected program.
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

Status RunOneShot(Session& s, const TurnReply* first_reply, const Step* first_step) {
  Transcript& t = s.transcript();
  t.mode = "oneshot";
  // A oneshot reply is code, which is not the answer: its text is never streamed to on_text
  // (but for the first reply in auto mode, whose text before the code was).
  TurnReply reply;
  Step turn_step;
  if (first_reply != nullptr) {
    reply = *first_reply;
    if (first_step != nullptr) turn_step = *first_step;
  } else {
    ASSIGN_OR_RETURN(reply, s.Turn(turn_step, /*with_tools=*/false, /*stream_text=*/false));
  }
  for (int attempt = 0;; ++attempt) {
    std::optional<std::string> code = ProgramOf(reply.turn);
    Step& step = s.NewStep(attempt == 0 ? "oneshot" : "repair");
    step.model_latency = turn_step.model_latency;
    step.thinking = turn_step.thinking;
    if (!code) {
      // The model answered in prose; that is its answer.
      step.kind = "answer";
      if (reply.turn.text.empty()) {
        s.NoAnswer(reply, step);
        return Status::Ok();
      }
      t.answer = reply.turn.text;
      t.stop_reason = "answer";
      s.ShowAnswer(reply);
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(Execution cell, s.RunCode(step, *code));
    const bool ok = !cell.error && !cell.timed_out && !cell.kernel_restarted;
    if (ok || attempt >= kRepairTurns) {
      t.answer = Answer(cell);
      Emit(s, t.answer);
      t.stop_reason = ok ? "answer" : "code_failed";
      if (!ok) t.stop_detail = "the program still failed after a repair turn";
      if (ok && t.answer.empty() && step.images.empty()) {
        // Nothing to show is no answer: say so rather than end in silence.
        t.stop_reason = "no_answer";
        t.stop_detail = "the model's program ran without error but printed nothing";
      }
      return Status::Ok();
    }
    s.Notice("the program failed; asking the model to repair it");
    t.messages.push_back({"user", RepairPrompt(cell, s.options().tool_output_cap), {}, {}, {}});
    turn_step = Step{};
    ASSIGN_OR_RETURN(reply, s.Turn(turn_step, /*with_tools=*/false, /*stream_text=*/false));
  }
}

}  // namespace codebox::llm
