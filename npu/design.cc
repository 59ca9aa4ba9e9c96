#include "npu/design.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace oneinfer::npu {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reads a whole regular file; never throws (libstdc++ throws when reading a directory).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("cannot open ", what, " '", path, "'"));
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "' is not a regular file"));
  }
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", what, " '", path, "'"));
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", what, " '", path, "'"));
    return data;
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("cannot read ", what, " '", path, "': ", e.what()));
  }
}

bool LooksLikeHexText(const std::string& data) {
  for (unsigned char ch : data) {
    if (std::isxdigit(ch) || std::isspace(ch) || ch == 'x' || ch == 'X' || ch == '#' ||
        ch == '/')
      continue;
    return false;
  }
  return true;
}

absl::StatusOr<std::vector<uint32_t>> ParseHexText(const std::string& data,
                                                   const std::string& path) {
  std::vector<uint32_t> words;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(data, '\n')) {
    ++line_no;
    if (auto cut = line.find('#'); cut != absl::string_view::npos) line = line.substr(0, cut);
    if (auto cut = line.find("//"); cut != absl::string_view::npos) line = line.substr(0, cut);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    absl::string_view digits = line;
    if (!absl::ConsumePrefix(&digits, "0x")) absl::ConsumePrefix(&digits, "0X");
    uint32_t word = 0;
    if (digits.empty() || digits.size() > 8 || !absl::SimpleHexAtoi(digits, &word)) {
      return absl::InvalidArgumentError(absl::StrCat("instruction file '", path, "' line ",
                                                     line_no, ": '", line,
                                                     "' is not one 32-bit hex word"));
    }
    words.push_back(word);
  }
  return words;
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> ReadInstructionFile(const std::string& path) {
  auto data = ReadWholeFile(path, "instruction file");
  if (!data.ok()) return data.status();
  bool text;
  if (absl::EndsWith(path, ".txt")) {
    text = true;
  } else if (absl::EndsWith(path, ".bin")) {
    text = false;
  } else {
    text = LooksLikeHexText(*data);
  }
  std::vector<uint32_t> words;
  if (text) {
    auto parsed = ParseHexText(*data, path);
    if (!parsed.ok()) return parsed.status();
    words = std::move(*parsed);
  } else {
    if (data->size() % 4 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("binary instruction file '", path, "' has ",
                                                     data->size(),
                                                     " bytes, not a multiple of 4"));
    }
    words.resize(data->size() / 4);
    std::memcpy(words.data(), data->data(), data->size());  // little-endian, as the host is
  }
  if (words.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("instruction file '", path, "' holds no instructions"));
  }
  if (words.size() > std::numeric_limits<uint32_t>::max() / 4) {
    return absl::InvalidArgumentError(absl::StrCat("instruction file '", path, "' is too large"));
  }
  return words;
}

absl::Status CheckDesignFiles(const DesignSpec& spec) {
  const GemmShape& s = spec.shape;
  if (s.m <= 0 || s.k <= 0 || s.n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("design ", s.m, "x", s.k, "x", s.n, ": dimensions must be positive"));
  }
  std::error_code ec;
  if (!std::filesystem::exists(spec.xclbin_path, ec)) {
    return absl::NotFoundError(absl::StrCat("cannot open xclbin '", spec.xclbin_path, "'"));
  }
  if (!std::filesystem::is_regular_file(spec.xclbin_path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("xclbin '", spec.xclbin_path, "' is not a regular file"));
  }
  {
    std::ifstream in(spec.xclbin_path, std::ios::binary);
    char byte;
    if (!in) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot open xclbin '", spec.xclbin_path, "' for reading"));
    }
    if (!in.get(byte)) {
      return absl::InvalidArgumentError(
          absl::StrCat("xclbin '", spec.xclbin_path, "' is empty or unreadable"));
    }
  }
  return ReadInstructionFile(spec.insts_path).status();
}

void PackWeightsRowMajor(const int8_t* w, int64_t k, int64_t n, int8_t* dst) {
  std::memcpy(dst, w, static_cast<size_t>(k * n));
}

absl::StatusOr<std::unique_ptr<Design>> Design::Prepare(Device& device, const DesignSpec& spec,
                                                        size_t weight_cache_bytes) {
  if (absl::Status st = CheckDesignFiles(spec); !st.ok()) return st;
  auto words = ReadInstructionFile(spec.insts_path);
  if (!words.ok()) return words.status();

  std::unique_ptr<Design> d(new Design(spec, weight_cache_bytes));
  const GemmShape& s = spec.shape;
  auto kernel = device.LoadDesign(spec, *words);
  if (!kernel.ok()) return kernel.status();
  d->kernel_ = std::move(*kernel);

  const size_t instr_bytes = words->size() * sizeof(uint32_t);
  auto instr = d->kernel_->Allocate(BufferRole::kInstructions, instr_bytes);
  if (!instr.ok()) return instr.status();
  d->instr_ = std::move(*instr);
  auto a = d->kernel_->Allocate(BufferRole::kA, static_cast<size_t>(s.m * s.k));
  if (!a.ok()) return a.status();
  d->a_ = std::move(*a);
  auto c = d->kernel_->Allocate(BufferRole::kC, static_cast<size_t>(s.m * s.n) * sizeof(int32_t));
  if (!c.ok()) return c.status();
  d->c_ = std::move(*c);

  std::memcpy(d->instr_->host().data(), words->data(), instr_bytes);
  if (absl::Status st = d->instr_->SyncToDevice(); !st.ok()) return st;
  d->n_words_ = static_cast<uint32_t>(words->size());
  d->a_dirty_rows_ = s.m;  // fresh device memory is not promised to be zero: clear on first use
  return d;
}

void Design::EvictFor(size_t bytes, const int8_t* keep) {
  while (weight_bytes_ + bytes > weight_cache_bytes_) {
    auto victim = weights_.end();
    for (auto it = weights_.begin(); it != weights_.end(); ++it) {
      if (it->first == keep) continue;
      if (victim == weights_.end() || it->second.last_use < victim->second.last_use) victim = it;
    }
    if (victim == weights_.end()) return;
    weight_bytes_ -= victim->second.buffer->host().size();
    weights_.erase(victim);
  }
}

absl::StatusOr<DeviceBuffer*> Design::WeightBuffer(const int8_t* w, Sections& s) {
  ++use_clock_;
  if (auto it = weights_.find(w); it != weights_.end()) {
    it->second.last_use = use_clock_;
    return it->second.buffer.get();
  }
  const int64_t t0 = NowNs();
  const size_t bytes = static_cast<size_t>(spec_.shape.k * spec_.shape.n);
  EvictFor(bytes, nullptr);
  auto buffer = kernel_->Allocate(BufferRole::kB, bytes);
  if (!buffer.ok()) return buffer.status();
  PackWeightsRowMajor(w, spec_.shape.k, spec_.shape.n,
                      reinterpret_cast<int8_t*>((*buffer)->host().data()));
  if (absl::Status st = (*buffer)->SyncToDevice(); !st.ok()) return st;
  DeviceBuffer* raw = buffer->get();
  weights_[w] = WeightSlot{std::move(*buffer), use_clock_};
  weight_bytes_ += bytes;
  s.weight_ns += NowNs() - t0;
  ++s.weight_uploads;
  return raw;
}

absl::Status Design::Run(const int8_t* a, int64_t rows, int64_t k, int64_t n, const int8_t* w,
                         int32_t* c, Sections* sections) {
  const GemmShape& s = spec_.shape;
  if (k != s.k || n != s.n) {
    return absl::FailedPreconditionError(absl::StrCat("design ", s.m, "x", s.k, "x", s.n,
                                                      " cannot run k=", k, " n=", n,
                                                      ": K and N must match exactly"));
  }
  if (rows <= 0 || a == nullptr || w == nullptr || c == nullptr) {
    return absl::InvalidArgumentError("Design::Run: rows must be positive, pointers non-null");
  }
  std::lock_guard<std::mutex> lock(mu_);
  Sections local;
  local.calls = 1;
  auto b = WeightBuffer(w, local);
  if (!b.ok()) return b.status();

  int8_t* a_host = reinterpret_cast<int8_t*>(a_->host().data());
  const int32_t* c_host = reinterpret_cast<const int32_t*>(c_->host().data());
  for (int64_t row0 = 0; row0 < rows; row0 += s.m) {
    const int64_t live = std::min(s.m, rows - row0);

    int64_t t0 = NowNs();
    std::memcpy(a_host, a + row0 * s.k, static_cast<size_t>(live * s.k));
    if (a_dirty_rows_ > live) {  // zero the rows a previous, taller call left behind
      std::memset(a_host + live * s.k, 0, static_cast<size_t>((a_dirty_rows_ - live) * s.k));
    }
    a_dirty_rows_ = live;
    if (absl::Status st = a_->SyncToDevice(); !st.ok()) return st;
    int64_t t1 = NowNs();
    local.activation_ns += t1 - t0;

    if (absl::Status st = kernel_->Launch(*instr_, n_words_, *a_, **b, *c_); !st.ok()) return st;
    if (absl::Status st = kernel_->Wait(); !st.ok()) return st;
    int64_t t2 = NowNs();
    local.launch_ns += t2 - t1;
    ++local.launches;

    if (absl::Status st = c_->SyncFromDevice(); !st.ok()) return st;
    std::memcpy(c + row0 * s.n, c_host, static_cast<size_t>(live * s.n) * sizeof(int32_t));
    local.readback_ns += NowNs() - t2;
  }
  if (sections != nullptr) *sections += local;
  return absl::OkStatus();
}

void Design::ForgetWeight(const int8_t* w) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = weights_.find(w); it != weights_.end()) {
    weight_bytes_ -= it->second.buffer->host().size();
    weights_.erase(it);
  }
}

size_t Design::cached_weight_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return weight_bytes_;
}

size_t Design::cached_weights() const {
  std::lock_guard<std::mutex> lock(mu_);
  return weights_.size();
}

Sections& Sections::operator+=(const Sections& o) {
  calls += o.calls;
  launches += o.launches;
  weight_uploads += o.weight_uploads;
  weight_ns += o.weight_ns;
  activation_ns += o.activation_ns;
  launch_ns += o.launch_ns;
  readback_ns += o.readback_ns;
  epilogue_ns += o.epilogue_ns;
  return *this;
}

std::string Sections::ToString() const {
  auto us = [](int64_t ns) { return absl::StrCat(ns / 1000, ".", (ns / 100) % 10); };
  return absl::StrCat("calls=", calls, " launches=", launches, " uploads=", weight_uploads,
                      " weight_us=", us(weight_ns), " act_us=", us(activation_ns),
                      " launch_us=", us(launch_ns), " readback_us=", us(readback_ns),
                      " epilogue_us=", us(epilogue_ns));
}

}  // namespace oneinfer::npu
