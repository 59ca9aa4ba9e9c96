// oneinfer tokenize: text lines -> token ids, or ids -> text with --decode.
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "oneinfer/tokenizer.h"
#include "tools/cli.h"

namespace oneinfer::cli {

namespace {
constexpr const char* kHelp =
    "usage: oneinfer tokenize --tokenizer tokenizer.json [--file F | TEXT] [--decode]\n"
    "\n"
    "Prints the ids of each input line, space-separated, one output line per input line.\n"
    "Input is TEXT, else the lines of F, else standard input. With --decode each input line\n"
    "holds ids (space- or comma-separated) and the text is printed instead.\n";
}  // namespace

int CmdTokenize(int argc, char** argv) {
  Args args(argc, argv, 2);
  if (args.TakeFlag("--help", "-h")) {
    std::cout << kHelp;
    return 0;
  }
  std::string tokenizer_path, file;
  args.Take("--tokenizer", &tokenizer_path);
  args.Take("--file", &file);
  const bool decode = args.TakeFlag("--decode");
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (tokenizer_path.empty()) return Fail("tokenize needs --tokenizer tokenizer.json");
  auto tok = Tokenizer::FromFile(tokenizer_path);
  if (!tok.ok()) return Fail(tok.status());

  std::vector<std::string> lines;
  if (!pos.empty()) {
    std::string text;
    for (size_t i = 0; i < pos.size(); ++i) text += (i ? " " : "") + pos[i];
    lines.push_back(text);
  } else {
    std::ifstream f;
    if (!file.empty()) {
      f.open(file, std::ios::binary);
      if (!f) return Fail(absl::StrCat("cannot open '", file, "'"));
    }
    std::istream& in = file.empty() ? std::cin : f;
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
  }
  for (const std::string& line : lines) {
    if (decode) {
      std::vector<int32_t> ids;
      std::string cleaned = line;
      for (char& c : cleaned) if (c == ',') c = ' ';
      std::istringstream is(cleaned);
      std::string word;
      while (is >> word) {
        char* end = nullptr;
        const long v = std::strtol(word.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v >= (*tok)->vocab_size()) {
          return Fail(absl::StrCat("'", word, "' is not a token id (the vocabulary has ", (*tok)->vocab_size(), ")"));
        }
        ids.push_back(static_cast<int32_t>(v));
      }
      std::cout << (*tok)->Decode(ids) << "\n";
    } else {
      auto ids = (*tok)->TryEncode(line);
      if (!ids.ok()) return Fail(ids.status());
      for (size_t i = 0; i < ids->size(); ++i) std::cout << (i ? " " : "") << (*ids)[i];
      std::cout << "\n";
    }
  }
  return 0;
}

}  // namespace oneinfer::cli
