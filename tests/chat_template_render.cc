// Renders the cases tests/chat_template_oracle.py wrote (one JSON object a line) with
// oneinfer::ChatTemplate and compares each with jinja2's text byte for byte; where jinja2 raised,
// the render must fail too. Exit status 1 on any difference.
// usage: oneinfer_chat_render CASES.jsonl
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "oneinfer/chat.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: oneinfer_chat_render CASES.jsonl\n";
    return 2;
  }
  using ojson = nlohmann::ordered_json;
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "cannot open " << argv[1] << "\n";
    return 2;
  }
  std::map<std::string, std::unique_ptr<oneinfer::ChatTemplate>> templates;
  int cases = 0, rendered = 0, both_failed = 0, differ = 0;
  std::map<std::string, int> differ_per_template;  // the first difference of each template is shown
  std::string line;
  while (std::getline(in, line)) {
    const ojson c = ojson::parse(line);
    ++cases;
    const std::string key = c.contains("config_path") ? c["config_path"].get<std::string>() : c["config"].dump();
    auto& tmpl = templates[key];
    std::string error;
    if (!tmpl) {
      auto t = c.contains("config_path") ? oneinfer::ChatTemplate::FromTokenizerConfig(c["config_path"].get<std::string>())
                                         : oneinfer::ChatTemplate::FromTokenizerConfigJson(c["config"].dump());
      if (!t.ok()) {
        std::cerr << c["id"].get<std::string>() << ": cannot load the template: " << t.status() << "\n";
        return 1;
      }
      tmpl = std::move(*t);
    }
    const std::string tools = c["tools"].is_null() ? "" : c["tools"].dump();
    auto out = tmpl->RenderJson(c["messages"].dump(), c["add_generation_prompt"].get<bool>(), tools, c["extra"].dump());
    const std::string id = c["id"].get<std::string>();
    const bool show = differ_per_template[key] == 0 && differ < 10;
    if (c.contains("error")) {
      if (out.ok()) {
        ++differ;
        ++differ_per_template[key];
        if (show) std::cerr << id << ": jinja2 raised (" << c["error"].get<std::string>() << ") but we rendered:\n" << *out << "\n";
      } else {
        ++both_failed;
      }
      continue;
    }
    const std::string expected = c["expected"].get<std::string>();
    if (!out.ok()) {
      ++differ;
      ++differ_per_template[key];
      if (show) std::cerr << id << ": we failed (" << out.status() << "); jinja2 rendered:\n" << expected << "\n";
      continue;
    }
    if (*out != expected) {
      ++differ;
      ++differ_per_template[key];
      if (show) {
        size_t at = 0;
        while (at < out->size() && at < expected.size() && (*out)[at] == expected[at]) ++at;
        const size_t from = at > 60 ? at - 60 : 0;
        std::cerr << id << ": differs at byte " << at << "\n  jinja2: " << ojson(expected.substr(from, 160)).dump()
                  << "\n  ours:   " << ojson(out->substr(from, 160)).dump() << "\n";
      }
      continue;
    }
    ++rendered;
  }
  std::cout << "chat template parity: " << cases - differ << " of " << cases << " cases identical to jinja2 (" << rendered
            << " rendered byte for byte, " << both_failed << " raising on both sides) over " << templates.size()
            << " templates\n";
  return differ == 0 && cases > 0 ? 0 : 1;
}
