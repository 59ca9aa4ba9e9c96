// include/oneinfer/oneinfer_c.h over the C++ API. Every entry point that can fail runs its body
// through Guard, which turns a C++ exception into an error status: none may cross into C.
#include "oneinfer/oneinfer_c.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/checked_math.h"
#include "capi/output_tensor.h"
#include "oneinfer/generator.h"
#include "oneinfer/session.h"
#include "oneinfer/tokenizer.h"

struct oneinfer_status {
  oneinfer_status_code code;
  std::string message;
};

struct oneinfer_tensor {
  oneinfer::Tensor tensor;
};

struct oneinfer_session_options {
  oneinfer::SessionOptions options;
};

// An IOInfo laid out as the C struct wants it: pointers into storage the session keeps.
struct CIOInfo {
  oneinfer_io_info info{};
  std::vector<const char*> dim_params;
};

struct oneinfer_session {
  std::unique_ptr<oneinfer::Session> session;
  std::vector<CIOInfo> inputs, outputs;
  std::vector<std::pair<const std::string*, const std::string*>> metadata;
};

struct oneinfer_generator {
  std::unique_ptr<oneinfer::Generator> generator;
};

struct oneinfer_tokenizer {
  std::unique_ptr<oneinfer::Tokenizer> tokenizer;
};

namespace {

// Returned when even an error status cannot be allocated; oneinfer_status_release skips it.
oneinfer_status g_out_of_memory{ONEINFER_RESOURCE_EXHAUSTED, "out of memory"};

oneinfer_status* MakeStatus(oneinfer_status_code code, std::string message) {
  auto* s = new (std::nothrow) oneinfer_status;
  if (s == nullptr) return &g_out_of_memory;
  s->code = code;
  try {
    s->message = std::move(message);
  } catch (...) {
    delete s;
    return &g_out_of_memory;
  }
  return s;
}

oneinfer_status* FromStatus(const absl::Status& st) {
  if (st.ok()) return nullptr;
  return MakeStatus(static_cast<oneinfer_status_code>(st.code()), std::string(st.message()));
}

oneinfer_status* InvalidArgument(const char* message) { return MakeStatus(ONEINFER_INVALID_ARGUMENT, message); }

// Runs body (returning oneinfer_status*), turning any exception into an error status.
template <typename F>
oneinfer_status* Guard(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return &g_out_of_memory;
  } catch (const std::exception& e) {
    return MakeStatus(ONEINFER_INTERNAL, absl::StrCat("unexpected exception: ", e.what()));
  } catch (...) {
    return MakeStatus(ONEINFER_INTERNAL, "unexpected exception");
  }
}

bool KnownDType(oneinfer_dtype d) {
  switch (d) {
    case ONEINFER_DTYPE_FLOAT32: case ONEINFER_DTYPE_UINT8: case ONEINFER_DTYPE_INT8:
    case ONEINFER_DTYPE_UINT16: case ONEINFER_DTYPE_INT16: case ONEINFER_DTYPE_INT32:
    case ONEINFER_DTYPE_INT64: case ONEINFER_DTYPE_STRING: case ONEINFER_DTYPE_BOOL:
    case ONEINFER_DTYPE_FLOAT16: case ONEINFER_DTYPE_FLOAT64: case ONEINFER_DTYPE_UINT32:
    case ONEINFER_DTYPE_UINT64: case ONEINFER_DTYPE_BFLOAT16: case ONEINFER_DTYPE_UINT4:
    case ONEINFER_DTYPE_INT4:
      return true;
    default:
      return false;
  }
}

// The shape of a new tensor, with its checked byte size.
absl::StatusOr<oneinfer::Shape> CheckedShape(oneinfer_dtype dtype, const int64_t* shape, size_t rank, size_t* bytes) {
  if (!KnownDType(dtype)) return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", static_cast<int>(dtype)));
  if (rank > 0 && shape == nullptr) return absl::InvalidArgumentError("shape is NULL with a nonzero rank");
  oneinfer::Shape s(shape, shape + rank);
  auto size = oneinfer::CheckedByteSize(static_cast<oneinfer::DType>(dtype), s, "tensor");
  if (!size.ok()) return size.status();
  *bytes = static_cast<size_t>(*size);
  return s;
}

oneinfer_tensor* NewTensor(oneinfer::Tensor t) { return new oneinfer_tensor{std::move(t)}; }

void FillIOInfos(const std::vector<oneinfer::IOInfo>& from, std::vector<CIOInfo>* to) {
  to->resize(from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    const oneinfer::IOInfo& src = from[i];
    CIOInfo& dst = (*to)[i];
    for (size_t d = 0; d < src.shape.size(); ++d) {
      dst.dim_params.push_back(d < src.dim_params.size() ? src.dim_params[d].c_str() : "");
    }
    dst.info.name = src.name.c_str();
    dst.info.dtype = static_cast<oneinfer_dtype>(src.dtype);
    dst.info.is_tensor = src.is_tensor ? 1 : 0;
    dst.info.has_shape = src.has_shape ? 1 : 0;
    dst.info.has_default = src.has_default ? 1 : 0;
    dst.info.rank = src.shape.size();
    dst.info.shape = src.shape.empty() ? nullptr : src.shape.data();
    dst.info.dim_params = dst.dim_params.empty() ? nullptr : dst.dim_params.data();
  }
}

oneinfer_status* FinishLoad(absl::StatusOr<std::unique_ptr<oneinfer::Session>> loaded, oneinfer_session** out) {
  if (!loaded.ok()) return FromStatus(loaded.status());
  auto s = std::make_unique<oneinfer_session>();
  s->session = std::move(*loaded);
  FillIOInfos(s->session->inputs(), &s->inputs);
  FillIOInfos(s->session->outputs(), &s->outputs);
  for (const auto& [key, value] : s->session->metadata()) s->metadata.emplace_back(&key, &value);
  *out = s.release();
  return nullptr;
}

oneinfer_status* IOInfoAt(const std::vector<CIOInfo>& infos, size_t index, const char* what, oneinfer_io_info* info) {
  if (info == nullptr) return InvalidArgument("info is NULL");
  if (index >= infos.size()) {
    return MakeStatus(ONEINFER_OUT_OF_RANGE, absl::StrCat(what, " index ", index, " out of range (", infos.size(), " ", what, "s)"));
  }
  *info = infos[index].info;
  return nullptr;
}

template <typename T>
oneinfer_status* SetOption(oneinfer_session_options* o, T oneinfer::SessionOptions::*field, T value) {
  if (o == nullptr) return InvalidArgument("options is NULL");
  o->options.*field = value;
  return nullptr;
}

}  // namespace

extern "C" {

uint32_t oneinfer_abi_version(void) { return ONEINFER_C_ABI_VERSION; }

const char* oneinfer_version_string(void) {
  try {
    static const std::string version = oneinfer::VersionString();
    return version.c_str();
  } catch (...) {
    return "";
  }
}

oneinfer_status_code oneinfer_status_get_code(const oneinfer_status* status) {
  return status == nullptr ? ONEINFER_OK : status->code;
}

const char* oneinfer_status_message(const oneinfer_status* status) {
  return status == nullptr ? "" : status->message.c_str();
}

void oneinfer_status_release(oneinfer_status* status) {
  if (status != &g_out_of_memory) delete status;
}

const char* oneinfer_dtype_name(oneinfer_dtype dtype) { return oneinfer::DTypeName(static_cast<oneinfer::DType>(dtype)); }

// ---- tensors ----

oneinfer_status* oneinfer_tensor_create(oneinfer_dtype dtype, const int64_t* shape, size_t rank, oneinfer_tensor** out) {
  return Guard([&]() -> oneinfer_status* {
    if (out == nullptr) return InvalidArgument("out is NULL");
    size_t bytes = 0;
    auto s = CheckedShape(dtype, shape, rank, &bytes);
    if (!s.ok()) return FromStatus(s.status());
    *out = NewTensor(oneinfer::Tensor::Empty(static_cast<oneinfer::DType>(dtype), std::move(*s)));
    return nullptr;
  });
}

oneinfer_status* oneinfer_tensor_create_view(oneinfer_dtype dtype, const int64_t* shape, size_t rank, void* data,
                                             size_t byte_size, oneinfer_tensor** out) {
  return Guard([&]() -> oneinfer_status* {
    if (out == nullptr) return InvalidArgument("out is NULL");
    if (dtype == ONEINFER_DTYPE_STRING) return InvalidArgument("a string tensor cannot view caller memory; use oneinfer_tensor_create");
    size_t bytes = 0;
    auto s = CheckedShape(dtype, shape, rank, &bytes);
    if (!s.ok()) return FromStatus(s.status());
    if (byte_size != bytes) {
      return InvalidArgument(absl::StrCat("a ", oneinfer::DTypeName(static_cast<oneinfer::DType>(dtype)), " tensor of shape ",
                                          oneinfer::ShapeToString(*s), " needs ", bytes, " bytes, got ", byte_size).c_str());
    }
    if (data == nullptr && bytes > 0) return InvalidArgument("data is NULL");
    *out = NewTensor(oneinfer::Tensor::View(static_cast<oneinfer::DType>(dtype), std::move(*s), data));
    return nullptr;
  });
}

void oneinfer_tensor_release(oneinfer_tensor* tensor) { delete tensor; }

oneinfer_dtype oneinfer_tensor_dtype(const oneinfer_tensor* t) {
  return t == nullptr ? ONEINFER_DTYPE_UNDEFINED : static_cast<oneinfer_dtype>(t->tensor.dtype());
}
size_t oneinfer_tensor_rank(const oneinfer_tensor* t) { return t == nullptr ? 0 : t->tensor.shape().size(); }
const int64_t* oneinfer_tensor_shape(const oneinfer_tensor* t) {
  return t == nullptr || t->tensor.shape().empty() ? nullptr : t->tensor.shape().data();
}
int64_t oneinfer_tensor_num_elements(const oneinfer_tensor* t) { return t == nullptr ? 0 : t->tensor.num_elements(); }
size_t oneinfer_tensor_byte_size(const oneinfer_tensor* t) {
  return t == nullptr || t->tensor.dtype() == oneinfer::DType::kString ? 0 : t->tensor.byte_size();
}
void* oneinfer_tensor_data(oneinfer_tensor* t) {
  if (t == nullptr || t->tensor.dtype() == oneinfer::DType::kString || t->tensor.num_elements() == 0) return nullptr;
  return t->tensor.raw_data();
}

oneinfer_status* oneinfer_tensor_get_string(const oneinfer_tensor* t, int64_t index, const char** data, size_t* length) {
  return Guard([&]() -> oneinfer_status* {
    if (t == nullptr || data == nullptr || length == nullptr) return InvalidArgument("tensor, data or length is NULL");
    if (t->tensor.dtype() != oneinfer::DType::kString) return InvalidArgument("not a string tensor");
    if (index < 0 || index >= t->tensor.num_elements()) return MakeStatus(ONEINFER_OUT_OF_RANGE, absl::StrCat("string index ", index, " out of range"));
    const std::string& s = t->tensor.data<std::string>()[index];
    *data = s.data();
    *length = s.size();
    return nullptr;
  });
}

oneinfer_status* oneinfer_tensor_set_string(oneinfer_tensor* t, int64_t index, const char* data, size_t length) {
  return Guard([&]() -> oneinfer_status* {
    if (t == nullptr || (data == nullptr && length > 0)) return InvalidArgument("tensor or data is NULL");
    if (t->tensor.dtype() != oneinfer::DType::kString) return InvalidArgument("not a string tensor");
    if (index < 0 || index >= t->tensor.num_elements()) return MakeStatus(ONEINFER_OUT_OF_RANGE, absl::StrCat("string index ", index, " out of range"));
    t->tensor.data<std::string>()[index].assign(data == nullptr ? "" : data, length);
    return nullptr;
  });
}

// ---- session options ----

oneinfer_status* oneinfer_session_options_create(oneinfer_session_options** out) {
  return Guard([&]() -> oneinfer_status* {
    if (out == nullptr) return InvalidArgument("out is NULL");
    *out = new oneinfer_session_options;
    return nullptr;
  });
}

void oneinfer_session_options_release(oneinfer_session_options* options) { delete options; }

oneinfer_status* oneinfer_session_options_set_num_threads(oneinfer_session_options* o, int n) {
  if (n < 0) return InvalidArgument("num_threads must be >= 0");
  return SetOption(o, &oneinfer::SessionOptions::num_threads, n);
}
oneinfer_status* oneinfer_session_options_set_matmul_precision(oneinfer_session_options* o, oneinfer_matmul_precision p) {
  if (p != ONEINFER_MATMUL_FLOAT32 && p != ONEINFER_MATMUL_INT8) return InvalidArgument("unknown matmul precision");
  return SetOption(o, &oneinfer::SessionOptions::matmul,
                   p == ONEINFER_MATMUL_INT8 ? oneinfer::MatMulPrecision::kInt8 : oneinfer::MatMulPrecision::kFloat32);
}
oneinfer_status* oneinfer_session_options_set_log_level(oneinfer_session_options* o, oneinfer_log_level level) {
  if (level < ONEINFER_LOG_ERROR || level > ONEINFER_LOG_VERBOSE) return InvalidArgument("unknown log level");
  return SetOption(o, &oneinfer::SessionOptions::log_level, static_cast<oneinfer::LogLevel>(level));
}
oneinfer_status* oneinfer_session_options_set_constant_folding(oneinfer_session_options* o, int enabled) {
  return SetOption(o, &oneinfer::SessionOptions::constant_folding, enabled != 0);
}
oneinfer_status* oneinfer_session_options_set_prepare_weights(oneinfer_session_options* o, int enabled) {
  return SetOption(o, &oneinfer::SessionOptions::prepare_weights, enabled != 0);
}
oneinfer_status* oneinfer_session_options_set_qdq_fusion(oneinfer_session_options* o, int enabled) {
  return SetOption(o, &oneinfer::SessionOptions::qdq_fusion, enabled != 0);
}
oneinfer_status* oneinfer_session_options_set_weight_fusion(oneinfer_session_options* o, int enabled) {
  return SetOption(o, &oneinfer::SessionOptions::weight_fusion, enabled != 0);
}
oneinfer_status* oneinfer_session_options_set_profile(oneinfer_session_options* o, int enabled) {
  return SetOption(o, &oneinfer::SessionOptions::profile, enabled != 0);
}

// ---- sessions ----

oneinfer_status* oneinfer_session_load(const char* path, const oneinfer_session_options* options, oneinfer_session** out) {
  return Guard([&]() -> oneinfer_status* {
    if (path == nullptr || out == nullptr) return InvalidArgument("path or out is NULL");
    return FinishLoad(oneinfer::Session::Load(path, options ? options->options : oneinfer::SessionOptions{}), out);
  });
}

oneinfer_status* oneinfer_session_load_from_buffer(const void* data, size_t size, const oneinfer_session_options* options,
                                                   const char* base_dir, oneinfer_session** out) {
  return Guard([&]() -> oneinfer_status* {
    if (out == nullptr || (data == nullptr && size > 0)) return InvalidArgument("data or out is NULL");
    return FinishLoad(oneinfer::Session::LoadFromBuffer(data, size, options ? options->options : oneinfer::SessionOptions{},
                                                        base_dir ? base_dir : "."),
                      out);
  });
}

void oneinfer_session_release(oneinfer_session* session) { delete session; }

size_t oneinfer_session_input_count(const oneinfer_session* s) { return s == nullptr ? 0 : s->inputs.size(); }
size_t oneinfer_session_output_count(const oneinfer_session* s) { return s == nullptr ? 0 : s->outputs.size(); }

oneinfer_status* oneinfer_session_input_info(const oneinfer_session* s, size_t index, oneinfer_io_info* info) {
  if (s == nullptr) return InvalidArgument("session is NULL");
  return IOInfoAt(s->inputs, index, "input", info);
}

oneinfer_status* oneinfer_session_output_info(const oneinfer_session* s, size_t index, oneinfer_io_info* info) {
  if (s == nullptr) return InvalidArgument("session is NULL");
  return IOInfoAt(s->outputs, index, "output", info);
}

size_t oneinfer_session_metadata_count(const oneinfer_session* s) { return s == nullptr ? 0 : s->metadata.size(); }

oneinfer_status* oneinfer_session_metadata_entry(const oneinfer_session* s, size_t index, const char** key,
                                                 const char** value) {
  if (s == nullptr || key == nullptr || value == nullptr) return InvalidArgument("session, key or value is NULL");
  if (index >= s->metadata.size()) return MakeStatus(ONEINFER_OUT_OF_RANGE, "metadata index out of range");
  *key = s->metadata[index].first->c_str();
  *value = s->metadata[index].second->c_str();
  return nullptr;
}

oneinfer_status* oneinfer_session_run(const oneinfer_session* s, const char* const* input_names,
                                      const oneinfer_tensor* const* inputs, size_t num_inputs,
                                      const char* const* output_names, size_t num_outputs, oneinfer_tensor** outputs) {
  return Guard([&]() -> oneinfer_status* {
    if (s == nullptr) return InvalidArgument("session is NULL");
    if (num_inputs > 0 && (input_names == nullptr || inputs == nullptr)) return InvalidArgument("input_names or inputs is NULL");
    if (num_outputs > 0 && outputs == nullptr) return InvalidArgument("outputs is NULL");
    std::vector<oneinfer::Feed> feeds;
    feeds.reserve(num_inputs);
    for (size_t i = 0; i < num_inputs; ++i) {
      if (input_names[i] == nullptr) return InvalidArgument(absl::StrCat("input_names[", i, "] is NULL").c_str());
      if (inputs[i] == nullptr) return InvalidArgument(absl::StrCat("input '", input_names[i], "' is a NULL tensor").c_str());
      feeds.emplace_back(input_names[i], inputs[i]->tensor);
    }
    std::vector<std::string> names;
    if (output_names == nullptr) {
      if (num_outputs != s->outputs.size()) {
        return InvalidArgument(absl::StrCat("output_names is NULL (all outputs), so num_outputs must be ", s->outputs.size(),
                                            ", got ", num_outputs).c_str());
      }
    } else {
      if (num_outputs == 0) return InvalidArgument("output_names given with num_outputs 0");
      for (size_t i = 0; i < num_outputs; ++i) {
        if (output_names[i] == nullptr) return InvalidArgument(absl::StrCat("output_names[", i, "] is NULL").c_str());
        names.emplace_back(output_names[i]);
      }
    }
    auto result = s->session->Run(feeds, names);
    feeds.clear();  // drop the run's references to the caller's tensors before deciding what to copy
    if (!result.ok()) return FromStatus(result.status());
    std::vector<std::unique_ptr<oneinfer_tensor>> made;
    for (oneinfer::Tensor& t : *result) {
      made.push_back(std::make_unique<oneinfer_tensor>(oneinfer_tensor{oneinfer::capi::OwnedOutput(std::move(t))}));
    }
    for (size_t i = 0; i < made.size(); ++i) outputs[i] = made[i].release();
    return nullptr;
  });
}

// ---- generation ----

void oneinfer_generate_options_init(oneinfer_generate_options* o) {
  if (o == nullptr) return;
  const oneinfer::GenerateOptions d;
  o->max_new_tokens = d.max_new_tokens;
  o->temperature = d.sampling.temperature;
  o->top_k = d.sampling.top_k;
  o->top_p = d.sampling.top_p;
  o->seed = d.sampling.seed;
  o->stop_ids = nullptr;
  o->num_stop_ids = 0;
}

oneinfer_status* oneinfer_generator_create(const oneinfer_session* session, oneinfer_generator** out) {
  return Guard([&]() -> oneinfer_status* {
    if (session == nullptr || out == nullptr) return InvalidArgument("session or out is NULL");
    auto g = oneinfer::Generator::Create(*session->session);
    if (!g.ok()) return FromStatus(g.status());
    *out = new oneinfer_generator{std::move(*g)};
    return nullptr;
  });
}

void oneinfer_generator_release(oneinfer_generator* generator) { delete generator; }

int64_t oneinfer_generator_vocab_size(const oneinfer_generator* g) { return g == nullptr ? 0 : g->generator->vocab_size(); }

oneinfer_status* oneinfer_generator_generate(const oneinfer_generator* g, const int32_t* prompt, size_t prompt_length,
                                             const oneinfer_generate_options* options, oneinfer_token_callback callback,
                                             void* user_data, int32_t* out_ids, size_t capacity,
                                             oneinfer_generation_result* result) {
  return Guard([&]() -> oneinfer_status* {
    if (g == nullptr || result == nullptr) return InvalidArgument("generator or result is NULL");
    if (prompt == nullptr && prompt_length > 0) return InvalidArgument("prompt is NULL");
    oneinfer_generate_options o;
    oneinfer_generate_options_init(&o);
    if (options != nullptr) o = *options;
    if (o.max_new_tokens < 0) return InvalidArgument("max_new_tokens must be >= 0");
    if (capacity < static_cast<size_t>(o.max_new_tokens) || (capacity > 0 && out_ids == nullptr)) {
      return InvalidArgument(absl::StrCat("out_ids has room for ", capacity, " ids; max_new_tokens is ", o.max_new_tokens).c_str());
    }
    if (o.num_stop_ids > 0 && o.stop_ids == nullptr) return InvalidArgument("stop_ids is NULL");
    oneinfer::GenerateOptions go;
    go.max_new_tokens = o.max_new_tokens;
    go.sampling.temperature = o.temperature;
    go.sampling.top_k = o.top_k;
    go.sampling.top_p = o.top_p;
    go.sampling.seed = o.seed;
    go.stop_ids.assign(o.stop_ids, o.stop_ids + o.num_stop_ids);
    oneinfer::TokenCallback on_token;
    if (callback != nullptr) {
      on_token = [callback, user_data](int32_t id, const float* logits, int64_t vocab) {
        return callback(id, logits, vocab, user_data) != 0;
      };
    }
    auto r = g->generator->Generate(std::vector<int32_t>(prompt, prompt + prompt_length), go, on_token);
    if (!r.ok()) return FromStatus(r.status());
    const size_t n = std::min(r->generated_ids.size(), capacity);
    if (n > 0) std::memcpy(out_ids, r->generated_ids.data(), n * sizeof(int32_t));
    result->num_generated = n;
    result->prompt_tokens = r->prompt_tokens;
    result->stopped_by_id = r->stopped_by_id ? 1 : 0;
    result->decode_steps = r->decode_steps;
    result->prefill_ms = r->prefill_ms;
    result->decode_ms = r->decode_ms;
    return nullptr;
  });
}

// ---- tokenizer ----

oneinfer_status* oneinfer_tokenizer_load(const char* path, oneinfer_tokenizer** out) {
  return Guard([&]() -> oneinfer_status* {
    if (path == nullptr || out == nullptr) return InvalidArgument("path or out is NULL");
    auto t = oneinfer::Tokenizer::FromFile(path);
    if (!t.ok()) return FromStatus(t.status());
    *out = new oneinfer_tokenizer{std::move(*t)};
    return nullptr;
  });
}

void oneinfer_tokenizer_release(oneinfer_tokenizer* tokenizer) { delete tokenizer; }

int32_t oneinfer_tokenizer_vocab_size(const oneinfer_tokenizer* t) { return t == nullptr ? 0 : t->tokenizer->vocab_size(); }

oneinfer_status* oneinfer_tokenizer_token_id(const oneinfer_tokenizer* t, const char* token, int32_t* id) {
  return Guard([&]() -> oneinfer_status* {
    if (t == nullptr || token == nullptr || id == nullptr) return InvalidArgument("tokenizer, token or id is NULL");
    auto found = t->tokenizer->TokenId(token);
    if (!found) return MakeStatus(ONEINFER_NOT_FOUND, absl::StrCat("no token '", token, "' in the vocabulary"));
    *id = *found;
    return nullptr;
  });
}

oneinfer_status* oneinfer_tokenizer_encode(const oneinfer_tokenizer* t, const char* text, size_t length, int32_t** ids,
                                           size_t* count) {
  return Guard([&]() -> oneinfer_status* {
    if (t == nullptr || ids == nullptr || count == nullptr || (text == nullptr && length > 0)) {
      return InvalidArgument("tokenizer, text, ids or count is NULL");
    }
    const std::vector<int32_t> v = t->tokenizer->Encode(std::string_view(text == nullptr ? "" : text, length));
    auto* mem = static_cast<int32_t*>(std::malloc(v.empty() ? 1 : v.size() * sizeof(int32_t)));
    if (mem == nullptr) return &g_out_of_memory;
    if (!v.empty()) std::memcpy(mem, v.data(), v.size() * sizeof(int32_t));
    *ids = mem;
    *count = v.size();
    return nullptr;
  });
}

oneinfer_status* oneinfer_tokenizer_decode(const oneinfer_tokenizer* t, const int32_t* ids, size_t count, int skip_special,
                                           char** text, size_t* length) {
  return Guard([&]() -> oneinfer_status* {
    if (t == nullptr || text == nullptr || length == nullptr || (ids == nullptr && count > 0)) {
      return InvalidArgument("tokenizer, ids, text or length is NULL");
    }
    const std::string s = t->tokenizer->Decode(std::vector<int32_t>(ids, ids + count), skip_special != 0);
    auto* mem = static_cast<char*>(std::malloc(s.size() + 1));
    if (mem == nullptr) return &g_out_of_memory;
    std::memcpy(mem, s.data(), s.size());
    mem[s.size()] = '\0';
    *text = mem;
    *length = s.size();
    return nullptr;
  });
}

void oneinfer_free(void* memory) { std::free(memory); }

}  // extern "C"
