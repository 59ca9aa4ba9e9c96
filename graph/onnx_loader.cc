#include "graph/onnx_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "base/model_path.h"

namespace oneinfer {

namespace fs = std::filesystem;

namespace {

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(what); }

bool IsKnownDType(int32_t t) {
  switch (static_cast<DType>(t)) {
    case DType::kFloat32: case DType::kUInt8: case DType::kInt8: case DType::kUInt16:
    case DType::kInt16: case DType::kInt32: case DType::kInt64: case DType::kString:
    case DType::kBool: case DType::kFloat16: case DType::kFloat64: case DType::kUInt32:
    case DType::kUInt64: case DType::kBFloat16: case DType::kUInt4: case DType::kInt4:
      return true;
    default:
      return false;
  }
}

// Copies typed-field values (int32_data etc.) into dst element by element.
template <typename Dst, typename Field>
absl::Status CopyField(const Field& field, int64_t n, Tensor& t, const std::string& name) {
  if (static_cast<int64_t>(field.size()) != n) {
    return Invalid(absl::StrCat("tensor '", name, "' has ", field.size(), " values for ", n,
                                " elements of shape ", ShapeToString(t.shape())));
  }
  Dst* dst = t.data<Dst>();
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(field.Get(static_cast<int>(i)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> ExternalDataResolver::Map(const std::string& tensor_name,
                                                 const std::string& location, int64_t offset,
                                                 int64_t length, DType dtype, const Shape& shape) {
  absl::StatusOr<std::string> full =
      ResolveInsideModelDir(base_dir_, location, absl::StrCat("tensor '", tensor_name, "': external data location"));
  if (!full.ok()) return full.status();
  const std::string& key = *full;
  auto it = mappings_.find(key);
  if (it == mappings_.end()) {
    absl::StatusOr<std::shared_ptr<MappedFile>> mapped = MappedFile::Open(key);
    if (!mapped.ok()) {
      return absl::Status(mapped.status().code(),
                          absl::StrCat("tensor '", tensor_name, "': external data '", location, "': ", mapped.status().message()));
    }
    it = mappings_.emplace(key, *std::move(mapped)).first;
  }
  const std::shared_ptr<MappedFile>& mapping = it->second;
  const size_t file_size = mapping->size();
  const int64_t needed = static_cast<int64_t>(StorageBytes(dtype, NumElements(shape)));
  if (length < 0) length = static_cast<int64_t>(file_size) - offset;
  if (offset < 0 || length < 0 || static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) > file_size) {
    return Invalid(absl::StrCat("tensor '", tensor_name, "': external data offset ", offset, " + length ",
                                length, " passes the end of '", location, "' (", file_size, " bytes)"));
  }
  if (length != needed) {
    return Invalid(absl::StrCat("tensor '", tensor_name, "': external data length ", length,
                                " does not match ", needed, " bytes of ", DTypeName(dtype),
                                ShapeToString(shape)));
  }
  void* data = const_cast<uint8_t*>(mapping->data()) + offset;
  return Tensor::Wrap(dtype, shape, mapping, data);
}

absl::Status ParseModelProto(const void* data, size_t size, onnx::ModelProto* proto) {
  if (size > static_cast<size_t>(INT_MAX)) {
    return Invalid("model file is larger than 2 GB; keep weights in external data");
  }
  google::protobuf::io::ArrayInputStream raw(data, static_cast<int>(size));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!proto->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    return Invalid("not a valid ONNX model: the protobuf is truncated or malformed");
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& p, ExternalDataResolver* resolver) {
  const std::string& name = p.name();
  if (!IsKnownDType(p.data_type())) {
    return absl::UnimplementedError(absl::StrCat("tensor '", name, "' has unsupported data type ", p.data_type()));
  }
  if (p.has_segment()) return absl::UnimplementedError(absl::StrCat("tensor '", name, "' uses segments"));
  const DType dtype = static_cast<DType>(p.data_type());
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape) {
    if (d < 0) return Invalid(absl::StrCat("tensor '", name, "' has a negative dimension"));
  }
  const int64_t n = NumElements(shape);

  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    if (resolver == nullptr) return Invalid(absl::StrCat("tensor '", name, "' uses external data where none is allowed"));
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : p.external_data()) {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset" || kv.key() == "length") {
        int64_t v = 0;
        try {
          v = std::stoll(kv.value());
        } catch (...) {
          return Invalid(absl::StrCat("tensor '", name, "': external data ", kv.key(), " '", kv.value(), "' is not a number"));
        }
        (kv.key() == "offset" ? offset : length) = v;
      }
    }
    if (dtype == DType::kString) return Invalid(absl::StrCat("tensor '", name, "': string tensors cannot be external"));
    return resolver->Map(name, location, offset, length, dtype, shape);
  }

  Tensor t = Tensor::Empty(dtype, shape);
  if (dtype == DType::kString) {
    if (p.string_data_size() != n) return Invalid(absl::StrCat("tensor '", name, "' has ", p.string_data_size(), " strings for ", n, " elements"));
    for (int64_t i = 0; i < n; ++i) t.data<std::string>()[i] = p.string_data(static_cast<int>(i));
    return t;
  }
  if (p.has_raw_data()) {
    const size_t bytes = StorageBytes(dtype, n);
    if (p.raw_data().size() != bytes) {
      return Invalid(absl::StrCat("tensor '", name, "' has ", p.raw_data().size(), " bytes of raw data for ", bytes,
                                  " bytes of ", DTypeName(dtype), ShapeToString(shape)));
    }
    if (bytes) std::memcpy(t.raw_data(), p.raw_data().data(), bytes);
    return t;
  }
  absl::Status copied;
  switch (dtype) {
    case DType::kFloat32: copied = CopyField<float>(p.float_data(), n, t, name); break;
    case DType::kFloat64: copied = CopyField<double>(p.double_data(), n, t, name); break;
    case DType::kInt64: copied = CopyField<int64_t>(p.int64_data(), n, t, name); break;
    case DType::kUInt64: copied = CopyField<uint64_t>(p.uint64_data(), n, t, name); break;
    case DType::kUInt32: copied = CopyField<uint32_t>(p.uint64_data(), n, t, name); break;
    case DType::kInt32: copied = CopyField<int32_t>(p.int32_data(), n, t, name); break;
    case DType::kInt16: copied = CopyField<int16_t>(p.int32_data(), n, t, name); break;
    // float16 and bfloat16 travel as their bit patterns in int32_data.
    case DType::kUInt16: case DType::kFloat16: case DType::kBFloat16:
      copied = CopyField<uint16_t>(p.int32_data(), n, t, name); break;
    case DType::kInt8: copied = CopyField<int8_t>(p.int32_data(), n, t, name); break;
    case DType::kUInt8: copied = CopyField<uint8_t>(p.int32_data(), n, t, name); break;
    case DType::kBool: copied = CopyField<bool>(p.int32_data(), n, t, name); break;
    case DType::kInt4: case DType::kUInt4: {
      // Packed two per int32 entry's low byte, as ONNX stores them.
      const int64_t bytes = static_cast<int64_t>(StorageBytes(dtype, n));
      if (p.int32_data_size() != bytes) return Invalid(absl::StrCat("tensor '", name, "' has ", p.int32_data_size(), " packed values for ", n, " 4-bit elements"));
      for (int64_t i = 0; i < bytes; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(p.int32_data(static_cast<int>(i)));
      return t;
    }
    default:
      return absl::UnimplementedError(absl::StrCat("tensor '", name, "': cannot read ", DTypeName(dtype)));
  }
  if (!copied.ok()) return copied;
  return t;
}

absl::Status TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->Clear();
  p->set_name(name);
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  if (t.dtype() == DType::kString) {
    for (int64_t i = 0; i < t.num_elements(); ++i) p->add_string_data(t.data<std::string>()[i]);
  } else {
    p->set_raw_data(t.raw_data(), t.byte_size());
  }
  return absl::OkStatus();
}

absl::StatusOr<TypeInfo> TypeFromProto(const onnx::TypeProto& tp) {
  TypeInfo info;
  if (tp.has_tensor_type()) {
    info.kind = TypeInfo::Kind::kTensor;
    info.elem = static_cast<DType>(tp.tensor_type().elem_type());
    if (tp.tensor_type().has_shape()) {
      std::vector<Dim> dims;
      for (const auto& d : tp.tensor_type().shape().dim()) {
        Dim dim;
        if (d.has_dim_value()) dim.value = d.dim_value();
        else if (d.has_dim_param()) dim.param = d.dim_param();
        dims.push_back(dim);
      }
      info.shape = dims;
    }
  } else if (tp.has_sequence_type()) {
    info.kind = TypeInfo::Kind::kSequence;
    auto inner = TypeFromProto(tp.sequence_type().elem_type());
    if (!inner.ok()) return inner.status();
    info.inner = std::make_shared<TypeInfo>(*inner);
  } else if (tp.has_optional_type()) {
    info.kind = TypeInfo::Kind::kOptional;
    auto inner = TypeFromProto(tp.optional_type().elem_type());
    if (!inner.ok()) return inner.status();
    info.inner = std::make_shared<TypeInfo>(*inner);
  } else if (tp.has_sparse_tensor_type()) {
    return absl::UnimplementedError("sparse tensor values are not supported");
  }
  return info;
}

namespace {

class GraphConverter {
 public:
  explicit GraphConverter(ExternalDataResolver* resolver) : resolver_(resolver) {}

  absl::Status Convert(const onnx::GraphProto& gp, const std::map<std::string, int64_t>& opsets, Graph* g);

 private:
  absl::Status ConvertAttribute(const onnx::AttributeProto& ap, const std::map<std::string, int64_t>& opsets,
                                Attribute* a);
  absl::Status ConvertValueInfo(const onnx::ValueInfoProto& vp, ValueInfo* v);
  absl::StatusOr<Tensor> SparseToDense(const onnx::SparseTensorProto& sp);
  ExternalDataResolver* resolver_;
};

absl::Status GraphConverter::ConvertValueInfo(const onnx::ValueInfoProto& vp, ValueInfo* v) {
  v->name = vp.name();
  if (vp.has_type()) {
    auto t = TypeFromProto(vp.type());
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat("value '", vp.name(), "': ", t.status().message()));
    v->type = *t;
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> GraphConverter::SparseToDense(const onnx::SparseTensorProto& sp) {
  auto values = TensorFromProto(sp.values(), resolver_);
  if (!values.ok()) return values.status();
  auto indices = TensorFromProto(sp.indices(), resolver_);
  if (!indices.ok()) return indices.status();
  Shape shape(sp.dims().begin(), sp.dims().end());
  Tensor dense = Tensor::Empty(values->dtype(), shape);
  if (indices->dtype() != DType::kInt64) return Invalid("sparse tensor indices must be int64");
  const int64_t nnz = values->num_elements();
  const int64_t total = NumElements(shape);
  const size_t es = DTypeSize(values->dtype());
  const int64_t* idx = indices->data<int64_t>();
  const std::vector<int64_t> strides = [&] {
    std::vector<int64_t> s(shape.size(), 1);
    for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
    return s;
  }();
  const bool linear = indices->rank() == 1;
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t off = 0;
    if (linear) off = idx[k];
    else for (size_t d = 0; d < shape.size(); ++d) off += idx[k * static_cast<int64_t>(shape.size()) + d] * strides[d];
    if (off < 0 || off >= total) return Invalid("sparse tensor index out of range");
    if (values->dtype() == DType::kString) dense.data<std::string>()[off] = values->data<std::string>()[k];
    else std::memcpy(static_cast<char*>(dense.raw_data()) + off * es, static_cast<const char*>(values->raw_data()) + k * es, es);
  }
  return dense;
}

absl::Status GraphConverter::ConvertAttribute(const onnx::AttributeProto& ap,
                                              const std::map<std::string, int64_t>& opsets, Attribute* a) {
  a->name = ap.name();
  if (!ap.ref_attr_name().empty()) {
    return absl::UnimplementedError(absl::StrCat("attribute '", ap.name(), "' refers to a function attribute"));
  }
  using AP = onnx::AttributeProto;
  switch (ap.type()) {
    case AP::FLOAT: a->type = Attribute::Type::kFloat; a->f = ap.f(); break;
    case AP::INT: a->type = Attribute::Type::kInt; a->i = ap.i(); break;
    case AP::STRING: a->type = Attribute::Type::kString; a->s = ap.s(); break;
    case AP::FLOATS: a->type = Attribute::Type::kFloats; a->floats.assign(ap.floats().begin(), ap.floats().end()); break;
    case AP::INTS: a->type = Attribute::Type::kInts; a->ints.assign(ap.ints().begin(), ap.ints().end()); break;
    case AP::STRINGS: a->type = Attribute::Type::kStrings; a->strings.assign(ap.strings().begin(), ap.strings().end()); break;
    case AP::TENSOR: {
      a->type = Attribute::Type::kTensor;
      auto t = TensorFromProto(ap.t(), resolver_);
      if (!t.ok()) return t.status();
      a->t = *t;
      break;
    }
    case AP::TENSORS: {
      a->type = Attribute::Type::kTensors;
      for (const auto& tp : ap.tensors()) {
        auto t = TensorFromProto(tp, resolver_);
        if (!t.ok()) return t.status();
        a->tensors.push_back(*t);
      }
      break;
    }
    case AP::SPARSE_TENSOR: {
      a->type = Attribute::Type::kSparseTensor;
      auto t = SparseToDense(ap.sparse_tensor());
      if (!t.ok()) return t.status();
      a->t = *t;
      break;
    }
    case AP::GRAPH: {
      a->type = Attribute::Type::kGraph;
      a->g = std::make_shared<Graph>();
      auto s = Convert(ap.g(), opsets, a->g.get());
      if (!s.ok()) return s;
      break;
    }
    case AP::GRAPHS: {
      a->type = Attribute::Type::kGraphs;
      for (const auto& gp : ap.graphs()) {
        auto g = std::make_shared<Graph>();
        auto s = Convert(gp, opsets, g.get());
        if (!s.ok()) return s;
        a->graphs.push_back(g);
      }
      break;
    }
    case AP::TYPE_PROTO: {
      a->type = Attribute::Type::kTypeProto;
      auto t = TypeFromProto(ap.tp());
      if (!t.ok()) return t.status();
      a->tp = *t;
      break;
    }
    default:
      return absl::UnimplementedError(absl::StrCat("attribute '", ap.name(), "' has unsupported type ", ap.type()));
  }
  return absl::OkStatus();
}

// Constant's value_* attribute forms -> one tensor.
absl::StatusOr<Tensor> ConstantValue(const Node& n) {
  if (n.attrs.size() != 1) return Invalid(absl::StrCat(n.Describe(), ": Constant needs exactly one value attribute"));
  const Attribute& a = n.attrs.begin()->second;
  const std::string& k = a.name;
  if (k == "value" || k == "sparse_value") return a.t;
  if (k == "value_float") return Tensor::FromVector<float>(DType::kFloat32, {}, {a.f});
  if (k == "value_floats") return Tensor::FromVector<float>(DType::kFloat32, {static_cast<int64_t>(a.floats.size())}, a.floats);
  if (k == "value_int") return Tensor::FromVector<int64_t>(DType::kInt64, {}, {a.i});
  if (k == "value_ints") return Tensor::FromVector<int64_t>(DType::kInt64, {static_cast<int64_t>(a.ints.size())}, a.ints);
  if (k == "value_string") return Tensor::FromVector<std::string>(DType::kString, {}, {a.s});
  if (k == "value_strings") return Tensor::FromVector<std::string>(DType::kString, {static_cast<int64_t>(a.strings.size())}, a.strings);
  return Invalid(absl::StrCat(n.Describe(), ": unknown Constant attribute '", k, "'"));
}

absl::Status GraphConverter::Convert(const onnx::GraphProto& gp, const std::map<std::string, int64_t>& opsets,
                                     Graph* g) {
  g->name = gp.name();
  g->opsets = opsets;
  for (const auto& tp : gp.initializer()) {
    if (tp.name().empty()) return Invalid("an initializer has no name");
    auto t = TensorFromProto(tp, resolver_);
    if (!t.ok()) return t.status();
    g->initializers[tp.name()] = *t;
  }
  for (const auto& sp : gp.sparse_initializer()) {
    auto t = SparseToDense(sp);
    if (!t.ok()) return t.status();
    g->initializers[sp.values().name()] = *t;
  }
  for (const auto& vp : gp.input()) {
    ValueInfo v;
    auto s = ConvertValueInfo(vp, &v);
    if (!s.ok()) return s;
    g->inputs.push_back(v);
  }
  for (const auto& vp : gp.output()) {
    ValueInfo v;
    auto s = ConvertValueInfo(vp, &v);
    if (!s.ok()) return s;
    g->outputs.push_back(v);
  }
  for (const auto& vp : gp.value_info()) {
    ValueInfo v;
    auto s = ConvertValueInfo(vp, &v);
    if (!s.ok()) return s;
    g->value_info[v.name] = v;
  }
  for (const auto& np : gp.node()) {
    Node n;
    n.name = np.name();
    n.op_type = np.op_type();
    n.domain = CanonicalDomain(np.domain());
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& ap : np.attribute()) {
      Attribute a;
      auto s = ConvertAttribute(ap, opsets, &a);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat(n.Describe(), ": ", s.message()));
      n.attrs[a.name] = std::move(a);
    }
    if (n.op_type == "Constant" && n.domain.empty() && n.outputs.size() == 1) {
      // Constants become initializers: they are values, not work.
      auto t = ConstantValue(n);
      if (!t.ok()) return t.status();
      g->initializers[n.outputs[0]] = *t;
      continue;
    }
    g->nodes.push_back(std::move(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> ModelFromProto(const onnx::ModelProto& mp, const std::string& base_dir) {
  auto model = std::make_unique<Model>();
  model->ir_version = mp.ir_version();
  model->producer = mp.producer_name();
  model->base_dir = base_dir;
  for (const auto& kv : mp.metadata_props()) model->metadata[kv.key()] = kv.value();
  std::map<std::string, int64_t> opsets;
  for (const auto& o : mp.opset_import()) opsets[CanonicalDomain(o.domain())] = o.version();
  if (mp.opset_import_size() == 0) opsets[""] = 1;  // IR v1-2 models default to opset 1
  if (mp.functions_size() > 0) {
    std::set<std::string> fnames;
    for (const auto& f : mp.functions()) fnames.insert(f.domain() + ":" + f.name());
    for (const auto& n : mp.graph().node()) {
      if (fnames.count(n.domain() + ":" + n.op_type())) {
        return absl::UnimplementedError(absl::StrCat("node ", n.op_type(), " calls a model-local function; local functions are not supported"));
      }
    }
  }
  ExternalDataResolver resolver(base_dir);
  GraphConverter conv(&resolver);
  auto s = conv.Convert(mp.graph(), opsets, &model->graph);
  if (!s.ok()) return s;
  return model;
}

absl::StatusOr<std::unique_ptr<Model>> LoadModelFromBuffer(const void* data, size_t size, const std::string& base_dir) {
  onnx::ModelProto mp;
  auto s = ParseModelProto(data, size, &mp);
  if (!s.ok()) return s;
  return ModelFromProto(mp, base_dir);
}

absl::StatusOr<std::unique_ptr<Model>> LoadModelFromFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open model '", path, "'"));
  const std::streamsize size = f.tellg();
  if (size < 0) return absl::NotFoundError(absl::StrCat("cannot read model '", path, "'"));
  if (fs::is_directory(path)) return Invalid(absl::StrCat("'", path, "' is a folder, not a model file"));
  std::string buf(static_cast<size_t>(size), '\0');
  f.seekg(0);
  if (!f.read(buf.data(), size)) return absl::DataLossError(absl::StrCat("cannot read model '", path, "'"));
  fs::path dir = fs::path(path).parent_path();
  auto model = LoadModelFromBuffer(buf.data(), buf.size(), dir.empty() ? "." : dir.string());
  if (!model.ok()) {
    return absl::Status(model.status().code(), absl::StrCat("model '", path, "': ", model.status().message()));
  }
  (*model)->path = path;
  return model;
}

}  // namespace oneinfer
