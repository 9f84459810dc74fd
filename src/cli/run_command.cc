// `codebox run` and `codebox exec`: one fresh box, one exec, the box's exit status; and
// `codebox run --session`: files as the cells of one code-interpreter session. The command
// line is parsed in run_flags.cc, --json's object made in run_json.cc.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/text.h"
#include "api/exec_result.h"
#include "cli/box_flags.h"
#include "cli/cell_output.h"
#include "cli/commands.h"
#include "cli/interactive_exec.h"
#include "cli/progress.h"
#include "cli/run_flags.h"
#include "cli/run_json.h"
#include "cli/run_network.h"
#include "codebox/box.h"
#include "remote/remote_box.h"
#include "remote/server_choice.h"

namespace codebox::cli {
namespace {

// How one run or exec ended: the status the process exits with, the program's result when
// it ran, and codebox's own error when there was one (printed once, where it happened).
struct Outcome {
  int status = 0;
  std::optional<ExecResult> result;
  Status error;
};

// The exit status of an error codebox met: 124 when the box's lifetime (or another deadline)
// ended it, else 125.
int ExitStatusOfError(const Status& st) {
  return st.code() == StatusCode::kDeadlineExceeded ? kExitTimedOut : kExitCodeboxError;
}

void Fail(const std::string& command, Status st, Outcome* outcome) {
  if (st.code() == StatusCode::kDeadlineExceeded &&
      st.message().find("lifetime") != std::string::npos) {
    st = Status(st.code(), st.message() + " (--box-timeout to change)");
  }
  PrintError(command, st);
  outcome->status = ExitStatusOfError(st);
  outcome->error = std::move(st);
}

// Makes the box (into *box, so that even a box whose set-up failed is reported and destroyed)
// and installs the --pip packages, copies the --copy-in files and writes the program file.
// false once the error is in *outcome (125, or 126 when the install failed).
bool StartBox(const std::string& command, Invocation& inv, std::unique_ptr<Box>* box,
              Outcome* outcome) {
  BoxStartNotice notice = AnnounceBoxStart(inv.box);  // a vm under emulation takes seconds
  auto made = Box::Create(inv.box);
  notice.Done();
  if (!made.ok()) {
    Fail(command, made.status(), outcome);
    return false;
  }
  *box = std::move(*made);
  if (int status = InstallFirst(command, box->get(), &inv.pip, inv.json); status != 0) {
    outcome->status = status;
    outcome->error =
        Status(StatusCode::kFailedPrecondition, "--pip: the install failed; the code did not run");
    return false;
  }
  for (const Copy& c : inv.copy_in) {
    if (Status st = (*box)->CopyIn(c.from, c.to); !st.ok()) {
      Fail(command, st, outcome);
      return false;
    }
  }
  // After the copies: the program that runs is the one named.
  if (inv.program_file) {
    const ProgramFile& file = *inv.program_file;
    if (Status st = (*box)->WriteFile(file.box_name, file.code); !st.ok()) {
      Fail(command, st.WithContext("write " + file.box_name + " into the box"), outcome);
      return false;
    }
  }
  return true;
}

// The --copy-out copies (when nothing failed before them), then the box's end. A failed copy
// makes the outcome codebox's error.
void FinishBox(const std::string& command, const Invocation& inv, Box* box, Outcome* outcome) {
  for (const Copy& c : outcome->error.ok() ? inv.copy_out : std::vector<Copy>{}) {
    if (Status st = box->CopyOut(c.from, c.to, inv.copy_out_options); !st.ok()) {
      Fail(command, st, outcome);
    }
  }
  if (Status st = box->Destroy(); !st.ok()) PrintError(command, st);
}

void WriteOut(FILE* stream, std::string_view data) {
  std::fwrite(data.data(), 1, data.size(), stream);
  std::fflush(stream);
}

// run --session: the files as cells of one kernel, stopping at the first that raises.
int RunCells(const std::string& command, Invocation& inv) {
  std::optional<std::string> images;  // the directory they go to
  if (!inv.out_dir.empty()) {
    if (Status st = base::MakeDirs(inv.out_dir); !st.ok()) {
      PrintError(command, st.WithContext("--out"));
      return kExitCodeboxError;
    }
    images = inv.out_dir;
  }
  Outcome outcome;
  std::unique_ptr<Box> box;
  if (!StartBox(command, inv, &box, &outcome)) {
    if (box != nullptr) FinishBox(command, inv, box.get(), &outcome);
    return outcome.status;
  }
  CellPrinter printer({[](std::string_view t) { WriteOut(stdout, t); },
                       [](std::string_view t) { WriteOut(stderr, t); }},
                      std::move(images));
  for (size_t i = 0; i < inv.cells.size(); ++i) {
    const Cell& cell = inv.cells[i];
    printer.Begin(static_cast<int>(i + 1));
    auto e = box->RunCode(cell.code, printer.Streaming());
    if (!e.ok()) {
      Fail(command, e.status().WithContext(cell.file), &outcome);
      break;
    }
    printer.End(
        *e, {.timeout = inv.box.exec_timeout, .output_limit_bytes = inv.box.output_limit_bytes});
    if (e->error) {
      const size_t left = inv.cells.size() - i - 1;
      std::fprintf(
          stderr, "codebox %s: %s (cell %zu of %zu) raised %s%s\n", command.c_str(),
          base::TerminalSafe(cell.file).c_str(), i + 1, inv.cells.size(),
          base::TerminalSafe(e->error->name, 200).c_str(),
          left == 0 ? "" : ("; the " + std::to_string(left) + " after it did not run").c_str());
      outcome.status = e->timed_out ? kExitTimedOut : 1;
      break;
    }
  }
  ReportNetwork(inv.box, *box);
  FinishBox(command, inv, box.get(), &outcome);
  return outcome.status;
}

// Says on stderr what ended the program when a limit did, so empty output is never a mystery
// (the output itself was streamed).
void ReportLimits(const Invocation& inv, const ExecResult& result) {
  if (result.timed_out) {
    std::fprintf(stderr, "codebox: timed out after %.1f s (--timeout to change)\n",
                 result.duration.count() / 1000.0);
  } else if (result.out_of_memory) {
    std::fprintf(stderr, "codebox: killed: out of memory (limit %llu MiB, --memory to change)\n",
                 static_cast<unsigned long long>(inv.box.memory_mib));
  }
  if (result.output_truncated) {
    std::fprintf(stderr, "codebox: output truncated at %llu bytes per stream\n",
                 static_cast<unsigned long long>(inv.box.output_limit_bytes));
  }
  // An image without Python (busybox, a Go binary's image): the agent could not start it.
  if (result.exit_code == 127 && !inv.argv.empty() && inv.argv[0] == "python3" &&
      result.stderr_data.find("exec python3:") != std::string::npos) {
    std::fprintf(stderr,
                 "codebox: image %s has no python3 on its PATH; run Python in an image that "
                 "has it, or commands with `codebox exec --image %s -- CMD`\n",
                 inv.box.image.c_str(), inv.box.image.c_str());
  }
}

// --json: the one object, printed last, so its exit_code is the status the process exits
// with whatever happened after the program (a failed --copy-out says so in "error").
void PrintOutcomeJson(const Invocation& inv, const Outcome& outcome, const Box* box) {
  nlohmann::json j = JsonOutcome(kRunJsonVersion, outcome.status, outcome.error);
  // The program's result in the API's one shape (api/exec_result.h); null when it never ran.
  j["result"] = outcome.result ? api::ExecResultToJson(*outcome.result) : nlohmann::json();
  AddNetworkJson(inv.box, box, inv.pip, &j);
  if (box != nullptr) j["user"] = box->info().user;  // who ran it (BoxInfo::user)
  PrintJson(j);
}

// Runs the one exec; *box is null for a one-shot run on a server, or when no box started.
Outcome RunOne(const std::string& command, Invocation& inv, std::unique_ptr<Box>* box) {
  Outcome outcome;
  ExecOptions exec;
  exec.stdin_data = inv.stdin_data;
  if (inv.program_file) exec.cwd = ".";  // the workdir, where the program file is
  if (!inv.json) {                       // stream as it comes; the result is not printed again
    exec.on_stdout = [](std::string_view d) { WriteOut(stdout, d); };
    exec.on_stderr = [](std::string_view d) { WriteOut(stderr, d); };
  }
  StatusOr<ExecResult> result = Status::Ok();
  // `run CODE` on a server with nothing to copy or install and no network: one request, a
  // warm pool box.
  if (command == "run" && !inv.box.server.empty() && !inv.program_file && inv.copy_in.empty() &&
      inv.copy_out.empty() && EffectiveNetwork(inv.box) == NetworkMode::kNone) {
    result = remote::RunOnServer(inv.box, inv.argv[2], exec);
  } else {
    if (!StartBox(command, inv, box, &outcome)) return outcome;
    result = (*box)->Exec(inv.argv, exec);
  }
  if (!result.ok()) {
    Fail(command, result.status(), &outcome);
    return outcome;
  }
  outcome.result = std::move(*result);
  outcome.status = ExitStatusOf(*outcome.result);
  if (!inv.json) {
    if (*box != nullptr) ReportNetwork(inv.box, **box);
    ReportLimits(inv, *outcome.result);
  }
  return outcome;
}

// exec -i / -t: the user talks to the program while it runs (interactive_exec.h).
int ExecuteInteractive(const std::string& command, Invocation& inv) {
  if (Status st = CheckInteractive(*inv.interactive); !st.ok()) {  // before a box starts
    PrintError(command, st);
    return kExitUsage;
  }
  Outcome outcome;
  std::unique_ptr<Box> box;
  if (StartBox(command, inv, &box, &outcome)) {
    outcome.status = RunInteractive(command, *box, inv.argv, *inv.interactive);
  }
  if (box != nullptr) FinishBox(command, inv, box.get(), &outcome);
  return outcome.status;
}

int Execute(const std::string& command, Invocation& inv) {
  if (!inv.cells.empty()) return RunCells(command, inv);
  if (inv.interactive) return ExecuteInteractive(command, inv);
  std::unique_ptr<Box> box;
  Outcome outcome = RunOne(command, inv, &box);
  if (box != nullptr) FinishBox(command, inv, box.get(), &outcome);
  if (inv.json) PrintOutcomeJson(inv, outcome, box.get());
  return outcome.status;
}

int Main(const std::string& command, const std::vector<std::string>& args, bool is_exec) {
  Invocation inv;
  auto parsed = ParseInvocation(args, is_exec, &inv);
  if (!parsed.ok()) {
    PrintError(command, parsed.status());
    return kExitUsage;
  }
  if (!*parsed) return 0;  // --help
  // A server has no route for an interactive exec yet: it runs here unless --server asks for
  // one (which then says it cannot).
  const bool here = inv.local || (inv.interactive && inv.box.server.empty());
  if (Status st = remote::ChooseServer(&inv.box, here); !st.ok()) {
    PrintError(command, st);
    return kExitCodeboxError;
  }
  return Execute(command, inv);
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) { return Main("run", args, false); }
int ExecCommand(const std::vector<std::string>& args) { return Main("exec", args, true); }

}  // namespace codebox::cli
