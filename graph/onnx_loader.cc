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
#include <new>
#include <optional>
#include <set>
#include <stdexcept>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "base/checked_math.h"
#include "base/model_path.h"
#include "graph/op_schema.h"

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

// Allocates a tensor whose size has been checked against the file; a machine that cannot hold it
// is an error naming the tensor, not an exception.
absl::StatusOr<Tensor> AllocateTensor(DType dtype, const Shape& shape, const std::string& name) {
  try {
    return Tensor::Empty(dtype, shape);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("tensor '", name, "': cannot allocate ", DTypeName(dtype),
                                                     ShapeToString(shape)));
  } catch (const std::length_error&) {
    return absl::ResourceExhaustedError(absl::StrCat("tensor '", name, "': cannot allocate ", DTypeName(dtype),
                                                     ShapeToString(shape)));
  }
}

// Copies typed-field values (int32_data etc.) element by element into a new tensor, once the
// field is known to hold exactly n values.
template <typename Dst, typename Field>
absl::StatusOr<Tensor> CopyField(const Field& field, int64_t n, DType dtype, const Shape& shape, const std::string& name) {
  if (static_cast<int64_t>(field.size()) != n) {
    return Invalid(absl::StrCat("tensor '", name, "' has ", field.size(), " values for ", n,
                                " elements of shape ", ShapeToString(shape)));
  }
  absl::StatusOr<Tensor> t = AllocateTensor(dtype, shape, name);
  if (!t.ok()) return t.status();
  Dst* dst = t->data<Dst>();
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(field.Get(static_cast<int>(i)));
  return t;
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
  const absl::StatusOr<int64_t> checked = CheckedByteSize(dtype, shape, absl::StrCat("tensor '", tensor_name, "'"));
  if (!checked.ok()) return checked.status();
  const int64_t needed = *checked;
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

namespace {

// ONNX's message schema, enough to count nesting levels as the protobuf parser does: which field
// of which message holds which submessage (kLeaf: a submessage with none of its own).
enum class Msg { kNone, kLeaf, kModel, kTraining, kFunction, kGraph, kNode, kAttribute, kValueInfo,
                 kTensor, kSparse, kAnnotation, kType, kTypeWrapper, kTensorType, kShape };

Msg ChildMessage(Msg parent, uint32_t field) {
  switch (parent) {
    case Msg::kModel:
      if (field == 7) return Msg::kGraph;
      if (field == 25) return Msg::kFunction;
      if (field == 20) return Msg::kTraining;
      return (field == 8 || field == 14) ? Msg::kLeaf : Msg::kNone;
    case Msg::kTraining: return (field == 1 || field == 2) ? Msg::kGraph : (field == 3 || field == 4) ? Msg::kLeaf : Msg::kNone;
    case Msg::kFunction: return field == 7 ? Msg::kNode : field == 11 ? Msg::kAttribute : field == 9 ? Msg::kLeaf : Msg::kNone;
    case Msg::kGraph:
      if (field == 1) return Msg::kNode;
      if (field == 5) return Msg::kTensor;
      if (field == 15) return Msg::kSparse;
      if (field == 14) return Msg::kAnnotation;
      return (field >= 11 && field <= 13) ? Msg::kValueInfo : Msg::kNone;
    case Msg::kNode: return field == 5 ? Msg::kAttribute : Msg::kNone;
    case Msg::kAttribute:
      if (field == 6 || field == 11) return Msg::kGraph;
      if (field == 5 || field == 10) return Msg::kTensor;
      if (field == 22 || field == 23) return Msg::kSparse;
      return (field == 14 || field == 15) ? Msg::kType : Msg::kNone;
    case Msg::kValueInfo: return field == 2 ? Msg::kType : Msg::kNone;
    case Msg::kTensor: return (field == 3 || field == 13) ? Msg::kLeaf : Msg::kNone;
    case Msg::kSparse: return (field == 1 || field == 2) ? Msg::kTensor : Msg::kNone;
    case Msg::kAnnotation: return field == 2 ? Msg::kLeaf : Msg::kNone;
    // tensor_type / sparse_tensor_type; sequence_type / map_type / optional_type wrap a TypeProto again.
    case Msg::kType: return (field == 1 || field == 8) ? Msg::kTensorType : (field == 4 || field == 5 || field == 9) ? Msg::kTypeWrapper : Msg::kNone;
    case Msg::kTypeWrapper: return (field == 1 || field == 2) ? Msg::kType : Msg::kNone;
    case Msg::kTensorType: return field == 2 ? Msg::kShape : Msg::kNone;
    case Msg::kShape: return field == 1 ? Msg::kLeaf : Msg::kNone;
    default: return Msg::kNone;
  }
}

struct Nesting {
  int messages = 0;  // deepest message nesting (the top-level ModelProto is 0)
  int graphs = 0;    // deepest subgraph nesting (the main graph is 0)
};

// Walks the wire format without recursion, so a parse failure can be told apart as "too deep"
// when the bytes are otherwise well formed.
std::optional<Nesting> ScanNesting(const uint8_t* data, size_t size) {
  struct Frame { const uint8_t* end; Msg kind; int graphs; };
  std::vector<Frame> stack{{data + size, Msg::kModel, -1}};
  const uint8_t* p = data;
  Nesting deepest;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= stack.back().end) return false;
      const uint8_t b = *p++;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (!stack.empty()) {
    if (p == stack.back().end) {
      stack.pop_back();
      continue;
    }
    uint64_t tag = 0, len = 0;
    if (!varint(&tag)) return std::nullopt;
    const uint64_t remaining = static_cast<uint64_t>(stack.back().end - p);
    switch (tag & 7) {
      case 0: if (!varint(&len)) return std::nullopt; break;
      case 1: if (remaining < 8) return std::nullopt; p += 8; break;
      case 5: if (remaining < 4) return std::nullopt; p += 4; break;
      case 2: {
        if (!varint(&len) || len > static_cast<uint64_t>(stack.back().end - p)) return std::nullopt;
        const Msg child = ChildMessage(stack.back().kind, static_cast<uint32_t>(tag >> 3));
        if (child == Msg::kNone) {
          p += len;
          break;
        }
        const int graphs = stack.back().graphs + (child == Msg::kGraph ? 1 : 0);
        stack.push_back({p + len, child, graphs});
        deepest.messages = std::max(deepest.messages, static_cast<int>(stack.size()) - 1);
        deepest.graphs = std::max(deepest.graphs, graphs);
        break;
      }
      default: return std::nullopt;  // groups are not used by ONNX
    }
  }
  return deepest;
}

}  // namespace

absl::Status ParseModelProto(const void* data, size_t size, onnx::ModelProto* proto) {
  if (size == 0) return Invalid("the file is empty (0 bytes), not an ONNX model");
  if (size > static_cast<size_t>(INT_MAX)) {
    return Invalid("model file is larger than 2 GB; keep weights in external data");
  }
  google::protobuf::io::ArrayInputStream raw(data, static_cast<int>(size));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  coded.SetRecursionLimit(kMaxMessageNesting);
  if (!proto->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    const std::optional<Nesting> nesting = ScanNesting(static_cast<const uint8_t*>(data), size);
    if (nesting && nesting->messages > kMaxMessageNesting) {
      return Invalid(absl::StrCat("the model nests messages ", nesting->messages, " levels deep (subgraphs ",
                                  nesting->graphs, " levels deep); the protobuf parser allows ",
                                  kMaxMessageNesting, " (each If/Loop/Scan subgraph takes 3)"));
    }
    return Invalid("not a valid ONNX model: the protobuf is truncated or malformed");
  }
  if (!proto->has_graph()) return Invalid("the ONNX model has no graph");
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
  // Sizes are checked before anything is allocated: the dims come from the file.
  const absl::StatusOr<int64_t> checked = CheckedByteSize(dtype, shape, absl::StrCat("tensor '", name, "'"));
  if (!checked.ok()) return checked.status();
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

  if (dtype == DType::kString) {
    if (p.string_data_size() != n) return Invalid(absl::StrCat("tensor '", name, "' has ", p.string_data_size(), " strings for ", n, " elements"));
    absl::StatusOr<Tensor> t = AllocateTensor(dtype, shape, name);
    if (!t.ok()) return t.status();
    for (int64_t i = 0; i < n; ++i) t->data<std::string>()[i] = p.string_data(static_cast<int>(i));
    return t;
  }
  if (p.has_raw_data()) {
    const size_t bytes = static_cast<size_t>(*checked);
    if (p.raw_data().size() != bytes) {
      return Invalid(absl::StrCat("tensor '", name, "' has ", p.raw_data().size(), " bytes of raw data for ", bytes,
                                  " bytes of ", DTypeName(dtype), ShapeToString(shape)));
    }
    absl::StatusOr<Tensor> t = AllocateTensor(dtype, shape, name);
    if (!t.ok()) return t.status();
    if (bytes) std::memcpy(t->raw_data(), p.raw_data().data(), bytes);
    return t;
  }
  switch (dtype) {
    case DType::kFloat32: return CopyField<float>(p.float_data(), n, dtype, shape, name);
    case DType::kFloat64: return CopyField<double>(p.double_data(), n, dtype, shape, name);
    case DType::kInt64: return CopyField<int64_t>(p.int64_data(), n, dtype, shape, name);
    case DType::kUInt64: return CopyField<uint64_t>(p.uint64_data(), n, dtype, shape, name);
    case DType::kUInt32: return CopyField<uint32_t>(p.uint64_data(), n, dtype, shape, name);
    case DType::kInt32: return CopyField<int32_t>(p.int32_data(), n, dtype, shape, name);
    case DType::kInt16: return CopyField<int16_t>(p.int32_data(), n, dtype, shape, name);
    // float16 and bfloat16 travel as their bit patterns in int32_data.
    case DType::kUInt16: case DType::kFloat16: case DType::kBFloat16:
      return CopyField<uint16_t>(p.int32_data(), n, dtype, shape, name);
    case DType::kInt8: return CopyField<int8_t>(p.int32_data(), n, dtype, shape, name);
    case DType::kUInt8: return CopyField<uint8_t>(p.int32_data(), n, dtype, shape, name);
    case DType::kBool: return CopyField<bool>(p.int32_data(), n, dtype, shape, name);
    case DType::kInt4: case DType::kUInt4: {
      // Packed two per int32 entry's low byte, as ONNX stores them.
      const int64_t bytes = *checked;
      if (p.int32_data_size() != bytes) return Invalid(absl::StrCat("tensor '", name, "' has ", p.int32_data_size(), " packed values for ", n, " 4-bit elements"));
      absl::StatusOr<Tensor> t = AllocateTensor(dtype, shape, name);
      if (!t.ok()) return t.status();
      for (int64_t i = 0; i < bytes; ++i) t->data<uint8_t>()[i] = static_cast<uint8_t>(p.int32_data(static_cast<int>(i)));
      return t;
    }
    default:
      return absl::UnimplementedError(absl::StrCat("tensor '", name, "': cannot read ", DTypeName(dtype)));
  }
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

absl::StatusOr<Value> ValueFromSequenceProto(const onnx::SequenceProto& sp) {
  if (sp.sequence_values_size() > 0 || sp.map_values_size() > 0 || sp.optional_values_size() > 0 ||
      sp.sparse_tensor_values_size() > 0) {
    return absl::UnimplementedError("sequences of sequences, maps, optionals or sparse tensors are not supported");
  }
  std::vector<Tensor> items;
  for (const auto& tp : sp.tensor_values()) {
    auto t = TensorFromProto(tp, nullptr);
    if (!t.ok()) return t.status();
    items.push_back(*t);
  }
  const DType dtype = items.empty() ? DType::kUndefined : items[0].dtype();
  return Value::FromSequence(std::move(items), dtype);
}

absl::StatusOr<Value> ValueFromOptionalProto(const onnx::OptionalProto& op) {
  if (op.has_tensor_value()) {
    auto t = TensorFromProto(op.tensor_value(), nullptr);
    if (!t.ok()) return t.status();
    return Value::FromTensor(*t);
  }
  if (op.has_sequence_value()) return ValueFromSequenceProto(op.sequence_value());
  if (op.has_sparse_tensor_value() || op.has_map_value() || op.has_optional_value()) {
    return absl::UnimplementedError("optionals of maps, optionals or sparse tensors are not supported");
  }
  return Value::None();
}

absl::Status ValueToSequenceProto(const Value& v, const std::string& name, onnx::SequenceProto* sp) {
  if (!v.is_sequence()) return Invalid(absl::StrCat("value '", name, "' is not a sequence"));
  sp->Clear();
  sp->set_name(name);
  sp->set_elem_type(onnx::SequenceProto::TENSOR);
  for (const Tensor& t : v.sequence) {
    if (auto s = TensorToProto(t, "", sp->add_tensor_values()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValueToOptionalProto(const Value& v, const std::string& name, onnx::OptionalProto* op) {
  op->Clear();
  op->set_name(name);
  if (v.is_tensor()) {
    op->set_elem_type(onnx::OptionalProto::TENSOR);
    return TensorToProto(v.tensor, "", op->mutable_tensor_value());
  }
  if (v.is_sequence()) {
    op->set_elem_type(onnx::OptionalProto::SEQUENCE);
    return ValueToSequenceProto(v, "", op->mutable_sequence_value());
  }
  return absl::OkStatus();  // an empty optional: no value, elem_type UNDEFINED
}

absl::StatusOr<Value> ParseValue(const std::string& bytes, const TypeInfo& type, std::string* name) {
  if (type.kind == TypeInfo::Kind::kSequence) {
    onnx::SequenceProto sp;
    if (!sp.ParseFromString(bytes)) return Invalid("not a serialized SequenceProto (the value is a sequence)");
    if (name) *name = sp.name();
    return ValueFromSequenceProto(sp);
  }
  if (type.kind == TypeInfo::Kind::kOptional) {
    onnx::OptionalProto op;
    if (!op.ParseFromString(bytes)) return Invalid("not a serialized OptionalProto (the value is an optional)");
    if (name) *name = op.name();
    return ValueFromOptionalProto(op);
  }
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes)) return Invalid("not a serialized TensorProto");
  if (name) *name = tp.name();
  auto t = TensorFromProto(tp, nullptr);
  if (!t.ok()) return t.status();
  return Value::FromTensor(*t);
}

namespace {

class GraphConverter {
 public:
  explicit GraphConverter(ExternalDataResolver* resolver) : resolver_(resolver) {}

  // consumed (optional): gp itself, whose initializers' bytes are freed as each is converted.
  absl::Status Convert(const onnx::GraphProto& gp, const std::map<std::string, int64_t>& opsets, Graph* g,
                       onnx::GraphProto* consumed = nullptr);

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
  const std::string& name = sp.values().name();
  const absl::StatusOr<int64_t> checked = CheckedByteSize(values->dtype(), shape, absl::StrCat("sparse tensor '", name, "'"));
  if (!checked.ok()) return checked.status();
  if (indices->dtype() != DType::kInt64) return Invalid("sparse tensor indices must be int64");
  absl::StatusOr<Tensor> allocated = AllocateTensor(values->dtype(), shape, name);
  if (!allocated.ok()) return allocated.status();
  Tensor dense = *std::move(allocated);
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
  const int64_t per_value = linear ? 1 : static_cast<int64_t>(shape.size());
  if (indices->num_elements() != nnz * per_value) {
    return Invalid(absl::StrCat("sparse tensor '", name, "' has ", indices->num_elements(), " indices for ", nnz, " values"));
  }
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
                                     Graph* g, onnx::GraphProto* consumed) {
  g->name = gp.name();
  g->opsets = opsets;
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const onnx::TensorProto& tp = gp.initializer(i);
    if (tp.name().empty()) return Invalid("an initializer has no name");
    auto t = TensorFromProto(tp, resolver_);
    if (!t.ok()) return t.status();
    g->initializers[tp.name()] = *t;
    // The proto's bytes go once the tensor has its own: a file with inline weights would
    // otherwise hold them twice until the load ends.
    if (consumed != nullptr) std::string().swap(*consumed->mutable_initializer(i)->mutable_raw_data());
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
    // Inputs, outputs and attributes against the operator's signature, before anything reads them.
    const auto opset = opsets.find(n.domain);
    if (absl::Status s = CheckNodeSignature(n, opset == opsets.end() ? -1 : opset->second); !s.ok()) return s;
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

namespace {

// consumed: mp itself, whose initializer bytes may be freed while converting (ModelFromProto's
// rvalue form), or null.
absl::StatusOr<std::unique_ptr<Model>> ConvertModel(const onnx::ModelProto& mp, const std::string& base_dir,
                                                    onnx::ModelProto* consumed) {
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
  auto s = conv.Convert(mp.graph(), opsets, &model->graph, consumed != nullptr ? consumed->mutable_graph() : nullptr);
  if (!s.ok()) return s;
  return model;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> ModelFromProto(const onnx::ModelProto& mp, const std::string& base_dir) {
  return ConvertModel(mp, base_dir, nullptr);
}

absl::StatusOr<std::unique_ptr<Model>> ModelFromProto(onnx::ModelProto&& mp, const std::string& base_dir) {
  return ConvertModel(mp, base_dir, &mp);
}

absl::StatusOr<std::unique_ptr<Model>> LoadModelFromBuffer(const void* data, size_t size, const std::string& base_dir) {
  onnx::ModelProto mp;
  auto s = ParseModelProto(data, size, &mp);
  if (!s.ok()) return s;
  return ModelFromProto(std::move(mp), base_dir);
}

absl::StatusOr<std::unique_ptr<Model>> LoadModelFromFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open model '", path, "'"));
  const std::streamsize size = f.tellg();
  if (size < 0) return absl::NotFoundError(absl::StrCat("cannot read model '", path, "'"));
  if (fs::is_directory(path)) return Invalid(absl::StrCat("'", path, "' is a folder, not a model file"));
  fs::path dir = fs::path(path).parent_path();
  // The file's bytes, the parsed proto and the converted tensors are each as large as the inline
  // weights: the bytes go after the parse and each initializer's proto bytes once converted, so a
  // 1 GB file with inline weights peaks near two copies, not three.
  onnx::ModelProto mp;
  absl::Status parsed;
  {
    std::string buf(static_cast<size_t>(size), '\0');
    f.seekg(0);
    if (!f.read(buf.data(), size)) return absl::DataLossError(absl::StrCat("cannot read model '", path, "'"));
    parsed = ParseModelProto(buf.data(), buf.size(), &mp);
  }
  absl::StatusOr<std::unique_ptr<Model>> model =
      parsed.ok() ? ModelFromProto(std::move(mp), dir.empty() ? "." : dir.string()) : parsed;
  if (!model.ok()) {
    return absl::Status(model.status().code(), absl::StrCat("model '", path, "': ", model.status().message()));
  }
  (*model)->path = path;
  return model;
}

}  // namespace oneinfer
