/* oneinfer's C API: the same library as the C++ API (session.h, generator.h, tokenizer.h), reached
 * from C99 and from any language with a C foreign-function interface.
 *
 * Conventions:
 * - Objects are opaque handles made by a *_create / *_load function and freed by the matching
 *   *_release (which accepts NULL).
 * - A function that can fail returns an oneinfer_status*: NULL on success, else an error the
 *   caller reads with oneinfer_status_code / oneinfer_status_message and frees with
 *   oneinfer_status_release. Out-parameters are written only on success.
 * - No C++ exception leaves the library through this API: one thrown inside (an allocation
 *   failure) is returned as an error status.
 * - Strings are UTF-8 and NUL-terminated unless a length is passed with them.
 * - Thread safety follows the C++ API: oneinfer_session_run may be called from several threads
 *   at once on one session; a generator runs one sequence at a time; a handle must not be
 *   released while another thread uses it.
 */
#ifndef ONEINFER_ONEINFER_C_H_
#define ONEINFER_ONEINFER_C_H_

#include <stddef.h>
#include <stdint.h>

#include "oneinfer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version of this header. It changes whenever a function, a struct or an enum value
 * of this file changes incompatibly; compare it with oneinfer_abi_version() at run time. */
#define ONEINFER_C_ABI_VERSION 1

/* The ABI version the loaded library implements (ONEINFER_C_ABI_VERSION of its build). */
ONEINFER_API uint32_t oneinfer_abi_version(void);

/* The library's version and kernel tiers, as the C++ VersionString() (static storage). */
ONEINFER_API const char* oneinfer_version_string(void);

/* ---- status ---- */

/* Error codes; the values are abseil's absl::StatusCode. */
typedef enum oneinfer_status_code {
  ONEINFER_OK = 0,
  ONEINFER_CANCELLED = 1,
  ONEINFER_UNKNOWN = 2,
  ONEINFER_INVALID_ARGUMENT = 3,
  ONEINFER_DEADLINE_EXCEEDED = 4,
  ONEINFER_NOT_FOUND = 5,
  ONEINFER_ALREADY_EXISTS = 6,
  ONEINFER_PERMISSION_DENIED = 7,
  ONEINFER_RESOURCE_EXHAUSTED = 8,
  ONEINFER_FAILED_PRECONDITION = 9,
  ONEINFER_ABORTED = 10,
  ONEINFER_OUT_OF_RANGE = 11,
  ONEINFER_UNIMPLEMENTED = 12,
  ONEINFER_INTERNAL = 13,
  ONEINFER_UNAVAILABLE = 14,
  ONEINFER_DATA_LOSS = 15,
  ONEINFER_UNAUTHENTICATED = 16
} oneinfer_status_code;

/* An error: a code and a message. NULL stands for success everywhere. */
typedef struct oneinfer_status oneinfer_status;

/* The error's code (ONEINFER_OK for NULL). */
ONEINFER_API oneinfer_status_code oneinfer_status_get_code(const oneinfer_status* status);
/* The error's message, valid until the status is released ("" for NULL). */
ONEINFER_API const char* oneinfer_status_message(const oneinfer_status* status);
/* Frees a status (NULL is fine). */
ONEINFER_API void oneinfer_status_release(oneinfer_status* status);

/* ---- element types ---- */

/* Element types; the values are ONNX's TensorProto.DataType codes (as oneinfer::DType). */
typedef enum oneinfer_dtype {
  ONEINFER_DTYPE_UNDEFINED = 0,
  ONEINFER_DTYPE_FLOAT32 = 1,
  ONEINFER_DTYPE_UINT8 = 2,
  ONEINFER_DTYPE_INT8 = 3,
  ONEINFER_DTYPE_UINT16 = 4,
  ONEINFER_DTYPE_INT16 = 5,
  ONEINFER_DTYPE_INT32 = 6,
  ONEINFER_DTYPE_INT64 = 7,
  ONEINFER_DTYPE_STRING = 8,
  ONEINFER_DTYPE_BOOL = 9, /* one byte per element, 0 or 1 */
  ONEINFER_DTYPE_FLOAT16 = 10,
  ONEINFER_DTYPE_FLOAT64 = 11,
  ONEINFER_DTYPE_UINT32 = 12,
  ONEINFER_DTYPE_UINT64 = 13,
  ONEINFER_DTYPE_BFLOAT16 = 16,
  ONEINFER_DTYPE_UINT4 = 21, /* two per byte, low nibble first */
  ONEINFER_DTYPE_INT4 = 22,
  /* Not a type: makes every int value a valid oneinfer_dtype, so that a caller's bad value is
     refused with an error ("unknown dtype") instead of being undefined behaviour in C++. */
  ONEINFER_DTYPE_MAX_ENUM = 0x7fffffff
} oneinfer_dtype;

/* The type's name ("float32", "int64", ...; static storage). */
ONEINFER_API const char* oneinfer_dtype_name(oneinfer_dtype dtype);

/* ---- tensors ---- */

/* A dense n-dimensional array in row-major order. */
typedef struct oneinfer_tensor oneinfer_tensor;

/* A tensor whose memory the library allocates, zero-filled (strings empty). shape holds rank
 * dimensions, each >= 0 (rank 0 is a scalar; shape may then be NULL). */
ONEINFER_API oneinfer_status* oneinfer_tensor_create(oneinfer_dtype dtype, const int64_t* shape, size_t rank,
                                                     oneinfer_tensor** out);
/* A tensor over caller memory: data holds byte_size bytes, exactly the storage of the shape
 * (checked). The caller keeps data alive, and unchanged during a run that reads it, until the
 * tensor is released. Not for ONEINFER_DTYPE_STRING. */
ONEINFER_API oneinfer_status* oneinfer_tensor_create_view(oneinfer_dtype dtype, const int64_t* shape, size_t rank,
                                                          void* data, size_t byte_size, oneinfer_tensor** out);
/* Frees the handle; library memory goes with the last handle or output that refers to it. */
ONEINFER_API void oneinfer_tensor_release(oneinfer_tensor* tensor);

ONEINFER_API oneinfer_dtype oneinfer_tensor_dtype(const oneinfer_tensor* tensor);
ONEINFER_API size_t oneinfer_tensor_rank(const oneinfer_tensor* tensor);
/* rank dimensions, valid while the tensor lives (NULL for a scalar). */
ONEINFER_API const int64_t* oneinfer_tensor_shape(const oneinfer_tensor* tensor);
ONEINFER_API int64_t oneinfer_tensor_num_elements(const oneinfer_tensor* tensor);
/* Bytes of storage (4-bit types pack two per byte; 0 for strings). */
ONEINFER_API size_t oneinfer_tensor_byte_size(const oneinfer_tensor* tensor);
/* The first element, writable (NULL for strings and for empty tensors). */
ONEINFER_API void* oneinfer_tensor_data(oneinfer_tensor* tensor);
/* String element `index` of a string tensor: *data (not NUL-terminated; valid until the element
 * is set again or the tensor released) and *length. */
ONEINFER_API oneinfer_status* oneinfer_tensor_get_string(const oneinfer_tensor* tensor, int64_t index,
                                                         const char** data, size_t* length);
/* Sets string element `index` of a string tensor to a copy of length bytes at data. */
ONEINFER_API oneinfer_status* oneinfer_tensor_set_string(oneinfer_tensor* tensor, int64_t index, const char* data,
                                                         size_t length);

/* ---- session options ---- */

typedef struct oneinfer_session_options oneinfer_session_options;

/* MatMuls with a constant float weight (oneinfer::MatMulPrecision). */
typedef enum oneinfer_matmul_precision {
  ONEINFER_MATMUL_FLOAT32 = 0,
  ONEINFER_MATMUL_INT8 = 1, /* dynamic A8W8 */
  ONEINFER_MATMUL_MAX_ENUM = 0x7fffffff /* not a precision (see ONEINFER_DTYPE_MAX_ENUM) */
} oneinfer_matmul_precision;

/* Log levels (oneinfer::LogLevel). */
typedef enum oneinfer_log_level {
  ONEINFER_LOG_ERROR = 0,
  ONEINFER_LOG_WARNING = 1,
  ONEINFER_LOG_INFO = 2,
  ONEINFER_LOG_VERBOSE = 3,
  ONEINFER_LOG_MAX_ENUM = 0x7fffffff /* not a level (see ONEINFER_DTYPE_MAX_ENUM) */
} oneinfer_log_level;

/* Options with the C++ SessionOptions defaults. */
ONEINFER_API oneinfer_status* oneinfer_session_options_create(oneinfer_session_options** out);
ONEINFER_API void oneinfer_session_options_release(oneinfer_session_options* options);
/* Threads for the heavy kernels, counting the caller; 0 = the machine's cores. */
ONEINFER_API oneinfer_status* oneinfer_session_options_set_num_threads(oneinfer_session_options* options,
                                                                       int num_threads);
ONEINFER_API oneinfer_status* oneinfer_session_options_set_matmul_precision(oneinfer_session_options* options,
                                                                            oneinfer_matmul_precision precision);
ONEINFER_API oneinfer_status* oneinfer_session_options_set_log_level(oneinfer_session_options* options,
                                                                     oneinfer_log_level level);
/* Boolean switches (0 or 1), as the SessionOptions fields of the same names. */
ONEINFER_API oneinfer_status* oneinfer_session_options_set_constant_folding(oneinfer_session_options* options,
                                                                            int enabled);
ONEINFER_API oneinfer_status* oneinfer_session_options_set_prepare_weights(oneinfer_session_options* options,
                                                                           int enabled);
ONEINFER_API oneinfer_status* oneinfer_session_options_set_qdq_fusion(oneinfer_session_options* options,
                                                                      int enabled);
ONEINFER_API oneinfer_status* oneinfer_session_options_set_weight_fusion(oneinfer_session_options* options,
                                                                         int enabled);
ONEINFER_API oneinfer_status* oneinfer_session_options_set_profile(oneinfer_session_options* options, int enabled);

/* ---- sessions ---- */

typedef struct oneinfer_session oneinfer_session;

/* Loads an ONNX model file; options may be NULL (defaults). The options are copied. */
ONEINFER_API oneinfer_status* oneinfer_session_load(const char* path, const oneinfer_session_options* options,
                                                    oneinfer_session** out);
/* Loads a model from size bytes at data (copied as needed; data may be freed after the call).
 * base_dir is where external data files are looked up (NULL = "."). */
ONEINFER_API oneinfer_status* oneinfer_session_load_from_buffer(const void* data, size_t size,
                                                                const oneinfer_session_options* options,
                                                                const char* base_dir, oneinfer_session** out);
/* Frees the session; no run or generator may be using it. */
ONEINFER_API void oneinfer_session_release(oneinfer_session* session);

/* Declared metadata of an input or output (oneinfer::IOInfo). Every pointer is valid while the
 * session lives. */
typedef struct oneinfer_io_info {
  const char* name;
  oneinfer_dtype dtype;
  int is_tensor;   /* 0 for sequence and optional values */
  int has_shape;   /* 0 when the rank is unknown (rank is then 0) */
  int has_default; /* an input with an initializer behind it may be left out */
  size_t rank;
  const int64_t* shape;          /* rank entries; -1 for a symbolic or unknown dimension */
  const char* const* dim_params; /* rank entries: the symbolic name of a -1 dimension, or "" */
} oneinfer_io_info;

ONEINFER_API size_t oneinfer_session_input_count(const oneinfer_session* session);
ONEINFER_API size_t oneinfer_session_output_count(const oneinfer_session* session);
/* Input `index` (graph order) into *info. */
ONEINFER_API oneinfer_status* oneinfer_session_input_info(const oneinfer_session* session, size_t index,
                                                          oneinfer_io_info* info);
/* Output `index` (graph order) into *info. */
ONEINFER_API oneinfer_status* oneinfer_session_output_info(const oneinfer_session* session, size_t index,
                                                           oneinfer_io_info* info);
/* The model's metadata_props: how many, and entry `index` (sorted by key; strings valid while
 * the session lives). */
ONEINFER_API size_t oneinfer_session_metadata_count(const oneinfer_session* session);
ONEINFER_API oneinfer_status* oneinfer_session_metadata_entry(const oneinfer_session* session, size_t index,
                                                              const char** key, const char** value);

/* Runs the graph on num_inputs named feeds (checked by name, dtype, rank and fixed dims).
 * output_names: num_outputs names to compute, in the order wanted; NULL = every graph output in
 * graph order, and num_outputs must then equal oneinfer_session_output_count. On success
 * outputs[i] receives a new tensor the caller releases; an output is handed over without a copy
 * when the run produced its memory and nothing else refers to it, and copied otherwise (so it
 * never aliases a feed or the model's weights). */
ONEINFER_API oneinfer_status* oneinfer_session_run(const oneinfer_session* session, const char* const* input_names,
                                                   const oneinfer_tensor* const* inputs, size_t num_inputs,
                                                   const char* const* output_names, size_t num_outputs,
                                                   oneinfer_tensor** outputs);

/* ---- text generation (oneinfer::Generator) ---- */

typedef struct oneinfer_generator oneinfer_generator;

/* Generation settings (oneinfer::GenerateOptions); fill with oneinfer_generate_options_init. */
typedef struct oneinfer_generate_options {
  int max_new_tokens;   /* 32 */
  float temperature;    /* 0 = greedy (argmax) */
  int top_k;            /* 0 = no limit */
  float top_p;          /* 1 = no nucleus cut */
  uint64_t seed;        /* 0 */
  const int32_t* stop_ids; /* generation ends after emitting one of these (NULL: none) */
  size_t num_stop_ids;
} oneinfer_generate_options;

/* What a generate call did (oneinfer::GenerationResult without the ids). */
typedef struct oneinfer_generation_result {
  size_t num_generated;  /* ids written to out_ids */
  int prompt_tokens;
  int stopped_by_id;     /* 1 when a stop id ended generation */
  int decode_steps;
  double prefill_ms;     /* the first forward pass (whole prompt) */
  double decode_ms;      /* all later forward passes together */
} oneinfer_generation_result;

/* Called with each generated token and the logits it was chosen from (vocab floats, valid
 * during the call only), on the thread that called oneinfer_generator_generate. Return nonzero
 * to go on, 0 to stop after this token. */
typedef int (*oneinfer_token_callback)(int32_t id, const float* logits, int64_t vocab, void* user_data);

/* The defaults: 32 tokens, greedy, no stop ids. */
ONEINFER_API void oneinfer_generate_options_init(oneinfer_generate_options* options);
/* A generator over a causal-LM session (checked as Generator::Create does). The session must
 * outlive the generator. */
ONEINFER_API oneinfer_status* oneinfer_generator_create(const oneinfer_session* session, oneinfer_generator** out);
ONEINFER_API void oneinfer_generator_release(oneinfer_generator* generator);
ONEINFER_API int64_t oneinfer_generator_vocab_size(const oneinfer_generator* generator);
/* Generates after prompt_length prompt ids. out_ids has room for capacity ids, at least
 * options->max_new_tokens (checked); options NULL = the defaults; callback may be NULL. */
ONEINFER_API oneinfer_status* oneinfer_generator_generate(const oneinfer_generator* generator, const int32_t* prompt,
                                                          size_t prompt_length,
                                                          const oneinfer_generate_options* options,
                                                          oneinfer_token_callback callback, void* user_data,
                                                          int32_t* out_ids, size_t capacity,
                                                          oneinfer_generation_result* result);

/* ---- tokenizer (oneinfer::Tokenizer) ---- */

typedef struct oneinfer_tokenizer oneinfer_tokenizer;

/* Reads a Hugging Face tokenizer.json. */
ONEINFER_API oneinfer_status* oneinfer_tokenizer_load(const char* path, oneinfer_tokenizer** out);
ONEINFER_API void oneinfer_tokenizer_release(oneinfer_tokenizer* tokenizer);
ONEINFER_API int32_t oneinfer_tokenizer_vocab_size(const oneinfer_tokenizer* tokenizer);
/* The id of a token string (e.g. "<|im_end|>") into *id; NOT_FOUND when it has none. */
ONEINFER_API oneinfer_status* oneinfer_tokenizer_token_id(const oneinfer_tokenizer* tokenizer, const char* token,
                                                          int32_t* id);
/* Encodes length bytes of text. *ids is an array of *count ids the caller frees with
 * oneinfer_free. */
ONEINFER_API oneinfer_status* oneinfer_tokenizer_encode(const oneinfer_tokenizer* tokenizer, const char* text,
                                                        size_t length, int32_t** ids, size_t* count);
/* Decodes count ids (skip_special nonzero leaves special tokens out). *text is NUL-terminated,
 * *length bytes long, freed by the caller with oneinfer_free. */
ONEINFER_API oneinfer_status* oneinfer_tokenizer_decode(const oneinfer_tokenizer* tokenizer, const int32_t* ids,
                                                        size_t count, int skip_special, char** text, size_t* length);

/* Frees memory the library allocated for the caller (encoded ids, decoded text); NULL is fine. */
ONEINFER_API void oneinfer_free(void* memory);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ONEINFER_ONEINFER_C_H_ */
