// ONEINFER_API marks what liboneinfer.so exports: the library is built with hidden visibility, so
// only the declarations in include/oneinfer/ that carry this macro are part of its ABI.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define ONEINFER_API __attribute__((visibility("default")))
#else
#define ONEINFER_API
#endif
