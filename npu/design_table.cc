#include "npu/design_table.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace oneinfer::npu {

absl::StatusOr<GemmShape> ParseShape(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, 'x');
  if (parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape '", text, "' is not MxKxN (three numbers joined by 'x')"));
  }
  int64_t dims[3];
  for (int i = 0; i < 3; ++i) {
    absl::string_view p = parts[i];
    bool digits = !p.empty() && p.size() <= 9;
    for (char ch : p) digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(ch));
    if (!digits || !absl::SimpleAtoi(p, &dims[i]) || dims[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape '", text, "': '", p, "' is not a positive integer below 10^9"));
    }
  }
  return GemmShape{dims[0], dims[1], dims[2]};
}

absl::Status CheckShapeRules(const GemmShape& s) {
  if (s.m % 16 != 0 || s.k % 8 != 0 || s.n % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", s.m, "x", s.k, "x", s.n,
                     " breaks the int8 whole_array rules (M % 16, K % 8, N % 16 must be 0)"));
  }
  return absl::OkStatus();
}

DesignTableParse ParseDesignTable(absl::string_view text) {
  DesignTableParse out;
  int index = 0;
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    ++index;
    absl::string_view entry = absl::StripAsciiWhitespace(raw);
    if (entry.empty()) continue;  // tolerate "a,,b" and a trailing comma
    auto reject = [&](absl::string_view why) {
      out.errors.push_back(absl::StrCat("ONEINFER_NPU_DESIGNS entry ", index, " '", entry,
                                        "': ", why,
                                        " (expected MxKxN=path.xclbin:path.insts)"));
    };
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) {
      reject("no '='");
      continue;
    }
    auto shape = ParseShape(absl::StripAsciiWhitespace(entry.substr(0, eq)));
    if (!shape.ok()) {
      reject(shape.status().message());
      continue;
    }
    if (absl::Status rules = CheckShapeRules(*shape); !rules.ok()) {
      reject(rules.message());
      continue;
    }
    absl::string_view paths = entry.substr(eq + 1);
    const size_t colon = paths.rfind(':');
    if (colon == absl::string_view::npos) {
      reject("no ':' between the xclbin and the instruction file");
      continue;
    }
    absl::string_view xclbin = absl::StripAsciiWhitespace(paths.substr(0, colon));
    absl::string_view insts = absl::StripAsciiWhitespace(paths.substr(colon + 1));
    if (xclbin.empty() || insts.empty()) {
      reject(xclbin.empty() ? "empty xclbin path" : "empty instruction file path");
      continue;
    }
    bool duplicate = false;
    for (const DesignSpec& d : out.designs) duplicate = duplicate || d.shape == *shape;
    if (duplicate) {
      reject("a second design for the same shape");
      continue;
    }
    out.designs.push_back(DesignSpec{*shape, std::string(xclbin), std::string(insts)});
  }
  return out;
}

}  // namespace oneinfer::npu
