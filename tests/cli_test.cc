// The `oneinfer` command: real runs and bad input, each a clear error line and a non-zero exit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;
namespace fs = std::filesystem;

TEST(Cli, BinaryExists) { ASSERT_TRUE(fs::exists(CliPath())) << CliPath(); }

TEST(Cli, HelpOnEverySubcommand) {
  for (const char* sub : {"exec", "inspect", "bench"}) {
    CliResult r = RunCli(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("usage: oneinfer"), std::string::npos) << r.out;
  }
  EXPECT_EQ(RunCli("--help").code, 0);
  EXPECT_EQ(RunCli("--version").code, 0);
}

TEST(Cli, UnknownCommandAndOption) {
  CliResult r = RunCli("frobnicate");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("unknown command 'frobnicate'"), std::string::npos);
  r = RunCli("inspect --bogus x.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("unknown option --bogus"), std::string::npos) << r.out;
}

TEST(Cli, TruncatedModelIsOneClearError) {
  fs::path dir = TempDir("cli_trunc");
  onnx::ModelProto m = MakeModel();
  *m.mutable_graph()->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {2});
  *m.mutable_graph()->add_output() = TensorInfo("x", onnx::TensorProto::FLOAT, {2});
  std::string bytes = m.SerializeAsString();
  {
    std::ofstream f(dir / "m.onnx", std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 7));
  }
  for (const std::string& cmd : {"inspect " + (dir / "m.onnx").string(),
                                 "exec " + (dir / "m.onnx").string() + " --input-dir " + dir.string() +
                                     " --output-dir " + (dir / "o").string()}) {
    CliResult r = RunCli(cmd);
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("oneinfer: error: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("truncated or malformed"), std::string::npos) << r.out;
  }
  fs::remove_all(dir);
}

TEST(Cli, ExecRunsAConformanceCaseAndWritesNamedOutputs) {
  const fs::path test = "/usr/share/libonnx-testdata/data/node/test_relu";
  ASSERT_TRUE(fs::exists(test / "model.onnx"));
  fs::path out = TempDir("cli_exec");
  CliResult r = RunCli("exec " + (test / "model.onnx").string() + " --input-dir " + (test / "test_data_set_0").string() +
                    " --output-dir " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream got_f(out / "output_0.pb", std::ios::binary), want_f(test / "test_data_set_0" / "output_0.pb", std::ios::binary);
  std::stringstream got, want;
  got << got_f.rdbuf();
  want << want_f.rdbuf();
  onnx::TensorProto g, w;
  ASSERT_TRUE(g.ParseFromString(got.str()));
  ASSERT_TRUE(w.ParseFromString(want.str()));
  EXPECT_EQ(g.name(), "y");
  EXPECT_EQ(g.raw_data(), w.raw_data());
  fs::remove_all(out);
}

TEST(Cli, ExecWithWrongDtypeNamesTheInput) {
  fs::path dir = TempDir("cli_dtype");
  fs::create_directories(dir / "in");
  onnx::TensorProto t;
  t.set_name("x");
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(3);
  t.add_dims(4);
  t.add_dims(5);
  for (int i = 0; i < 60; ++i) t.add_int64_data(i);
  {
    std::ofstream f(dir / "in" / "input_0.pb", std::ios::binary);
    t.SerializeToOstream(&f);
  }
  CliResult r = RunCli("exec /usr/share/libonnx-testdata/data/node/test_relu/model.onnx --input-dir " +
                    (dir / "in").string() + " --output-dir " + (dir / "o").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("input 'x' must be float32"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(Cli, BadMatMulPrecisionIsNamed) {
  const std::string model = " /usr/share/libonnx-testdata/data/node/test_relu/model.onnx --matmul fp16";
  for (const std::string cmd : {"inspect" + model, "exec" + model + " --input-dir /tmp --output-dir /tmp/o",
                                "run" + model + " --prompt-ids 1"}) {
    CliResult r = RunCli(cmd);
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("--matmul 'fp16' must be float or int8"), std::string::npos) << cmd << "\n" << r.out;
  }
}

TEST(Cli, MissingInputFolder) {
  CliResult r = RunCli("exec /usr/share/libonnx-testdata/data/node/test_relu/model.onnx --input-dir /nonexistent --output-dir /tmp/x");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("'/nonexistent' does not exist"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace oneinfer
