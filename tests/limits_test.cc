// Sizes from data and the session's memory limits: a node whose shape comes from data and claims
// more than the session may hold (or more than 64 bits can count) fails its run with
// ResourceExhausted / InvalidArgument naming the node and the shape: a non-OK status from the API,
// exit 1 and one `oneinfer: error:` line from the command line, never an abort or a signal.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>

#include "oneinfer/session.h"
#include "tests/crafted_models.h"
#include "tests/op_harness.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;
namespace fs = std::filesystem;

constexpr int64_t k2p20 = int64_t{1} << 20;
constexpr int64_t k2p40 = int64_t{1} << 40;

// A model of one node `op` named "hostile" over initializers; its output "y" is the graph's.
onnx::ModelProto OneNodeModel(const std::string& op, const std::vector<onnx::TensorProto>& inits,
                              const std::function<void(onnx::NodeProto*)>& attrs = nullptr, int opset = 21,
                              int out_type = onnx::TensorProto::FLOAT) {
  onnx::ModelProto m = MakeModel(opset);
  auto* g = m.mutable_graph();
  std::vector<std::string> names;
  for (const onnx::TensorProto& t : inits) {
    *g->add_initializer() = t;
    names.push_back(t.name());
  }
  onnx::NodeProto n = MakeNode(op, names, {"y"}, "hostile");
  if (attrs) attrs(&n);
  *g->add_node() = n;
  *g->add_output() = AnyShape("y", out_type);
  return m;
}

// The model written to a fresh folder.
fs::path Write(const std::string& tag, const onnx::ModelProto& m) {
  const fs::path p = TempDir("limits_" + tag) / "m.onnx";
  WriteModel(m, p);
  return p;
}

// Loads (which must succeed: the sizes come from data) and runs; the run's error.
absl::Status LoadAndRun(const fs::path& model, const SessionOptions& opts = {}) {
  auto s = Session::Load(model.string(), opts);
  if (!s.ok()) return s.status();
  auto r = (*s)->Run({});
  return r.ok() ? absl::OkStatus() : r.status();
}

// The API and `oneinfer exec` both fail with `code` and each needle in the message.
void ExpectRefused(const std::string& tag, const onnx::ModelProto& m, absl::StatusCode code,
                   const std::vector<std::string>& needles) {
  SCOPED_TRACE(tag);
  const fs::path p = Write(tag, m);
  const absl::Status s = LoadAndRun(p);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s;
  for (const std::string& needle : needles) EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  const CliResult r = ExecModel(p);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(CountOccurrences(r.out, "oneinfer: error:"), 1) << r.out;
  for (const std::string& needle : needles) EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
}

// NumElements never overflows: a 0 dim anywhere makes 0, a product past int64 saturates
// (fuzz_tensor_proto: tests/data/fuzz/tensor_proto/zero_dim_after_huge_dims).
TEST(Limits, ElementCountsNeverOverflow) {
  EXPECT_EQ(NumElements({int64_t{775806353110204416}, 8044, 0}), 0);
  EXPECT_EQ(NumElements({k2p40, k2p40}), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(NumElements({3, 4}), 12);
  EXPECT_EQ(NumElements({}), 1);
}

TEST(Limits, ConstantOfShapeClaimingTerabytesOrWrapping) {
  ExpectRefused("cos_tb", OneNodeModel("ConstantOfShape", {Int64Tensor("shape", {3}, {k2p20, k2p20, 4})}),
                absl::StatusCode::kResourceExhausted,
                {"ConstantOfShape 'hostile'", "float32 tensor of shape [1048576, 1048576, 4]", "17592186044416 bytes"});
  ExpectRefused("cos_wrap", OneNodeModel("ConstantOfShape", {Int64Tensor("shape", {2}, {k2p40, k2p40})}),
                absl::StatusCode::kResourceExhausted, {"ConstantOfShape 'hostile'", "[1099511627776, 1099511627776]", "overflows 64 bits"});
  ExpectRefused("cos_negative", OneNodeModel("ConstantOfShape", {Int64Tensor("shape", {2}, {-4, -4})}),
                absl::StatusCode::kInvalidArgument, {"ConstantOfShape 'hostile'", "negative dimension -4"});
}

TEST(Limits, ExpandTileAndPadFromData) {
  ExpectRefused("expand", OneNodeModel("Expand", {FloatTensor("x", {1}, {1.f}), Int64Tensor("shape", {2}, {k2p40, k2p40})}),
                absl::StatusCode::kResourceExhausted, {"Expand 'hostile'", "overflows 64 bits"});
  // 3 x 2^62 wraps to 2^62 + 2^63: before the check a wrapped size was allocated and overrun.
  ExpectRefused("tile_wrap", OneNodeModel("Tile", {FloatTensor("x", {3}, {1.f, 2.f, 3.f}), Int64Tensor("reps", {1}, {int64_t{1} << 62})}),
                absl::StatusCode::kResourceExhausted, {"Tile 'hostile'", "repeating axis 0 of 3 by 4611686018427387904 overflows 64 bits"});
  ExpectRefused("tile_tb", OneNodeModel("Tile", {FloatTensor("x", {2}, {1.f, 2.f}), Int64Tensor("reps", {1}, {k2p40})}),
                absl::StatusCode::kResourceExhausted, {"Tile 'hostile'", "shape [2199023255552]", "8796093022208 bytes"});
  ExpectRefused("pad_tb", OneNodeModel("Pad", {FloatTensor("x", {1}, {1.f}), Int64Tensor("pads", {2}, {0, k2p40})}),
                absl::StatusCode::kResourceExhausted, {"Pad 'hostile'", "shape [1099511627777]"});
  ExpectRefused("pad_wrap", OneNodeModel("Pad", {FloatTensor("x", {1}, {1.f}), Int64Tensor("pads", {2}, {INT64_MAX, 1})}),
                absl::StatusCode::kInvalidArgument, {"Pad 'hostile'", "overflow 64 bits"});
}

TEST(Limits, ResizeRangeAndOneHotFromData) {
  const onnx::TensorProto x = FloatTensor("x", {1, 1, 2, 2}, {1.f, 2.f, 3.f, 4.f});
  onnx::TensorProto roi = FloatTensor("roi", {0}, {});
  ExpectRefused("resize_1e30", OneNodeModel("Resize", {x, roi, FloatTensor("scales", {4}, {1.f, 1.f, 1e30f, 1e30f})}),
                absl::StatusCode::kResourceExhausted, {"Resize 'hostile'", "scale 1e+30"});
  ExpectRefused("resize_tb", OneNodeModel("Resize", {x, roi, FloatTensor("scales", {4}, {1.f, 1.f, 1e6f, 1e6f})}),
                absl::StatusCode::kResourceExhausted, {"Resize 'hostile'", "shape [1, 1, 2000000, 2000000]"});
  ExpectRefused("upsample", OneNodeModel("Upsample", {x, FloatTensor("scales", {4}, {1.f, 1.f, 1e30f, 1e30f})}, nullptr, 9),
                absl::StatusCode::kResourceExhausted, {"Upsample 'hostile'"});
  // limit - start of two int64 values does not fit in 64 bits.
  ExpectRefused("range_i64", OneNodeModel("Range", {Int64Tensor("start", {}, {INT64_MIN + 1}), Int64Tensor("limit", {}, {INT64_MAX}),
                                                    Int64Tensor("delta", {}, {1})}, nullptr, 21, onnx::TensorProto::INT64),
                absl::StatusCode::kResourceExhausted, {"Range 'hostile'", "more than 2^63 elements"});
  ExpectRefused("range_f32", OneNodeModel("Range", {FloatTensor("start", {}, {0.f}), FloatTensor("limit", {}, {1e30f}),
                                                    FloatTensor("delta", {}, {1.f})}),
                absl::StatusCode::kResourceExhausted, {"Range 'hostile'", "1e+30 elements"});
  ExpectRefused("range_tb", OneNodeModel("Range", {Int64Tensor("start", {}, {0}), Int64Tensor("limit", {}, {k2p40}),
                                                   Int64Tensor("delta", {}, {1})}, nullptr, 21, onnx::TensorProto::INT64),
                absl::StatusCode::kResourceExhausted, {"Range 'hostile'", "shape [1099511627776]"});
  ExpectRefused("onehot", OneNodeModel("OneHot", {Int64Tensor("i", {2}, {0, 1}), FloatTensor("depth", {}, {1e30f}),
                                                  FloatTensor("values", {2}, {0.f, 1.f})}),
                absl::StatusCode::kResourceExhausted, {"OneHot 'hostile'"});
}

// 21 x 274177 x 67280421310721 = 21 x (2^64 + 1): wrapped, the product is the input's 21
// elements, and the output claimed [21, 274177, 67280421310721] over 21 bytes.
TEST(Limits, ReshapeToDimsWhoseProductWraps) {
  onnx::TensorProto x = FloatTensor("x", {21}, std::vector<float>(21, 7.f));
  ExpectRefused("reshape", OneNodeModel("Reshape", {x, Int64Tensor("shape", {3}, {21, 274177, 67280421310721})}),
                absl::StatusCode::kInvalidArgument, {"Reshape 'hostile'", "multiply past the largest int64 element count"});
}

TEST(Limits, WindowsAndMelMatrixFromData) {
  ExpectRefused("hann", OneNodeModel("HannWindow", {Int64Tensor("size", {}, {k2p40})}),
                absl::StatusCode::kResourceExhausted, {"HannWindow 'hostile'", "shape [1099511627776]"});
  ExpectRefused("mel", OneNodeModel("MelWeightMatrix", {Int64Tensor("bins", {}, {k2p20}), Int64Tensor("dft", {}, {k2p40}),
                                                        Int64Tensor("sr", {}, {16000}), FloatTensor("lo", {}, {0.f}),
                                                        FloatTensor("hi", {}, {8000.f})}),
                absl::StatusCode::kResourceExhausted, {"MelWeightMatrix 'hostile'"});
}

// ConstantOfShape [rows, 1024] float32: rows * 4 KiB.
onnx::ModelProto Filled(int64_t rows) {
  return OneNodeModel("ConstantOfShape", {Int64Tensor("shape", {2}, {rows, 1024})});
}

TEST(Limits, SessionLimitOnOneTensor) {
  const fs::path p = Write("tensor_limit", Filled(1024));  // 4 MiB
  ASSERT_TRUE(LoadAndRun(p).ok());
  SessionOptions small;
  small.max_tensor_bytes = size_t{1} << 20;
  const absl::Status s = LoadAndRun(p, small);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("ConstantOfShape 'hostile': cannot allocate a float32 tensor of shape [1024, 1024]: 4194304 bytes"),
            std::string::npos) << s;
  EXPECT_NE(s.message().find("limit of 1048576 bytes for one tensor (SessionOptions::max_tensor_bytes)"), std::string::npos) << s;
}

TEST(Limits, SessionLimitOnAllIntermediates) {
  // Three 2 MiB constants alive at once, then their 2 MiB sum: 8 MiB at the peak.
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_initializer() = Int64Tensor("shape", {2}, {512, 1024});
  for (const char* name : {"a", "b", "c"}) *g->add_node() = MakeNode("ConstantOfShape", {"shape"}, {name}, name);
  *g->add_node() = MakeNode("Sum", {"a", "b", "c"}, {"y"}, "total");
  *g->add_output() = AnyShape("y", onnx::TensorProto::FLOAT);
  const fs::path p = Write("total_limit", m);
  SessionOptions opts;
  opts.max_intermediate_bytes = size_t{16} << 20;
  ASSERT_TRUE(LoadAndRun(p, opts).ok());
  opts.max_intermediate_bytes = size_t{7} << 20;
  const absl::Status s = LoadAndRun(p, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("Sum 'total': cannot allocate a float32 tensor of shape [512, 1024] (2097152 bytes): 6291456 bytes"),
            std::string::npos) << s;
  EXPECT_NE(s.message().find("(SessionOptions::max_intermediate_bytes)"), std::string::npos) << s;
}

// A declared dim of 2^40 as a shape input's length, and dims whose products overflow, leave
// shapes unknown at load instead of building a 2^40-long rank or a wrapped dim.
TEST(Limits, ShapeInferenceOnHostileDims) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("shape", onnx::TensorProto::INT64, {k2p40});
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {int64_t{1} << 62, 4});
  *g->add_initializer() = Int64Tensor("reps", {2}, {4, 1});
  *g->add_initializer() = Int64Tensor("pads", {4}, {INT64_MAX, 0, INT64_MAX, 0});
  *g->add_node() = MakeNode("ConstantOfShape", {"shape"}, {"y"});
  *g->add_node() = MakeNode("Reshape", {"x", "shape"}, {"r"});
  *g->add_node() = MakeNode("Tile", {"x", "reps"}, {"t"});
  *g->add_node() = MakeNode("Pad", {"x", "pads"}, {"p"});
  for (const char* out : {"y", "r", "t", "p"}) *g->add_output() = AnyShape(out, onnx::TensorProto::FLOAT);
  const fs::path p = Write("inference", m);
  auto s = Session::Load(p.string());
  ASSERT_TRUE(s.ok()) << s.status();
  // The kernels still refuse what the feeds claim.
  Tensor shape = Tensor::FromVector<int64_t>(DType::kInt64, {1}, {-1});
  EXPECT_FALSE((*s)->Run({{"shape", shape}, {"x", Tensor::Empty(DType::kFloat32, {1, 4})}}).ok());
}

// The sampling grid of RoiAlign (adaptive: roi size x spatial_scale / output size) visits only
// the points near the image; every other point adds 0. Compared with every point visited, as
// the ONNX reference does.
double RoiAlignNaive(const std::vector<float>& img, int64_t H, int64_t W, const float box[4], float scale, bool max_mode) {
  const double s = scale;  // the kernel's arithmetic: double boxes times the float attribute
  const double x0 = box[0] * s - 0.5, y0 = box[1] * s - 0.5, x1 = box[2] * s - 0.5, y1 = box[3] * s - 0.5;
  const double rh = y1 - y0, rw = x1 - x0;
  const int64_t gh = static_cast<int64_t>(std::ceil(rh)), gw = static_cast<int64_t>(std::ceil(rw));
  double acc = 0;
  bool first = true;
  for (int64_t iy = 0; iy < gh; ++iy) {
    const double yy = y0 + (static_cast<double>(iy) + 0.5) * rh / static_cast<double>(gh);
    for (int64_t ix = 0; ix < gw; ++ix) {
      const double xx = x0 + (static_cast<double>(ix) + 0.5) * rw / static_cast<double>(gw);
      double v = 0;
      if (!(yy < -1.0 || yy > static_cast<double>(H) || xx < -1.0 || xx > static_cast<double>(W))) {
        double ys = std::max(yy, 0.0), xs = std::max(xx, 0.0);
        int64_t yl = static_cast<int64_t>(ys), xl = static_cast<int64_t>(xs), yh, xh;
        if (yl >= H - 1) { yh = yl = H - 1; ys = static_cast<double>(yl); } else { yh = yl + 1; }
        if (xl >= W - 1) { xh = xl = W - 1; xs = static_cast<double>(xl); } else { xh = xl + 1; }
        const double ly = ys - static_cast<double>(yl), lx = xs - static_cast<double>(xl), hy = 1 - ly, hx = 1 - lx;
        const double p[4] = {hy * hx * img[static_cast<size_t>(yl * W + xl)], hy * lx * img[static_cast<size_t>(yl * W + xh)],
                             ly * hx * img[static_cast<size_t>(yh * W + xl)], ly * lx * img[static_cast<size_t>(yh * W + xh)]};
        v = max_mode ? std::max(std::max(p[0], p[1]), std::max(p[2], p[3])) : p[0] + p[1] + p[2] + p[3];
      }
      acc = max_mode ? (first ? v : std::max(acc, v)) : acc + v;
      first = false;
    }
  }
  return max_mode ? acc : acc / static_cast<double>(std::max<int64_t>(gh * gw, 1));
}

TEST(Limits, RoiAlignVisitsOnlyTheImageAndRefusesAHugeGrid) {
  const int64_t H = 5, W = 6;
  std::vector<float> img(static_cast<size_t>(H * W));
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<float>((i * 7) % 11) - 6.f;  // some negative: max mode sees the 0s
  const float box[4] = {-0.3f, 0.2f, 1.4f, 0.9f};
  for (const char* mode : {"avg", "max"}) {
    for (float scale : {1.f, 7.f, 300.f}) {  // grids up to ~500 x ~200 points, most outside the image
      SCOPED_TRACE(std::string(mode) + " spatial_scale " + std::to_string(scale));
      auto r = OneNode{.op = "RoiAlign", .attrs = {StrAttr("mode", mode), FloatAttr("spatial_scale", scale)}}.Outputs(
          {Tensor::FromVector<float>(DType::kFloat32, {1, 1, H, W}, img),
           Tensor::FromVector<float>(DType::kFloat32, {1, 4}, {box[0], box[1], box[2], box[3]}),
           Tensor::FromVector<int64_t>(DType::kInt64, {1}, {0})});
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ((*r)[0].data<float>()[0], static_cast<float>(RoiAlignNaive(img, H, W, box, scale, std::string(mode) == "max")));
    }
  }
  // spatial_scale 1e9 made a grid of ~10^9 x 10^9 points per bin, which spun.
  auto r = OneNode{.op = "RoiAlign", .attrs = {FloatAttr("spatial_scale", 1e9f)}}.Outputs(
      {Tensor::FromVector<float>(DType::kFloat32, {1, 1, H, W}, img),
       Tensor::FromVector<float>(DType::kFloat32, {1, 4}, {0.f, 0.f, 4.f, 4.f}), Tensor::FromVector<int64_t>(DType::kInt64, {1}, {0})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("past 2^31 a side"), std::string::npos) << r.status();
}

// A line of /proc/self/status ("VmRSS", "VmHWM") in bytes.
long StatusBytes(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1)) * 1024;
  }
  return -1;
}

// Memory while failing: a child loads a model with a 32 MiB weight and a node claiming 16 TiB,
// resets its peak resident size (clear_refs 5), runs, and reports how far the peak rose above
// the resident size before the run: less than twice the model's size (nothing is allocated).
TEST(Limits, MemoryWhileFailingStaysBelowTwiceTheModel) {
  onnx::ModelProto m = OneNodeModel("ConstantOfShape", {Int64Tensor("shape", {3}, {k2p20, k2p20, 4})});
  onnx::TensorProto w;
  w.set_name("w");
  w.set_data_type(onnx::TensorProto::FLOAT);
  w.add_dims(8 << 20);
  w.set_raw_data(std::string(size_t{32} << 20, '\x01'));
  *m.mutable_graph()->add_initializer() = w;
  *m.mutable_graph()->add_node() = MakeNode("Identity", {"w"}, {"w_out"});
  *m.mutable_graph()->add_output() = AnyShape("w_out", onnx::TensorProto::FLOAT);
  const fs::path p = Write("memory", m);
  const auto model_bytes = static_cast<long>(fs::file_size(p));
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long report[2] = {-1, -1};  // peak growth while loading, peak growth while failing
    const long start = StatusBytes("VmRSS");
    auto s = Session::Load(p.string());
    if (s.ok()) {
      report[0] = StatusBytes("VmHWM") - start;
      std::ofstream("/proc/self/clear_refs") << "5";  // the peak starts again from the current size
      const long before = StatusBytes("VmRSS");
      auto r = (*s)->Run({});
      if (r.status().code() == absl::StatusCode::kResourceExhausted) report[1] = StatusBytes("VmHWM") - before;
    }
    (void)!write(fds[1], report, sizeof(report));
    _exit(0);
  }
  close(fds[1]);
  long report[2] = {-2, -2};
  ASSERT_EQ(read(fds[0], report, sizeof(report)), static_cast<ssize_t>(sizeof(report)));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_GE(report[1], 0) << "the load failed or the run did not fail with ResourceExhausted";
  if (!kAddressSanitizer) EXPECT_LT(report[1], 2 * model_bytes);
  std::cerr << "model " << model_bytes << " bytes: peak RSS rose " << report[0] << " bytes while loading, "
            << report[1] << " bytes while the run failed\n";
}

}  // namespace
}  // namespace oneinfer
