// Builders for small ONNX models in tests, written with the ONNX protobuf types.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include "graph/onnx_loader.h"

namespace oneinfer::testing {

// AddressSanitizer's quarantine, redzones and shadow memory count in RSS, so bounds on RSS hold
// for uninstrumented builds only (the ASan tree still runs those tests for everything else).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

inline onnx::ValueInfoProto TensorInfo(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d >= 0) shape->add_dim()->set_dim_value(d);
    else shape->add_dim()->set_dim_param("N");
  }
  return v;
}

inline onnx::NodeProto MakeNode(const std::string& op, const std::vector<std::string>& ins,
                                const std::vector<std::string>& outs, const std::string& name = "") {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : ins) n.add_input(i);
  for (const auto& o : outs) n.add_output(o);
  return n;
}

inline onnx::TensorProto FloatTensor(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

inline onnx::TensorProto Int64Tensor(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

// The ModelProto of a file (a failed parse is a test failure and an empty proto).
inline onnx::ModelProto ReadModel(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  const std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  onnx::ModelProto m;
  EXPECT_TRUE(ParseModelProto(s.data(), s.size(), &m).ok()) << p;
  return m;
}

inline onnx::ModelProto MakeModel(int opset = 21) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.set_producer_name("oneinfer-tests");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("test");
  return m;
}

// y = op(a, b): one node, both operands graph inputs of elem_type.
inline onnx::ModelProto BinaryModel(const std::string& op, int elem_type, const std::vector<int64_t>& a,
                                    const std::vector<int64_t>& b, const std::vector<int64_t>& y) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("a", elem_type, a);
  *g->add_input() = TensorInfo("b", elem_type, b);
  *g->add_node() = MakeNode(op, {"a", "b"}, {"y"});
  *g->add_output() = TensorInfo("y", elem_type, y);
  return m;
}

// A fresh, empty folder under the system temp dir.
inline std::filesystem::path TempDir(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() /
           ("oneinfer_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

inline void WriteModel(const onnx::ModelProto& m, const std::filesystem::path& p) {
  std::ofstream f(p, std::ios::binary);
  m.SerializeToOstream(&f);
}

// The `oneinfer` binary: $ONEINFER_CLI, else beside the test binary in the build folder.
inline std::string CliPath() {
  if (const char* p = std::getenv("ONEINFER_CLI")) return p;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "oneinfer").string();
}

struct CliResult {
  int code;
  std::string out;  // stdout and stderr together
};

inline CliResult RunCli(const std::string& args) {
  CliResult r{-1, ""};
  FILE* p = popen((CliPath() + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace oneinfer::testing
