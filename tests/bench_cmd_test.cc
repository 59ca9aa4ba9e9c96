// `oneinfer bench`: made-up and read inputs, --dim on a symbolic dim, the --json report, and
// every bad input as one error line with exit 1. No assertion on a latency's size.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/crafted_models.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;
namespace fs = std::filesystem;
using json = nlohmann::json;

// y = x @ W (x float32 [N, 4]), z = Gather(table [10, 2], idx) (idx int64 [N]: any index past 9
// fails the run, so made-up integers must stay in 0..9), nb = Not(b) (b bool [N]).
onnx::ModelProto BenchModel() {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {-1, 4});
  *g->add_input() = TensorInfo("idx", onnx::TensorProto::INT64, {-1});
  *g->add_input() = TensorInfo("b", onnx::TensorProto::BOOL, {-1});
  std::vector<float> w(12), table(20);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  *g->add_initializer() = FloatTensor("W", {4, 3}, w);
  *g->add_initializer() = FloatTensor("table", {10, 2}, table);
  *g->add_node() = MakeNode("MatMul", {"x", "W"}, {"y"});
  *g->add_node() = MakeNode("Gather", {"table", "idx"}, {"z"});
  *g->add_node() = MakeNode("Not", {"b"}, {"nb"});
  *g->add_output() = AnyShape("y", onnx::TensorProto::FLOAT);
  *g->add_output() = AnyShape("z", onnx::TensorProto::FLOAT);
  *g->add_output() = AnyShape("nb", onnx::TensorProto::BOOL);
  return m;
}

class Bench : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("bench_cmd");
    model_ = (dir_ / "m.onnx").string();
    WriteModel(BenchModel(), model_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteTensor(const fs::path& p, const onnx::TensorProto& t) {
    std::ofstream f(p, std::ios::binary);
    t.SerializeToOstream(&f);
  }
  // input_0..2.pb for the model, with n rows.
  fs::path WriteInputs(const std::string& sub, int64_t n) {
    const fs::path in = dir_ / sub;
    fs::create_directories(in);
    WriteTensor(in / "input_0.pb", FloatTensor("x", {n, 4}, std::vector<float>(static_cast<size_t>(n * 4), 0.5f)));
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < n; ++i) idx.push_back(i % 10);
    WriteTensor(in / "input_1.pb", Int64Tensor("idx", {n}, idx));
    onnx::TensorProto b;
    b.set_name("b");
    b.set_data_type(onnx::TensorProto::BOOL);
    b.add_dims(n);
    for (int64_t i = 0; i < n; ++i) b.add_int32_data(static_cast<int32_t>(i % 2));
    WriteTensor(in / "input_2.pb", b);
    return in;
  }
  // Runs a command that must fail: exit 1 and exactly one "oneinfer: error: " line holding `want`.
  void ExpectOneError(const std::string& args, const std::string& want) {
    CliResult r = RunCli(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("oneinfer: error: ", 0), 0u) << args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << args << "\nwant: " << want << "\ngot: " << r.out;
  }
  static json ParseJson(const CliResult& r) {
    json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_object()) << r.out;
    return j;
  }
  // The timed runs' summary agrees with runs_ms: its length, min, max and the order of the stats.
  static void ExpectConsistentStats(const json& j, size_t runs) {
    ASSERT_TRUE(j["runs_ms"].is_array()) << j.dump();
    const std::vector<double> ms = j["runs_ms"].get<std::vector<double>>();
    ASSERT_EQ(ms.size(), runs) << j.dump();
    for (double v : ms) EXPECT_GE(v, 0) << j.dump();
    EXPECT_EQ(j["min_ms"].get<double>(), *std::min_element(ms.begin(), ms.end())) << j.dump();
    EXPECT_EQ(j["max_ms"].get<double>(), *std::max_element(ms.begin(), ms.end())) << j.dump();
    EXPECT_LE(j["min_ms"].get<double>(), j["median_ms"].get<double>()) << j.dump();
    EXPECT_LE(j["median_ms"].get<double>(), j["p90_ms"].get<double>()) << j.dump();
    EXPECT_LE(j["p90_ms"].get<double>(), j["max_ms"].get<double>()) << j.dump();
  }

  fs::path dir_;
  std::string model_;
};

TEST_F(Bench, HelpListsIt) {
  CliResult r = RunCli("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("  bench MODEL.onnx"), std::string::npos) << r.out;
  r = RunCli("bench --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: oneinfer bench MODEL.onnx"), std::string::npos) << r.out;
  for (const char* flag : {"--input-dir", "--dim", "--runs", "--warmup", "--threads", "--matmul", "--json"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

TEST_F(Bench, MadeUpInputsWithDimAndJson) {
  CliResult r = RunCli("bench " + model_ + " --dim N=7 --runs 4 --threads 1 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  json j = ParseJson(r);
  ExpectConsistentStats(j, 4);
  EXPECT_EQ(j["model"], model_);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["matmul"], "float");
  EXPECT_EQ(j["warmup"], 1);
  EXPECT_GE(j["load_ms"].get<double>(), 0);
  EXPECT_GE(j["first_run_ms"].get<double>(), 0);
  EXPECT_GT(j["peak_rss_mb"].get<double>(), 0);  // Linux has VmHWM
  ASSERT_EQ(j["inputs"].size(), 3u) << j.dump();
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["dtype"], "float32");
  EXPECT_EQ(j["inputs"][0]["shape"], "[7, 4]");
  EXPECT_EQ(j["inputs"][1]["dtype"], "int64");
  EXPECT_EQ(j["inputs"][1]["shape"], "[7]");
  EXPECT_EQ(j["inputs"][2]["dtype"], "bool");
  EXPECT_EQ(j["inputs"][2]["shape"], "[7]");
  EXPECT_EQ(j["inputs"][0]["source"], "random");
}

TEST_F(Bench, SymbolicDimWithoutDimIsOne) {
  CliResult r = RunCli("bench " + model_ + " --runs 2 --json --matmul int8");
  ASSERT_EQ(r.code, 0) << r.out;
  json j = ParseJson(r);
  ExpectConsistentStats(j, 2);
  EXPECT_EQ(j["matmul"], "int8");
  EXPECT_EQ(j["inputs"][0]["shape"], "[1, 4]");
}

// A large --dim gives the index input many made-up values: all must be valid Gather indices.
TEST_F(Bench, MadeUpIntegersStayInRange) {
  CliResult r = RunCli("bench " + model_ + " --dim N=5000 --runs 1 --warmup 0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("input 'idx': int64 [5000] (random)"), std::string::npos) << r.out;
}

TEST_F(Bench, TextReport) {
  CliResult r = RunCli("bench " + model_ + " --dim N=3 --runs 3");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* want : {"input 'x': float32 [3, 4] (random)", "input 'b': bool [3] (random)", "\nload ", "\nfirst run ",
                           "\n3 runs after 1 warm-up: min ", ", median ", ", p90 ", ", max ", "\npeak RSS "}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

// --warmup 0: the first run is the first timed run.
TEST_F(Bench, WarmupZeroTimesTheFirstRun) {
  CliResult r = RunCli("bench " + model_ + " --runs 3 --warmup 0 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  json j = ParseJson(r);
  ExpectConsistentStats(j, 3);
  EXPECT_EQ(j["first_run_ms"].get<double>(), j["runs_ms"][0].get<double>()) << j.dump();
}

TEST_F(Bench, InputDir) {
  const fs::path in = WriteInputs("in", 5);
  CliResult r = RunCli("bench " + model_ + " --input-dir " + in.string() + " --runs 5 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  json j = ParseJson(r);
  ExpectConsistentStats(j, 5);
  ASSERT_EQ(j["inputs"].size(), 3u) << j.dump();
  EXPECT_EQ(j["inputs"][0]["shape"], "[5, 4]");
  EXPECT_EQ(j["inputs"][0]["source"], "input_0.pb");
  EXPECT_EQ(j["inputs"][2]["name"], "b");
  EXPECT_EQ(j["inputs"][2]["dtype"], "bool");
}

TEST_F(Bench, BadFlagsAreOneErrorLine) {
  const std::string b = "bench " + model_;
  ExpectOneError(b + " --bogus", "unknown option --bogus");
  ExpectOneError("bench", "bench needs exactly one MODEL.onnx");
  ExpectOneError(b + " " + model_, "bench needs exactly one MODEL.onnx");
  for (const char* dim : {"N", "N=0", "N=-3", "N=abc", "N=2x", "=4", "N=99999999999999999999"}) {
    ExpectOneError(b + " --dim " + dim, std::string("--dim '") + dim + "' must be NAME=VALUE with VALUE a positive integer");
  }
  ExpectOneError(b + " --dim", "--dim needs a value");
  ExpectOneError(b + " --dim M=3", "--dim M: the model's inputs have no symbolic dimension of that name (they have: N)");
  ExpectOneError(b + " --dim N=2 --dim N=3", "--dim N is given twice with different values");
  for (const char* runs : {"0", "-1", "x", ""}) {
    ExpectOneError(b + " --runs=" + runs, std::string("--runs '") + runs + "' must be a count of at least 1");
  }
  ExpectOneError(b + " --warmup -1", "--warmup '-1' must be a count (0 or more)");
  ExpectOneError(b + " --threads 0", "--threads '0' is not a count");
  ExpectOneError(b + " --matmul fp16", "--matmul 'fp16' must be float or int8");
  ExpectOneError(b + " --dim N=100000000000000", "input 'x' of shape [100000000000000, 4] would take");
}

TEST_F(Bench, ModelThatFailsToLoad) {
  ExpectOneError("bench " + (dir_ / "missing.onnx").string(), "cannot open model");
  const std::string bytes = BenchModel().SerializeAsString();
  {
    std::ofstream f(dir_ / "trunc.onnx", std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 7));
  }
  ExpectOneError("bench " + (dir_ / "trunc.onnx").string(), "truncated or malformed");
}

TEST_F(Bench, InputDirThatDisagreesWithTheModel) {
  const std::string b = "bench " + model_ + " --input-dir ";
  ExpectOneError(b + (dir_ / "nowhere").string(), "input folder '" + (dir_ / "nowhere").string() + "' does not exist");
  ExpectOneError("bench " + model_ + " --input-dir=", "input folder '' does not exist");
  const fs::path in = WriteInputs("in", 2);
  ExpectOneError(b + in.string() + " --dim N=2", "--dim sizes the inputs bench makes; with --input-dir the files give the shapes");

  // x as int64: the run names the input and the type it needs.
  const fs::path wrong_type = WriteInputs("wrong_type", 2);
  WriteTensor(wrong_type / "input_0.pb", Int64Tensor("x", {2, 4}, std::vector<int64_t>(8, 1)));
  ExpectOneError(b + wrong_type.string(), "input 'x' must be float32");

  // x of 3 columns where the model fixes 4.
  const fs::path wrong_shape = WriteInputs("wrong_shape", 2);
  WriteTensor(wrong_shape / "input_0.pb", FloatTensor("x", {2, 3}, std::vector<float>(6, 1.f)));
  ExpectOneError(b + wrong_shape.string(), "input 'x' dimension 1 must be 4, got shape [2, 3]");

  // A file naming an input the model does not have.
  const fs::path unknown = WriteInputs("unknown", 2);
  WriteTensor(unknown / "input_0.pb", FloatTensor("nope", {2, 4}, std::vector<float>(8, 1.f)));
  ExpectOneError(b + unknown.string(), "unknown input 'nope' (the model's inputs: x, idx, b)");

  // An index past the table: the run fails, as a made-up index past 9 would.
  const fs::path bad_index = WriteInputs("bad_index", 2);
  WriteTensor(bad_index / "input_1.pb", Int64Tensor("idx", {2}, {1, 10}));
  ExpectOneError(b + bad_index.string(), "index 10 is out of range");

  // Bytes that are no TensorProto.
  const fs::path garbage = WriteInputs("garbage", 2);
  {
    std::ofstream f(garbage / "input_1.pb", std::ios::binary);
    f << "\xff\xff\xff not a tensor";
  }
  ExpectOneError(b + garbage.string(), (garbage / "input_1.pb").string() + ": ");

  // An empty folder: the model's inputs are missing.
  fs::create_directories(dir_ / "empty");
  ExpectOneError(b + (dir_ / "empty").string(), "input 'x' is missing");
}

// An input bench cannot make up (a string tensor) asks for --input-dir.
TEST_F(Bench, StringInputNeedsInputDir) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("s", onnx::TensorProto::STRING, {2});
  *g->add_node() = MakeNode("Identity", {"s"}, {"t"});
  *g->add_output() = TensorInfo("t", onnx::TensorProto::STRING, {2});
  WriteModel(m, dir_ / "s.onnx");
  ExpectOneError("bench " + (dir_ / "s.onnx").string(), "input 's' is of type string, which bench does not make up: give its value with --input-dir");
}

}  // namespace
}  // namespace oneinfer
