#include "tools/cli.h"

#include <atomic>
#include <csignal>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace oneinfer::cli {

bool Args::Take(const std::string& name, std::string* value, const std::string& short_name) {
  for (size_t i = 0; i < items_.size(); ++i) {
    const std::string& a = items_[i];
    if (a == name || (!short_name.empty() && a == short_name)) {
      if (i + 1 >= items_.size()) {
        error_ = absl::StrCat(name, " needs a value");
        items_.erase(items_.begin() + static_cast<long>(i));
        return false;
      }
      *value = items_[i + 1];
      items_.erase(items_.begin() + static_cast<long>(i), items_.begin() + static_cast<long>(i) + 2);
      return true;
    }
    if (a.rfind(name + "=", 0) == 0) {
      *value = a.substr(name.size() + 1);
      items_.erase(items_.begin() + static_cast<long>(i));
      return true;
    }
  }
  return false;
}

bool Args::TakeFlag(const std::string& name, const std::string& short_name) {
  for (size_t i = 0; i < items_.size(); ++i) {
    if (items_[i] == name || (!short_name.empty() && items_[i] == short_name)) {
      items_.erase(items_.begin() + static_cast<long>(i));
      return true;
    }
  }
  return false;
}

absl::Status Args::Positionals(std::vector<std::string>* out) const {
  if (!error_.empty()) return absl::InvalidArgumentError(error_);
  for (const std::string& a : items_) {
    if (a.size() > 1 && a[0] == '-') return absl::InvalidArgumentError(absl::StrCat("unknown option ", a));
    out->push_back(a);
  }
  return absl::OkStatus();
}

namespace {
std::atomic<bool>* g_cancel = nullptr;  // the running command's RunOptions::cancel
std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) {
  // Only async-signal-safe work: two lock-free stores and restoring the default action.
  g_interrupted.store(true);
  if (g_cancel != nullptr) g_cancel->store(true);
  std::signal(SIGINT, SIG_DFL);
}
}  // namespace

absl::Status StopRunOnTimeoutOrInterrupt(const std::string& timeout, RunOptions* run) {
  if (!timeout.empty()) {
    char* end = nullptr;
    const double seconds = std::strtod(timeout.c_str(), &end);
    if (*end != '\0' || !(seconds > 0) || seconds > 1e9) {
      return absl::InvalidArgumentError(absl::StrCat("--timeout '", timeout, "' must be a positive number of seconds"));
    }
    run->SetTimeout(seconds);
  }
  g_cancel = &run->cancel;
  std::signal(SIGINT, OnInterrupt);
  return absl::OkStatus();
}

bool Interrupted() { return g_interrupted.load(); }

int FailRun(const absl::Status& s, const std::string& timeout) {
  if (Interrupted() && s.code() == absl::StatusCode::kCancelled) {
    Fail(absl::StrCat("interrupted (Ctrl-C): ", s.message()));
    return 130;
  }
  if (s.code() == absl::StatusCode::kDeadlineExceeded && !timeout.empty()) {
    return Fail(absl::StrCat("stopped after --timeout ", timeout, " s: ", s.message()));
  }
  return Fail(s);
}

absl::Status ParseMatMulFlag(const std::string& value, MatMulPrecision* out) {
  if (value.empty() || value == "float") *out = MatMulPrecision::kFloat32;
  else if (value == "int8") *out = MatMulPrecision::kInt8;
  else return absl::InvalidArgumentError(absl::StrCat("--matmul '", value, "' must be float or int8"));
  return absl::OkStatus();
}

}  // namespace oneinfer::cli
