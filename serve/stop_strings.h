// Stop strings, found in the decoded text as it streams: text is released only once no stop
// string can start inside it, so a client never sees part of a stop string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace oneinfer::serve {

class StopStringMatcher {
 public:
  // Empty strings are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Takes the next piece of decoded text; returns the text now safe to send. After a stop
  // string is found it returns the text before it and stopped() turns true (later calls return "").
  std::string Push(std::string_view piece);
  // The text still held back (a possible start of a stop string) when generation ends.
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace oneinfer::serve
