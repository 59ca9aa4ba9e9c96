// Stopping a run: RunOptions' cancel flag (set from another thread) and deadline stop loops
// whose trip counts come from data (a Loop of 2^62 trips, RoiAlign's sampling grid) with
// Cancelled / DeadlineExceeded naming the node; `oneinfer exec --timeout` and Ctrl-C stop the
// command with one error line (exit 1 and 130).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "oneinfer/session.h"
#include "tests/crafted_models.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;
namespace fs = std::filesystem;

constexpr int64_t k2p62 = int64_t{1} << 62;

std::unique_ptr<Session> LoadModel(const std::string& tag, const onnx::ModelProto& m) {
  const fs::path p = TempDir("cancel_" + tag) / "m.onnx";
  WriteModel(m, p);
  auto s = Session::Load(p.string());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

TEST(Cancel, DeadlineStopsALoopOf2p62Trips) {
  for (bool empty_body : {false, true}) {  // an empty body has no node for the plan to check before
    SCOPED_TRACE(empty_body ? "empty body" : "Identity body");
    auto s = LoadModel("deadline", EndlessLoopModel(k2p62, empty_body));
    ASSERT_NE(s, nullptr);
    RunOptions run;
    run.SetTimeout(0.2);
    auto r = s->Run({}, {}, run);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    EXPECT_NE(r.status().message().find("Loop 'endless'"), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("passed its deadline"), std::string::npos) << r.status();
  }
}

TEST(Cancel, FlagSetFromAnotherThread) {
  auto s = LoadModel("thread", EndlessLoopModel(k2p62));
  ASSERT_NE(s, nullptr);
  RunOptions run;
  std::thread canceller([&run] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    run.cancel = true;
  });
  auto r = s->Run({}, {}, run);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_NE(r.status().message().find("Loop 'endless'"), std::string::npos) << r.status();
  // The session is unharmed: a finite loop runs to its end on it afterwards.
  auto finite = LoadModel("finite", EndlessLoopModel(1000));
  ASSERT_NE(finite, nullptr);
  RunOptions none;
  auto ok = finite->Run({}, {}, none);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].data<float>()[0], 1.f);
  ASSERT_TRUE(finite->Run({}).ok());  // the overload without RunOptions
}

TEST(Cancel, AlreadyCancelledOrPastDeadlineRunsNothing) {
  auto s = LoadModel("before", EndlessLoopModel(3));
  ASSERT_NE(s, nullptr);
  RunOptions cancelled;
  cancelled.cancel = true;
  EXPECT_EQ(s->Run({}, {}, cancelled).status().code(), absl::StatusCode::kCancelled);
  RunOptions late;
  late.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  EXPECT_EQ(s->Run({}, {}, late).status().code(), absl::StatusCode::kDeadlineExceeded);
}

// RoiAlign with sampling_ratio 2^20: 2^40 points per bin, all inside the image.
TEST(Cancel, DeadlineStopsRoiAlignSampling) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_initializer() = FloatTensor("x", {1, 1, 4, 4}, std::vector<float>(16, 1.f));
  *g->add_initializer() = FloatTensor("rois", {1, 4}, {0.f, 0.f, 3.f, 3.f});
  *g->add_initializer() = Int64Tensor("batch", {1}, {0});
  onnx::NodeProto n = MakeNode("RoiAlign", {"x", "rois", "batch"}, {"y"}, "roi");
  AddIntAttr(&n, "sampling_ratio", int64_t{1} << 20);
  *g->add_node() = n;
  *g->add_output() = AnyShape("y", onnx::TensorProto::FLOAT);
  SessionOptions opts;
  opts.constant_folding = false;  // folding would run the node at load, with no deadline
  const fs::path p = TempDir("cancel_roi") / "m.onnx";
  WriteModel(m, p);
  auto s = Session::Load(p.string(), opts);
  ASSERT_TRUE(s.ok()) << s.status();
  RunOptions run;
  run.SetTimeout(0.2);
  auto r = (*s)->Run({}, {}, run);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("RoiAlign 'roi'"), std::string::npos) << r.status();
}

fs::path WriteEndless(const std::string& tag) {
  const fs::path p = TempDir("cancel_cli_" + tag) / "m.onnx";
  WriteModel(EndlessLoopModel(k2p62), p);
  return p;
}

TEST(Cancel, ExecTimeout) {
  const fs::path p = WriteEndless("timeout");
  const CliResult r = ExecModel(p, "--timeout 0.3");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(CountOccurrences(r.out, "oneinfer: error:"), 1) << r.out;
  EXPECT_NE(r.out.find("oneinfer: error: stopped after --timeout 0.3 s: Loop 'endless'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the run passed its deadline"), std::string::npos) << r.out;
  for (const char* bad : {"abc", "0", "-1", "nan"}) {
    const CliResult b = ExecModel(p, std::string("--timeout ") + bad);
    EXPECT_EQ(b.code, 1) << b.out;
    EXPECT_NE(b.out.find("must be a positive number of seconds"), std::string::npos) << b.out;
  }
}

// True once `pid` catches SIGINT (bit 2 of SigCgt in /proc/PID/status): its handler is installed.
bool CatchesSigint(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGINT - 1)) & 1;
  }
  return false;
}

TEST(Cancel, CtrlCStopsExec) {
  const fs::path p = WriteEndless("sigint");
  const fs::path dir = p.parent_path();
  fs::create_directories(dir / "in");
  const std::string log = (dir / "log.txt").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    const std::string cli = CliPath(), model = p.string(), in = (dir / "in").string(), out = (dir / "out").string();
    // --timeout is the safety net should the signal be lost; the run must end by the signal.
    execl(cli.c_str(), cli.c_str(), "exec", model.c_str(), "--input-dir", in.c_str(), "--output-dir", out.c_str(),
          "--timeout", "120", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  bool exited = false;
  while (!CatchesSigint(pid)) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(exited) << "oneinfer exited before the signal";
  kill(pid, SIGINT);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::ifstream f(log);
  std::stringstream text;
  text << f.rdbuf();
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << ": " << text.str();
  EXPECT_EQ(WEXITSTATUS(status), 130) << text.str();
  EXPECT_EQ(CountOccurrences(text.str(), "oneinfer: error:"), 1) << text.str();
  EXPECT_NE(text.str().find("oneinfer: error: interrupted (Ctrl-C): Loop 'endless'"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("the run was cancelled"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace oneinfer
