// oneinfer inspect: what a model is made of, before running it.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "engine/q4nx_binding.h"
#include "graph/onnx_loader.h"
#include "graph/passes/passes.h"
#include "ops/gemm/sgemm.h"
#include "ops/matmul.h"
#include "quant/gemm_q4.h"
#include "quant/gemm_s8.h"
#include "tools/cli.h"
#include "tools/env_options.h"

namespace oneinfer::cli {

namespace {
constexpr const char* kHelp =
    "usage: oneinfer inspect MODEL.onnx [--matmul float|int8]\n"
    "\n"
    "Prints the opset imports, an operator histogram, the graph inputs and outputs with their\n"
    "shapes, initializer bytes (inline and external data), and a census of MatMul nodes by\n"
    "weight shape (K, N) for MatMuls whose second operand is a constant, with the kernel each\n"
    "is bound to under --matmul (float: the packed float GEMM; int8: dynamic A8W8), and the\n"
    "QDQ MatMul groups (DequantizeLinear -> MatMul [-> QuantizeLinear]) the session fuses into\n"
    "one int8 node, by form, with the reasons the other MatMuls are not fused.\n";

std::string Human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  std::ostringstream os;
  os.precision(u ? 1 : 0);
  os << std::fixed << bytes << " " << units[u];
  return os.str();
}

void CountOps(const Graph& g, std::map<std::string, int>& hist) {
  for (const Node& n : g.nodes) {
    hist[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type]++;
    for (const auto& [name, a] : n.attrs) {
      if (a.g) CountOps(*a.g, hist);
      for (const auto& sg : a.graphs) CountOps(*sg, hist);
    }
  }
}
}  // namespace

int CmdInspect(int argc, char** argv) {
  Args args(argc, argv, 2);
  if (args.TakeFlag("--help", "-h")) {
    std::cout << kHelp << EnvironmentHelp();
    return 0;
  }
  std::string matmul;
  args.Take("--matmul", &matmul);
  MatMulPrecision precision = MatMulPrecision::kFloat32;
  if (auto s = ParseMatMulFlag(matmul, &precision); !s.ok()) return Fail(s);
  // What a session would run with: the QDQ fusion may be switched off (ONEINFER_QDQ=0).
  SessionOptions run_options;
  if (auto s = ApplySessionEnvironment(&run_options); !s.ok()) return Fail(s);
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (pos.size() != 1) return Fail("inspect needs exactly one MODEL.onnx (see oneinfer inspect --help)");
  auto model = LoadModelFromFile(pos[0]);
  if (!model.ok()) return Fail(model.status());
  // A model with a Q4NX weight file is bound as a session binds it (its errors included).
  int q4nx_bound = -1;
  if ((*model)->metadata.count(kQ4NXWeightsKey) != 0) {
    if (auto s = BindQ4NXWeightFile(**model); !s.ok()) return Fail(s);
    q4nx_bound = 0;
    for (const Node& n : (*model)->graph.nodes) q4nx_bound += n.op_type == "MatMulQ4NX" ? 1 : 0;
  }
  const Graph& g = (*model)->graph;

  std::cout << "model: " << pos[0] << "\n";
  std::cout << "ir_version: " << (*model)->ir_version << "  producer: " << (*model)->producer << "\n";
  std::cout << "opsets:";
  for (const auto& [d, v] : g.opsets) std::cout << " " << (d.empty() ? "ai.onnx" : d) << "=" << v;
  std::cout << "\n\ninputs:\n";
  for (const ValueInfo& v : g.inputs) {
    if (!g.IsInitializer(v.name)) std::cout << "  " << v.name << "  " << v.type.ToString() << "\n";
  }
  std::cout << "outputs:\n";
  for (const ValueInfo& v : g.outputs) std::cout << "  " << v.name << "  " << v.type.ToString() << "\n";

  std::map<std::string, int> hist;
  CountOps(g, hist);
  int total = 0;
  for (const auto& [op, n] : hist) total += n;
  std::cout << "\noperators (" << total << " nodes, Constant nodes folded into initializers):\n";
  for (const auto& [op, n] : hist) std::cout << "  " << op << " " << n << "\n";

  // External tensors view the mapped file; inline ones own a heap copy.
  size_t inline_bytes = 0, external_bytes = 0, count = 0;
  for (const auto& [name, t] : g.initializers) {
    ++count;
    (t.holder() && t.holder().get() != t.raw_data() ? external_bytes : inline_bytes) += t.byte_size();
  }
  std::cout << "\ninitializers: " << count << ", inline " << Human(static_cast<double>(inline_bytes)) << " ("
            << inline_bytes << " bytes), external " << Human(static_cast<double>(external_bytes)) << " ("
            << external_bytes << " bytes)\n";

  if (q4nx_bound >= 0) {
    std::cout << "\nQ4NX weights ('" << (*model)->metadata.at(kQ4NXWeightsKey) << "'): " << q4nx_bound
              << " MatMuls read q4_1 weights, bound to the 4-bit GEMM (" << Q4TierName() << ")\n";
  }

  // The binding table, as the session would build it.
  std::map<std::pair<int64_t, int64_t>, std::pair<int, MatMulBinding>> census;
  int dynamic = 0, matmuls = 0, bound = 0;
  for (const Node& n : g.nodes) {
    if (n.op_type != "MatMul" || !n.domain.empty()) continue;
    ++matmuls;
    auto it = n.inputs.size() > 1 ? g.initializers.find(n.inputs[1]) : g.initializers.end();
    const Tensor* b = it == g.initializers.end() ? nullptr : &it->second;
    const MatMulBinding binding = BindMatMul(b, precision);
    if (binding == MatMulBinding::kGeneric) {
      ++dynamic;
      continue;
    }
    auto& entry = census[{b->dim(0), b->dim(1)}];
    entry.first++;
    entry.second = binding;
    bound += binding == (precision == MatMulPrecision::kInt8 ? MatMulBinding::kInt8A8W8 : MatMulBinding::kFloatPacked);
  }
  const bool int8 = precision == MatMulPrecision::kInt8;
  std::cout << "\nMatMul census (--matmul " << (int8 ? "int8" : "float") << "): " << matmuls << " MatMul nodes, "
            << (matmuls - dynamic) << " with a constant weight in " << census.size() << " shapes, " << dynamic
            << " with a non-constant second operand (per-call float GEMM)\n";
  std::cout << "  bound to " << (int8 ? "the int8 A8W8 kernel (" + std::string(Int8TierName()) + ")" : "the packed float GEMM (" + std::string(SgemmTierName()) + ")")
            << ": " << bound << ", unbound: " << (matmuls - bound) << "\n";
  for (const auto& [kn, entry] : census) {
    const char* kernel = entry.second == MatMulBinding::kInt8A8W8 ? "int8 A8W8" : "float packed";
    std::cout << "  K=" << kn.first << " N=" << kn.second << "  x" << entry.first << "  " << kernel << "\n";
  }

  const QdqFusionReport qdq = AnalyzeQdqFusion(g, QdqKernelLimits{PackedWeightsS8::kMaxK});
  std::cout << "\nQDQ fusion" << (run_options.qdq_fusion ? "" : " (off at run time: ONEINFER_QDQ=0)") << ": "
            << qdq.fused << " fused groups\n";
  for (const auto& [form, n] : qdq.forms) std::cout << "  x" << n << "  " << form << "\n";
  for (const auto& [why, n] : qdq.refused) std::cout << "  not fused: why=" << why << " count=" << n << "\n";
  return 0;
}

}  // namespace oneinfer::cli
