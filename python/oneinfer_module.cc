// oneinfer._oneinfer: the Python module's native half (python/oneinfer/__init__.py is the rest).
// Wraps the public C++ API: numpy arrays in, numpy arrays out. The GIL is released while the
// engine runs; library errors become oneinfer.Error carrying the library's message and code.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "capi/output_tensor.h"
#include "oneinfer/chat.h"
#include "oneinfer/generator.h"
#include "oneinfer/session.h"
#include "oneinfer/tokenizer.h"

namespace py = pybind11;
using oneinfer::DType;
using oneinfer::Tensor;

namespace {

PyObject* g_error_type = nullptr;  // oneinfer.Error, held for the life of the process

[[noreturn]] void RaiseError(const std::string& code, const std::string& message) {
  py::object error = py::handle(g_error_type)(message);
  error.attr("code") = code;
  PyErr_SetObject(g_error_type, error.ptr());
  throw py::error_already_set();
}

[[noreturn]] void Raise(const absl::Status& st) {
  RaiseError(absl::StatusCodeToString(st.code()), std::string(st.message()));
}

template <typename T>
T Check(absl::StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return std::move(*v);
}

// numpy dtype -> DType (0 = none). bfloat16 inputs take uint16 arrays (their bit patterns).
DType FromNumpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const ssize_t size = dt.itemsize();
  if (kind == 'f') return size == 2 ? DType::kFloat16 : size == 4 ? DType::kFloat32 : size == 8 ? DType::kFloat64 : DType::kUndefined;
  if (kind == 'i') return size == 1 ? DType::kInt8 : size == 2 ? DType::kInt16 : size == 4 ? DType::kInt32 : size == 8 ? DType::kInt64 : DType::kUndefined;
  if (kind == 'u') return size == 1 ? DType::kUInt8 : size == 2 ? DType::kUInt16 : size == 4 ? DType::kUInt32 : size == 8 ? DType::kUInt64 : DType::kUndefined;
  if (kind == 'b' && size == 1) return DType::kBool;
  return DType::kUndefined;
}

// DType -> numpy dtype string for zero-copy outputs ("" = needs converting).
const char* NumpyName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "uint16";  // bit patterns, documented
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBool: return "bool";
    default: return "";
  }
}

std::vector<ssize_t> PyShape(const Tensor& t) { return std::vector<ssize_t>(t.shape().begin(), t.shape().end()); }

py::object StringToPy(const std::string& s) {
  PyObject* u = PyUnicode_DecodeUTF8(s.data(), static_cast<ssize_t>(s.size()), nullptr);
  if (u != nullptr) return py::reinterpret_steal<py::object>(u);
  PyErr_Clear();  // not UTF-8: hand the bytes over as they are
  return py::bytes(s);
}

// One output as a numpy array: the tensor's own memory when it holds it alone (kept alive by
// a capsule that owns a Tensor), else a copy.
py::array ToNumpy(Tensor t) {
  const DType dt = t.dtype();
  if (dt == DType::kString) {
    py::array out(py::dtype("O"), PyShape(t));
    auto** cells = static_cast<PyObject**>(out.mutable_data());
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      py::object s = StringToPy(t.data<std::string>()[i]);
      Py_XDECREF(cells[i]);
      cells[i] = s.release().ptr();
    }
    return out;
  }
  if (dt == DType::kInt4 || dt == DType::kUInt4) {  // unpacked, one value per byte
    py::array out(py::dtype(dt == DType::kInt4 ? "int8" : "uint8"), PyShape(t));
    auto* dst = static_cast<uint8_t*>(out.mutable_data());
    const auto* src = static_cast<const uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      uint8_t v = (src[i / 2] >> ((i % 2) * 4)) & 0xF;
      if (dt == DType::kInt4 && (v & 0x8)) v |= 0xF0;  // sign-extend
      dst[i] = v;
    }
    return out;
  }
  const char* name = NumpyName(dt);
  if (*name == '\0') RaiseError("UNIMPLEMENTED", std::string("no numpy type for output dtype ") + oneinfer::DTypeName(dt));
  if (t.num_elements() == 0) return py::array(py::dtype(name), PyShape(t));
  auto* owned = new Tensor(oneinfer::capi::OwnedOutput(std::move(t)));
  py::capsule base(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(py::dtype(name), PyShape(*owned), owned->raw_data(), base);
}

// A feed as a Tensor. Numeric arrays are viewed without a copy when C-contiguous and in native
// byte order, else copied into one that is; `keep` holds the arrays the views point into.
Tensor FromPy(const std::string& name, const py::handle& value, const oneinfer::IOInfo* declared,
              std::vector<py::object>* keep) {
  py::module_ np = py::module_::import("numpy");
  py::array arr = np.attr("asarray")(value);
  const char kind = arr.dtype().kind();
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  if (kind == 'U' || kind == 'S' || kind == 'O') {
    py::list flat = arr.attr("ravel")().attr("tolist")();
    Tensor t = Tensor::Empty(DType::kString, shape);
    for (size_t i = 0; i < flat.size(); ++i) {
      py::handle item = flat[i];
      if (py::isinstance<py::bytes>(item)) t.data<std::string>()[i] = item.cast<std::string>();
      else if (py::isinstance<py::str>(item)) t.data<std::string>()[i] = item.cast<std::string>();
      else throw py::type_error("input '" + name + "': a string tensor takes str or bytes elements, got " +
                                std::string(py::str(item.get_type().attr("__name__"))));
    }
    return t;
  }
  DType dt = FromNumpy(arr.dtype());
  if (dt == DType::kUndefined) {
    throw py::type_error("input '" + name + "': numpy dtype " + std::string(py::str(arr.dtype())) +
                         " has no oneinfer type");
  }
  if (dt == DType::kUInt16 && declared != nullptr && declared->dtype == DType::kBFloat16) dt = DType::kBFloat16;
  const bool native = arr.dtype().attr("isnative").cast<bool>();
  if (!native || !(arr.flags() & py::array::c_style)) {
    arr = np.attr("ascontiguousarray")(arr, arr.dtype().attr("newbyteorder")("="));
  }
  keep->push_back(arr);
  // Read-only arrays are fine: the engine never writes a feed.
  return Tensor::View(dt, std::move(shape), const_cast<void*>(arr.data()));
}

py::object DimToPy(const oneinfer::IOInfo& info, size_t d) {
  if (info.shape[d] >= 0) return py::int_(info.shape[d]);
  if (d < info.dim_params.size() && !info.dim_params[d].empty()) return py::str(info.dim_params[d]);
  return py::none();
}

struct PyIOInfo {
  std::string name;
  std::string dtype;
  py::object shape;  // list of int | str | None, or None when the rank is unknown
  bool is_tensor;
  bool has_default;
};

PyIOInfo ToPyInfo(const oneinfer::IOInfo& info) {
  PyIOInfo out{info.name, oneinfer::DTypeName(info.dtype), py::none(), info.is_tensor, info.has_default};
  if (info.has_shape) {
    py::list dims;
    for (size_t d = 0; d < info.shape.size(); ++d) dims.append(DimToPy(info, d));
    out.shape = dims;
  }
  return out;
}

class PySession {
 public:
  PySession(const py::object& model, int threads, const std::string& matmul, bool constant_folding,
            bool prepare_weights, bool qdq_fusion, bool weight_fusion, bool profile, const std::string& log_level) {
    oneinfer::SessionOptions o;
    if (threads < 0) throw py::value_error("threads must be >= 0");
    o.num_threads = threads;
    if (matmul == "float32") o.matmul = oneinfer::MatMulPrecision::kFloat32;
    else if (matmul == "int8") o.matmul = oneinfer::MatMulPrecision::kInt8;
    else throw py::value_error("matmul must be 'float32' or 'int8', got '" + matmul + "'");
    if (log_level == "error") o.log_level = oneinfer::LogLevel::kError;
    else if (log_level == "warning") o.log_level = oneinfer::LogLevel::kWarning;
    else if (log_level == "info") o.log_level = oneinfer::LogLevel::kInfo;
    else if (log_level == "verbose") o.log_level = oneinfer::LogLevel::kVerbose;
    else throw py::value_error("log_level must be 'error', 'warning', 'info' or 'verbose', got '" + log_level + "'");
    o.constant_folding = constant_folding;
    o.prepare_weights = prepare_weights;
    o.qdq_fusion = qdq_fusion;
    o.weight_fusion = weight_fusion;
    o.profile = profile;
    absl::StatusOr<std::unique_ptr<oneinfer::Session>> loaded;
    if (py::isinstance<py::bytes>(model)) {
      std::string bytes = model.cast<std::string>();
      py::gil_scoped_release nogil;
      loaded = oneinfer::Session::LoadFromBuffer(bytes.data(), bytes.size(), o);
    } else {
      std::string path = py::str(py::module_::import("os").attr("fspath")(model));
      py::gil_scoped_release nogil;
      loaded = oneinfer::Session::Load(path, o);
    }
    session_ = std::shared_ptr<oneinfer::Session>(Check(std::move(loaded)).release());
  }

  std::shared_ptr<oneinfer::Session> Get() const {
    if (!session_) RaiseError("FAILED_PRECONDITION", "the session is closed");
    return session_;
  }

  std::vector<PyIOInfo> Inputs() const {
    std::vector<PyIOInfo> out;
    for (const auto& i : Get()->inputs()) out.push_back(ToPyInfo(i));
    return out;
  }
  std::vector<PyIOInfo> Outputs() const {
    std::vector<PyIOInfo> out;
    for (const auto& i : Get()->outputs()) out.push_back(ToPyInfo(i));
    return out;
  }
  std::map<std::string, std::string> Metadata() const { return Get()->metadata(); }

  py::list Run(const py::dict& feeds, const std::optional<std::vector<std::string>>& output_names) const {
    std::shared_ptr<oneinfer::Session> s = Get();  // keeps the model alive across a concurrent close()
    std::vector<oneinfer::Feed> tensors;
    std::vector<py::object> keep;
    for (const auto& [key, value] : feeds) {
      if (!py::isinstance<py::str>(key)) throw py::type_error("feed names must be str");
      const std::string name = key.cast<std::string>();
      const oneinfer::IOInfo* declared = nullptr;
      for (const auto& i : s->inputs()) if (i.name == name) declared = &i;
      tensors.emplace_back(name, FromPy(name, value, declared, &keep));
    }
    std::vector<std::string> names = output_names.value_or(std::vector<std::string>{});
    absl::StatusOr<std::vector<Tensor>> result;
    {
      py::gil_scoped_release nogil;
      result = s->Run(tensors, names);
      tensors.clear();  // the run's references to the feeds go before outputs are checked for sharing
    }
    std::vector<Tensor> outs = Check(std::move(result));
    py::list list;
    for (Tensor& t : outs) list.append(ToNumpy(std::move(t)));
    return list;
  }

  void Close() { session_.reset(); }
  bool closed() const { return !session_; }

 private:
  std::shared_ptr<oneinfer::Session> session_;
};

class PyGenerator {
 public:
  explicit PyGenerator(const PySession& session) : session_(session.Get()) {
    generator_ = Check(oneinfer::Generator::Create(*session_));
  }

  int64_t vocab_size() const { return generator_->vocab_size(); }

  std::vector<int32_t> Generate(const std::vector<int32_t>& prompt, int max_new_tokens, float temperature, int top_k,
                                float top_p, uint64_t seed, const std::vector<int32_t>& stop_ids,
                                const std::optional<py::function>& callback) {
    if (max_new_tokens < 0) throw py::value_error("max_new_tokens must be >= 0");
    oneinfer::GenerateOptions o;
    o.max_new_tokens = max_new_tokens;
    o.sampling.temperature = temperature;
    o.sampling.top_k = top_k;
    o.sampling.top_p = top_p;
    o.sampling.seed = seed;
    o.stop_ids = stop_ids;
    std::optional<py::error_already_set> callback_error;
    oneinfer::TokenCallback on_token;
    if (callback) {
      on_token = [&](int32_t id, const float*, int64_t) {
        py::gil_scoped_acquire gil;
        try {
          py::object go_on = (*callback)(id);
          return go_on.is_none() || go_on.cast<bool>();
        } catch (py::error_already_set& e) {
          callback_error = std::move(e);
          return false;
        }
      };
    }
    absl::StatusOr<oneinfer::GenerationResult> r;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> one_sequence_at_a_time(mu_);
      r = generator_->Generate(prompt, o, on_token);
    }
    if (callback_error) throw std::move(*callback_error);
    return Check(std::move(r)).generated_ids;
  }

 private:
  std::shared_ptr<oneinfer::Session> session_;  // the generator refers to it
  std::unique_ptr<oneinfer::Generator> generator_;
  std::mutex mu_;
};

class PyTokenizer {
 public:
  explicit PyTokenizer(const py::object& path) {
    std::string p = py::str(py::module_::import("os").attr("fspath")(path));
    tokenizer_ = Check(oneinfer::Tokenizer::FromFile(p));
  }
  std::vector<int32_t> Encode(const std::string& text) const {
    py::gil_scoped_release nogil;
    return tokenizer_->Encode(text);
  }
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const {
    py::gil_scoped_release nogil;
    return tokenizer_->Decode(ids, skip_special);
  }
  std::optional<int32_t> TokenId(const std::string& token) const { return tokenizer_->TokenId(token); }
  int32_t vocab_size() const { return tokenizer_->vocab_size(); }

 private:
  std::unique_ptr<oneinfer::Tokenizer> tokenizer_;
};

std::string ApplyChatTemplate(const py::iterable& messages, bool add_generation_prompt) {
  std::vector<oneinfer::ChatMessage> chat;
  for (py::handle m : messages) {
    if (!py::isinstance<py::dict>(m)) throw py::type_error("each message must be a dict with 'role' and 'content'");
    py::dict d = py::reinterpret_borrow<py::dict>(m);
    if (!d.contains("role") || !d.contains("content")) throw py::value_error("a message lacks 'role' or 'content'");
    chat.push_back({d["role"].cast<std::string>(), d["content"].cast<std::string>()});
  }
  return oneinfer::FormatChatML(chat, add_generation_prompt);
}

// A model's own chat template (oneinfer::ChatTemplate); conversations cross as JSON text.
class PyChatTemplate {
 public:
  explicit PyChatTemplate(const std::string& tokenizer_config)
      : template_(Check(oneinfer::ChatTemplate::FromTokenizerConfig(tokenizer_config))) {}
  std::string Render(const std::string& messages_json, bool add_generation_prompt, const std::string& tools_json,
                     const std::string& extra_json) const {
    absl::StatusOr<std::string> text;
    {
      py::gil_scoped_release nogil;
      text = template_->RenderJson(messages_json, add_generation_prompt, tools_json, extra_json);
    }
    return Check(std::move(text));
  }

 private:
  std::unique_ptr<oneinfer::ChatTemplate> template_;
};

}  // namespace

PYBIND11_MODULE(_oneinfer, m) {
  m.doc() = "oneinfer's native module; use the `oneinfer` package.";
  g_error_type = py::object(py::module_::import("oneinfer._errors").attr("Error")).release().ptr();
  m.attr("Error") = py::handle(g_error_type);
  m.def("version", &oneinfer::VersionString);

  py::class_<PyIOInfo>(m, "IOInfo")
      .def_readonly("name", &PyIOInfo::name)
      .def_readonly("dtype", &PyIOInfo::dtype)
      .def_readonly("shape", &PyIOInfo::shape)
      .def_readonly("is_tensor", &PyIOInfo::is_tensor)
      .def_readonly("has_default", &PyIOInfo::has_default)
      .def("__repr__", [](const PyIOInfo& i) {
        return "IOInfo(name='" + i.name + "', dtype='" + i.dtype + "', shape=" + std::string(py::repr(i.shape)) + ")";
      });

  py::class_<PySession>(m, "Session")
      .def(py::init<const py::object&, int, const std::string&, bool, bool, bool, bool, bool, const std::string&>(),
           py::arg("model"), py::kw_only(), py::arg("threads") = 0, py::arg("matmul") = "float32",
           py::arg("constant_folding") = true, py::arg("prepare_weights") = true, py::arg("qdq_fusion") = true,
           py::arg("weight_fusion") = true, py::arg("profile") = false, py::arg("log_level") = "warning")
      .def_property_readonly("inputs", &PySession::Inputs)
      .def_property_readonly("outputs", &PySession::Outputs)
      .def_property_readonly("metadata", &PySession::Metadata)
      .def_property_readonly("closed", &PySession::closed)
      .def("run", &PySession::Run, py::arg("feeds"), py::arg("outputs") = py::none())
      .def("close", &PySession::Close);

  py::class_<PyGenerator>(m, "_Generator")
      .def(py::init<const PySession&>(), py::arg("session"))
      .def_property_readonly("vocab_size", &PyGenerator::vocab_size)
      .def("generate", &PyGenerator::Generate, py::arg("prompt_ids"), py::arg("max_new_tokens") = 32,
           py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f, py::arg("seed") = 0,
           py::arg("stop_ids") = std::vector<int32_t>{}, py::arg("callback") = py::none());

  py::class_<PyTokenizer>(m, "_Tokenizer")
      .def(py::init<const py::object&>(), py::arg("path"))
      .def("encode", &PyTokenizer::Encode, py::arg("text"))
      .def("decode", &PyTokenizer::Decode, py::arg("ids"), py::arg("skip_special") = false)
      .def("token_id", &PyTokenizer::TokenId, py::arg("token"))
      .def_property_readonly("vocab_size", &PyTokenizer::vocab_size);

  py::class_<PyChatTemplate>(m, "_ChatTemplate")
      .def(py::init<const std::string&>(), py::arg("tokenizer_config"))
      .def("render", &PyChatTemplate::Render, py::arg("messages_json"), py::arg("add_generation_prompt"),
           py::arg("tools_json"), py::arg("extra_json"));

  m.def("apply_chat_template", &ApplyChatTemplate, py::arg("messages"), py::arg("add_generation_prompt") = true);
}
