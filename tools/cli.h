// Shared helpers for the `oneinfer` subcommands.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "oneinfer/session.h"

namespace oneinfer::cli {

// Prints one clear error line and returns the exit code for failures.
inline int Fail(const std::string& message) {
  std::cerr << "oneinfer: error: " << message << "\n";
  return 1;
}
inline int Fail(const absl::Status& s) { return Fail(std::string(s.message())); }

// Minimal flag parser: --name value, --name=value, and boolean --name.
class Args {
 public:
  Args(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) items_.emplace_back(argv[i]);
  }
  // Removes and returns the value of --name (or -short); empty if absent.
  bool Take(const std::string& name, std::string* value, const std::string& short_name = "");
  bool TakeFlag(const std::string& name, const std::string& short_name = "");
  // Positional arguments left; anything starting with '-' left over is an error.
  absl::Status Positionals(std::vector<std::string>* out) const;
  bool error() const { return !error_.empty(); }
  const std::string& error_message() const { return error_; }

 private:
  std::vector<std::string> items_;
  std::string error_;
};

// --timeout SECONDS and Ctrl-C for one run: `timeout` (empty: none) sets run->deadline, and
// SIGINT sets run->cancel from then on (the handler then restores the default, so a second
// Ctrl-C kills a kernel that does not check). An unparsable or non-positive timeout is an error.
absl::Status StopRunOnTimeoutOrInterrupt(const std::string& timeout, RunOptions* run);
// True once Ctrl-C has cancelled the run.
bool Interrupted();
// The one error line for a failed run; the exit code is 130 (128 + SIGINT, what shells report
// for a command Ctrl-C ended, so scripts can tell it from a failure) after Ctrl-C, else 1.
int FailRun(const absl::Status& s, const std::string& timeout);

// --matmul float|int8 -> precision; an unknown value is an error naming it.
absl::Status ParseMatMulFlag(const std::string& value, MatMulPrecision* out);

int CmdExec(int argc, char** argv);
int CmdInspect(int argc, char** argv);
int CmdExportQwen3(int argc, char** argv);
int CmdTokenize(int argc, char** argv);
int CmdRun(int argc, char** argv);
int CmdQuantize(int argc, char** argv);
int CmdBench(int argc, char** argv);
int CmdServe(int argc, char** argv);

}  // namespace oneinfer::cli
