// A Jinja subset for Hugging Face chat templates, rendered the way transformers renders them
// (jinja2's ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, loop controls,
// raise_exception, strftime_now and a tojson that does not escape HTML or non-ASCII).
//
// Supported: text, {{ }}, {% %}, {# #} with - and + whitespace control; if/elif/else, for (tuple
// targets, `if` filter, else, loop.* and loop.cycle, break/continue), set (names, namespace
// attributes, set blocks), macro (defaults, keyword arguments), raw, generation; the expression
// grammar of jinja2 (conditional expressions, and/or/not, comparisons, in, is-tests, + - * / // %
// ** ~, subscripts and slices, attribute access, calls, list/tuple/dict literals, filters); the
// filters, tests, globals and str/dict methods that chat templates use. Anything else is an error
// that names it, with the template line. Templates come from downloaded files, so loop
// iterations, call depth and output size are bounded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace oneinfer::jinja {

struct Limits {
  int64_t max_output_bytes = 64ll << 20;
  int64_t max_iterations = 1'000'000;  // loop bodies and filter elements, all together
  int max_call_depth = 64;              // macro calls inside macro calls
};

class Template {
 public:
  // Parses the source; a syntax error names the line ("line 3: ...").
  static absl::StatusOr<Template> Parse(std::string_view source);

  // Renders with these variables (a JSON object; null is Python's None). Errors (an undefined
  // value used in arithmetic, an unknown filter, raise_exception, a limit) name the line.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& variables, const Limits& limits = {}) const;

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
};

}  // namespace oneinfer::jinja
