// The `oneinfer` command line.
#include <cstring>
#include <exception>
#include <new>
#include <iostream>
#include <string>

#include "oneinfer/session.h"
#include "tools/cli.h"
#include "tools/env_options.h"

namespace {

constexpr const char* kUsage =
    "usage: oneinfer <command> [options]\n"
    "\n"
    "commands:\n"
    "  run MODEL.onnx --prompt TEXT                    generate text (export-hf, optimum and genai graphs)\n"
    "  exec MODEL.onnx --input-dir D --output-dir O   run a model on input_*.pb tensors\n"
    "  bench MODEL.onnx [--dim NAME=N] [--runs N]      latency per run (min/median/p90), load, peak RSS\n"
    "  inspect MODEL.onnx                              opsets, ops, inputs/outputs, weights, MatMul census\n"
    "  export-hf CHECKPOINT_DIR -o MODEL.onnx          Qwen3 / Llama / Qwen2 / Mistral safetensors -> ONNX\n"
    "                                                  (--cached; export-qwen3 is the same command)\n"
    "  tokenize --tokenizer T [--file F | TEXT]        text lines -> token ids (--decode: ids -> text)\n"
    "  quantize MODEL.onnx -o OUT.onnx --a8w8          static A8W8 QDQ graph, calibrated on text or ids\n"
    "  serve MODEL.onnx [--port N]                     OpenAI-compatible HTTP server, continuous batching\n"
    "\n"
    "  oneinfer <command> --help   shows a command's options\n"
    "  oneinfer --version          version, kernel tiers, NPU leg\n";

}  // namespace

namespace {
int Dispatch(int argc, char** argv);
}  // namespace

// The command line's last resort: anything thrown is one error line and exit 1, never an abort.
int main(int argc, char** argv) {
  try {
    return Dispatch(argc, argv);
  } catch (const std::bad_alloc& e) {
    return oneinfer::cli::Fail(std::string("out of memory (") + e.what() + ")");
  } catch (const std::exception& e) {
    return oneinfer::cli::Fail(std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return oneinfer::cli::Fail("unexpected exception of unknown type");
  }
}

namespace {
int Dispatch(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::cout << kUsage << oneinfer::cli::EnvironmentHelp();
    return argc < 2 ? 2 : 0;
  }
  // Tiers are process-wide: set once, before any command (and --version, which names them).
  oneinfer::cli::ApplyTierEnvironment();
  const std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::cout << "oneinfer " << oneinfer::VersionString() << "\n";
    return 0;
  }
  if (cmd == "exec") return oneinfer::cli::CmdExec(argc, argv);
  if (cmd == "inspect") return oneinfer::cli::CmdInspect(argc, argv);
  if (cmd == "export-hf" || cmd == "export-qwen3") return oneinfer::cli::CmdExportQwen3(argc, argv);
  if (cmd == "tokenize") return oneinfer::cli::CmdTokenize(argc, argv);
  if (cmd == "run") return oneinfer::cli::CmdRun(argc, argv);
  if (cmd == "bench") return oneinfer::cli::CmdBench(argc, argv);
  if (cmd == "quantize") return oneinfer::cli::CmdQuantize(argc, argv);
  if (cmd == "serve") return oneinfer::cli::CmdServe(argc, argv);
  std::cerr << "oneinfer: error: unknown command '" << cmd << "'\n" << kUsage;
  return 2;
}
}  // namespace
