// The chat page served at GET /: one self-contained HTML file (no CDN), compiled into the binary.
#pragma once

namespace oneinfer::serve {

extern const char kChatPageHtml[];

}  // namespace oneinfer::serve
