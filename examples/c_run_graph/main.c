/* c_run_graph: the C API (oneinfer/oneinfer_c.h) end to end, in C99: a graph run on tensors the
 * program makes, then text generation with the tokenizer.
 *
 *   c_run_graph GRAPH.onnx [--dim NAME=SIZE] [LM.onnx TOKENIZER.json PROMPT MAX_NEW_TOKENS]
 *
 * The graph's inputs (float32, int64) are filled as run_graph fills them: float element i is
 * (i % 7) * 0.25 - 0.5, int64 element i is i % 5; a symbolic dimension takes the --dim size, else 2.
 * Prints, like run_graph,
 *   input NAME DTYPE [d0,d1]
 *   output NAME DTYPE [d0,d1]: v0 v1 ...
 *   error (expected): <the message for a feed of the wrong rank, which names the input>
 * and with a language model, greedy generation that stops at <|im_end|> or <|endoftext|>:
 *   prompt ids: a b c
 *   ids: x y z            (as the token callback saw them)
 *   generated N tokens, stopped by stop id|max tokens
 *   text: <the decoded ids, special tokens left out>
 * Every handle and every library-allocated buffer is released (the install test runs this under
 * valgrind). Exit status 1 on any error, with the library's message on stderr. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oneinfer/oneinfer_c.h"

/* Prints and frees an error; returns 1 when there was one. */
static int Failed(oneinfer_status* status, const char* what) {
  if (status == NULL) return 0;
  fprintf(stderr, "c_run_graph: %s: %s\n", what, oneinfer_status_message(status));
  oneinfer_status_release(status);
  return 1;
}

static void PrintShape(size_t rank, const int64_t* shape) {
  size_t d;
  printf("[");
  for (d = 0; d < rank; ++d) printf("%s%" PRId64, d ? "," : "", shape[d]);
  printf("]");
}

/* Fills one input; returns NULL (with a message) for a dtype this example does not fill. */
static oneinfer_tensor* MakeInput(const oneinfer_io_info* info, const char* dim_name, int64_t dim_size) {
  int64_t shape[8];
  oneinfer_tensor* t = NULL;
  int64_t i, n;
  size_t d;
  if (info->rank > 8) return NULL;
  for (d = 0; d < info->rank; ++d) {
    shape[d] = info->shape[d] >= 0 ? info->shape[d]
               : (dim_name != NULL && strcmp(info->dim_params[d], dim_name) == 0) ? dim_size : 2;
  }
  if (Failed(oneinfer_tensor_create(info->dtype, shape, info->rank, &t), "tensor_create")) return NULL;
  n = oneinfer_tensor_num_elements(t);
  if (info->dtype == ONEINFER_DTYPE_FLOAT32) {
    float* v = (float*)oneinfer_tensor_data(t);
    for (i = 0; i < n; ++i) v[i] = (float)(i % 7) * 0.25f - 0.5f;
  } else if (info->dtype == ONEINFER_DTYPE_INT64) {
    int64_t* v = (int64_t*)oneinfer_tensor_data(t);
    for (i = 0; i < n; ++i) v[i] = i % 5;
  } else {
    fprintf(stderr, "c_run_graph: input '%s' is %s, which this example does not fill\n", info->name,
            oneinfer_dtype_name(info->dtype));
    oneinfer_tensor_release(t);
    return NULL;
  }
  return t;
}

static void PrintOutput(const char* name, oneinfer_tensor* t) {
  int64_t i, n = oneinfer_tensor_num_elements(t);
  printf("output %s %s ", name, oneinfer_dtype_name(oneinfer_tensor_dtype(t)));
  PrintShape(oneinfer_tensor_rank(t), oneinfer_tensor_shape(t));
  printf(":");
  for (i = 0; i < n; ++i) {
    switch (oneinfer_tensor_dtype(t)) {
      case ONEINFER_DTYPE_FLOAT32: printf(" %.6g", (double)((const float*)oneinfer_tensor_data(t))[i]); break;
      case ONEINFER_DTYPE_INT64: printf(" %" PRId64, ((const int64_t*)oneinfer_tensor_data(t))[i]); break;
      default: printf(" ?"); break;
    }
  }
  printf("\n");
}

/* Runs the graph once with good feeds and once with a feed of the wrong rank. */
static int RunGraph(const char* path, const char* dim_name, int64_t dim_size) {
  oneinfer_session_options* options = NULL;
  oneinfer_session* session = NULL;
  const char* names[16];
  oneinfer_tensor* feeds[16];
  oneinfer_tensor* outputs[16];
  size_t num_feeds = 0, num_outputs, i;
  int rc = 1;
  oneinfer_status* status;

  if (Failed(oneinfer_session_options_create(&options), "session_options_create")) return 1;
  if (Failed(oneinfer_session_options_set_num_threads(options, 1), "set_num_threads")) goto done;
  if (Failed(oneinfer_session_load(path, options, &session), "session_load")) goto done;
  for (i = 0; i < oneinfer_session_input_count(session) && num_feeds < 16; ++i) {
    oneinfer_io_info info;
    if (Failed(oneinfer_session_input_info(session, i, &info), "input_info")) goto done;
    if (info.has_default) continue; /* an initializer stands behind it */
    feeds[num_feeds] = MakeInput(&info, dim_name, dim_size);
    if (feeds[num_feeds] == NULL) goto done;
    names[num_feeds] = info.name;
    printf("input %s %s ", info.name, oneinfer_dtype_name(info.dtype));
    PrintShape(oneinfer_tensor_rank(feeds[num_feeds]), oneinfer_tensor_shape(feeds[num_feeds]));
    printf("\n");
    ++num_feeds;
  }
  num_outputs = oneinfer_session_output_count(session);
  if (num_outputs > 16) goto done;
  /* NULL output names: every graph output, in graph order. */
  if (Failed(oneinfer_session_run(session, names, (const oneinfer_tensor* const*)feeds, num_feeds, NULL, num_outputs,
                                  outputs), "session_run")) goto done;
  for (i = 0; i < num_outputs; ++i) {
    oneinfer_io_info info;
    oneinfer_session_output_info(session, i, &info); /* i is in range: no status to free */
    PrintOutput(info.name, outputs[i]);
    oneinfer_tensor_release(outputs[i]);
  }

  /* Errors are values: a float feed over the program's own memory, one rank too many. */
  if (num_feeds > 0) {
    float memory[64] = {0};
    int64_t shape[8];
    size_t rank = oneinfer_tensor_rank(feeds[0]), d;
    oneinfer_tensor* bad = NULL;
    oneinfer_tensor* kept = feeds[0];
    for (d = 0; d < rank && d < 7; ++d) shape[d] = 1;
    shape[rank] = 1;
    if (Failed(oneinfer_tensor_create_view(ONEINFER_DTYPE_FLOAT32, shape, rank + 1, memory, sizeof(float), &bad),
               "tensor_create_view")) goto done;
    feeds[0] = bad;
    status = oneinfer_session_run(session, names, (const oneinfer_tensor* const*)feeds, num_feeds, NULL, num_outputs,
                                  outputs);
    feeds[0] = kept;
    oneinfer_tensor_release(bad);
    if (status == NULL) {
      fprintf(stderr, "c_run_graph: a feed of the wrong rank was accepted\n");
      for (i = 0; i < num_outputs; ++i) oneinfer_tensor_release(outputs[i]);
      goto done;
    }
    printf("error (expected): %s\n", oneinfer_status_message(status));
    oneinfer_status_release(status);
  }
  rc = 0;
done:
  for (i = 0; i < num_feeds; ++i) oneinfer_tensor_release(feeds[i]);
  oneinfer_session_release(session);
  oneinfer_session_options_release(options);
  return rc;
}

static int PrintId(int32_t id, const float* logits, int64_t vocab, void* user_data) {
  (void)logits;
  (void)vocab;
  ++*(int*)user_data;
  printf(" %" PRId32, id);
  return 1; /* go on */
}

static int Generate(const char* model, const char* tokenizer_path, const char* prompt, int max_new_tokens) {
  oneinfer_tokenizer* tokenizer = NULL;
  oneinfer_session* session = NULL;
  oneinfer_generator* generator = NULL;
  int32_t* prompt_ids = NULL;
  int32_t* generated = NULL;
  char* text = NULL;
  size_t num_prompt = 0, text_length = 0, i;
  int32_t stop_ids[2];
  size_t num_stop = 0;
  int callbacks = 0, rc = 1;
  const char* stop_tokens[2] = {"<|im_end|>", "<|endoftext|>"};
  oneinfer_generate_options options;
  oneinfer_generation_result result;
  oneinfer_session_options* session_options = NULL;

  if (Failed(oneinfer_tokenizer_load(tokenizer_path, &tokenizer), "tokenizer_load")) goto done;
  if (Failed(oneinfer_tokenizer_encode(tokenizer, prompt, strlen(prompt), &prompt_ids, &num_prompt), "encode")) goto done;
  printf("prompt ids:");
  for (i = 0; i < num_prompt; ++i) printf(" %" PRId32, prompt_ids[i]);
  printf("\n");
  for (i = 0; i < 2; ++i) {
    oneinfer_status* status = oneinfer_tokenizer_token_id(tokenizer, stop_tokens[i], &stop_ids[num_stop]);
    if (status == NULL) ++num_stop;
    oneinfer_status_release(status); /* a tokenizer without the token: no stop id for it */
  }

  if (Failed(oneinfer_session_options_create(&session_options), "session_options_create")) goto done;
  if (Failed(oneinfer_session_options_set_num_threads(session_options, 1), "set_num_threads")) goto done;
  if (Failed(oneinfer_session_load(model, session_options, &session), "session_load")) goto done;
  if (Failed(oneinfer_generator_create(session, &generator), "generator_create")) goto done;

  oneinfer_generate_options_init(&options);
  options.max_new_tokens = max_new_tokens;
  options.stop_ids = stop_ids;
  options.num_stop_ids = num_stop;
  generated = (int32_t*)malloc(sizeof(int32_t) * (size_t)(max_new_tokens > 0 ? max_new_tokens : 1));
  if (generated == NULL) goto done;
  printf("ids:");
  if (Failed(oneinfer_generator_generate(generator, prompt_ids, num_prompt, &options, PrintId, &callbacks, generated,
                                         (size_t)max_new_tokens, &result), "generate")) goto done;
  printf("\n");
  if ((size_t)callbacks != result.num_generated) {
    fprintf(stderr, "c_run_graph: %d callbacks for %zu tokens\n", callbacks, result.num_generated);
    goto done;
  }
  printf("generated %zu tokens, stopped by %s\n", result.num_generated, result.stopped_by_id ? "stop id" : "max tokens");
  if (Failed(oneinfer_tokenizer_decode(tokenizer, generated, result.num_generated, 1, &text, &text_length), "decode"))
    goto done;
  printf("text: %s\n", text);
  rc = 0;
done:
  oneinfer_free(text);
  free(generated);
  oneinfer_free(prompt_ids);
  oneinfer_generator_release(generator);
  oneinfer_session_release(session);
  oneinfer_session_options_release(session_options);
  oneinfer_tokenizer_release(tokenizer);
  return rc;
}

int main(int argc, char** argv) {
  const char* dim_name = NULL;
  int64_t dim_size = 2;
  int arg = 2;
  if (argc < 2) {
    fprintf(stderr, "usage: c_run_graph GRAPH.onnx [--dim NAME=SIZE] [LM.onnx TOKENIZER.json PROMPT MAX_NEW_TOKENS]\n");
    return 2;
  }
  if (oneinfer_abi_version() != ONEINFER_C_ABI_VERSION) {
    fprintf(stderr, "c_run_graph: built for C ABI %d, the library implements %u\n", ONEINFER_C_ABI_VERSION,
            (unsigned)oneinfer_abi_version());
    return 1;
  }
  printf("library: %s (C ABI %u)\n", oneinfer_version_string(), (unsigned)oneinfer_abi_version());
  static char dim_buffer[256];
  if (argc >= 4 && strcmp(argv[2], "--dim") == 0) {
    const char* eq = strchr(argv[3], '=');
    size_t len = eq ? (size_t)(eq - argv[3]) : 0;
    if (eq == NULL || len >= sizeof(dim_buffer)) return 2;
    memcpy(dim_buffer, argv[3], len);
    dim_buffer[len] = '\0';
    dim_name = dim_buffer;
    dim_size = strtoll(eq + 1, NULL, 10);
    arg = 4;
  }
  if (RunGraph(argv[1], dim_name, dim_size) != 0) return 1;
  if (argc >= arg + 4) return Generate(argv[arg], argv[arg + 1], argv[arg + 2], atoi(argv[arg + 3]));
  return 0;
}
