// `oneinfer serve` on the command line: its flags' errors are one clear line and exit 1, before
// or after binding the port.
#include <gtest/gtest.h>

#include "tests/serve_model.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;

TEST(ServeCli, BadFlagsAndMissingFilesAreOneClearError) {
  CliResult r = RunCli("serve --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: oneinfer serve MODEL.onnx"), std::string::npos) << r.out;
  const std::pair<std::string, std::string> cases[] = {
      {"serve", "serve needs exactly one MODEL.onnx"},
      {"serve m.onnx --port 70000", "--port '70000' must be a whole number in [0, 65535]"},
      {"serve m.onnx --max-batch 0", "--max-batch '0' must be a whole number"},
      {"serve m.onnx --context x", "--context 'x' must be a whole number"},
      {"serve m.onnx --matmul int3", "int3"},
      {"serve m.onnx --bogus 1", "unknown option --bogus"},
      {"serve m.onnx --port 0 --host 256.1.1.1", "cannot listen on 256.1.1.1:0"},
      {"serve /nonexistent/m.onnx --port 0", "no tokenizer.json beside the model"},
  };
  for (const auto& [args, words] : cases) {
    r = RunCli(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("oneinfer: error: "), std::string::npos) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(words), std::string::npos) << args << "\n" << r.out;
  }
  // A model that does not load: the server listened, then says why and exits 1.
  if (serve_test::HasTokenizer()) {
    const std::string tok = (serve_test::TinyQwen3Dir() / "tokenizer.json").string();
    r = RunCli("serve /nonexistent/m.onnx --port 0 --tokenizer " + tok);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("listening on http://127.0.0.1:"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace oneinfer
