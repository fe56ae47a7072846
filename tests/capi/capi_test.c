/* The C ABI (capi/include/carve/carve.h), driven from C11 as an embedder would.
 * One executable; each CARVE_C_TEST(name) is its own CTest test "capi/name" (CMake reads
 * the names from this file). Exit 0 = pass, 1 = fail, 77 = skipped (said why). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carve/carve.h"

#define CARVE_C_TEST(name) static int test_##name(void)
#define FAIL(...) (fprintf(stderr, "%s:%d: ", __FILE__, __LINE__), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), 1)
#define CHECK(cond) do { if (!(cond)) return FAIL("check failed: %s", #cond); } while (0)
/* Expects success; prints carve's message otherwise. */
#define OK(call) do { carve_status* st_ = (call); if (st_) { \
    int rc_ = FAIL("%s: %s: %s", #call, carve_code_name(carve_status_code(st_)), carve_status_message(st_)); \
    carve_status_free(st_); return rc_; } } while (0)
/* Expects `code`, with `needle` in the message. */
#define EXPECT_ERROR(call, code, needle) do { carve_status* st_ = (call); \
    if (carve_status_code(st_) != (code) || !strstr(carve_status_message(st_), (needle))) { \
      int rc_ = FAIL("%s: want %s containing '%s', got %s: %s", #call, carve_code_name(code), (needle), \
                     carve_code_name(carve_status_code(st_)), carve_status_message(st_)); \
      carve_status_free(st_); return rc_; } carve_status_free(st_); } while (0)

enum { SKIP = 77 };

/* y = x * x + x, and an accumulator handle: acc += y each run. */
static const char kModel[] =
    "graph square_acc {\n"
    "  handle acc: f32[4]\n"
    "  input x: f32[4]\n"
    "  m = mul(x, x) -> sq: f32[4]\n"
    "  a = add(sq, x) -> y: f32[4]\n"
    "  r = read_handle() {handle=\"acc\"} -> prev: f32[4]\n"
    "  s = add(prev, y) -> total: f32[4]\n"
    "  w = write_handle(total) {handle=\"acc\"}\n"
    "  output y\n"
    "}\n";

/* A CPU session; skips when the library has no CPU JIT (the minimal build: sessions are
 * CARVE_UNAVAILABLE there, which this checks). */
static int create_session(carve_session** session) {
  carve_status* st = carve_session_create(NULL, session);
  if (!CARVE_TEST_HAVE_JIT) {
    printf("SKIP: this build has no CPU JIT: %s\n", carve_status_message(st));
    int unavailable = carve_status_code(st) == CARVE_UNAVAILABLE;
    carve_status_free(st);
    return unavailable ? SKIP : FAIL("a session without the CPU JIT should be CARVE_UNAVAILABLE");
  }
  OK(st);
  return 0;
}

/* Compiles kModel in a new session (skips as create_session). */
static int compile_model(carve_session** session, carve_program** program, const carve_compile_options* options) {
  int rc = create_session(session);
  if (rc) return rc;
  OK(carve_session_compile_text(*session, kModel, sizeof kModel - 1, options, program));
  return 0;
}

CARVE_C_TEST(version) {
  CHECK(strcmp(carve_version(), CARVE_TEST_VERSION) == 0);
  CHECK(carve_status_code(NULL) == CARVE_OK);
  CHECK(strcmp(carve_status_message(NULL), "") == 0);
  CHECK(strcmp(carve_code_name(CARVE_CANCELLED), "Cancelled") == 0);
  CHECK(strcmp(carve_code_name((carve_code)999), "?") == 0);
  carve_status_free(NULL);
  return 0;
}

CARVE_C_TEST(tensor_wrap_and_create) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t dims[2] = {2, 3};
  carve_tensor* t = NULL;
  OK(carve_tensor_wrap(CARVE_F32, dims, 2, data, sizeof data, 0, &t));
  CHECK(carve_tensor_data(t) == (void*)data);  /* caller memory, not a copy */
  CHECK(carve_tensor_rank(t) == 2 && carve_tensor_dims(t)[1] == 3 && carve_tensor_byte_size(t) == 24);
  CHECK(carve_tensor_dtype(t) == CARVE_F32);
  carve_tensor_free(t);
  OK(carve_tensor_create(CARVE_I64, dims, 2, &t));
  const int64_t* values = carve_tensor_data(t);
  for (int i = 0; i < 6; ++i) CHECK(values[i] == 0);
  carve_tensor_free(t);
  OK(carve_tensor_create(CARVE_F32, NULL, 0, &t));  /* a scalar */
  CHECK(carve_tensor_byte_size(t) == 4);
  carve_tensor_free(t);
  /* the 16-bit and wide unsigned dtypes follow bool */
  OK(carve_tensor_create(CARVE_U64, dims, 2, &t));
  CHECK(carve_tensor_dtype(t) == CARVE_U64);
  CHECK(carve_tensor_byte_size(t) == 48);
  carve_tensor_free(t);
  OK(carve_tensor_create(CARVE_I16, dims, 2, &t));
  CHECK(carve_tensor_byte_size(t) == 12);
  carve_tensor_free(t);
  return 0;
}

CARVE_C_TEST(tensor_errors) {
  float data[6] = {0};
  int64_t dims[2] = {2, 3}, negative[1] = {-1};
  carve_tensor* t = NULL;
  EXPECT_ERROR(carve_tensor_wrap(CARVE_F32, dims, 2, data, 20, 0, &t), CARVE_INVALID_ARGUMENT, "");
  EXPECT_ERROR(carve_tensor_wrap((carve_dtype)42, dims, 2, data, 24, 0, &t), CARVE_INVALID_ARGUMENT, "42");
  EXPECT_ERROR(carve_tensor_wrap(CARVE_F32, dims, 2, NULL, 24, 0, &t), CARVE_INVALID_ARGUMENT, "'data' is NULL");
  EXPECT_ERROR(carve_tensor_wrap(CARVE_F32, NULL, 2, data, 24, 0, &t), CARVE_INVALID_ARGUMENT, "'dims' is NULL");
  EXPECT_ERROR(carve_tensor_create(CARVE_F32, negative, 1, &t), CARVE_SHAPE_ERROR, "");
  EXPECT_ERROR(carve_tensor_create(CARVE_F32, dims, 2, NULL), CARVE_INVALID_ARGUMENT, "'out' is NULL");
  CHECK(t == NULL);  /* failures leave out-parameters alone */
  return 0;
}

CARVE_C_TEST(compile_errors_name_the_problem) {
  carve_session* s = NULL;
  carve_program* p = NULL;
  int rc = create_session(&s);
  if (rc) return rc;
  const char bad[] = "graph g {\n  input x: f32[4]\n  y = frobnicate(x) -> z: f32[4]\n  output z\n}\n";
  EXPECT_ERROR(carve_session_compile_text(s, bad, sizeof bad - 1, NULL, &p), CARVE_PARSE_ERROR, "3:");
  EXPECT_ERROR(carve_session_compile_text_file(s, "/nonexistent/model.carve", NULL, &p), CARVE_IO_ERROR,
               "/nonexistent/model.carve");
  EXPECT_ERROR(carve_session_compile_text(s, NULL, 0, NULL, &p), CARVE_INVALID_ARGUMENT, "'text' is NULL");
  EXPECT_ERROR(carve_session_compile_onnx_file(s, "/nonexistent/model.onnx", NULL, &p),
               CARVE_TEST_HAVE_ONNX ? CARVE_IO_ERROR : CARVE_UNAVAILABLE, "model.onnx");
  carve_compile_options bad_size = {0};
  EXPECT_ERROR(carve_session_compile_text(s, kModel, sizeof kModel - 1, &bad_size, &p), CARVE_INVALID_ARGUMENT,
               "carve_compile_options.size");
  carve_session_options threads = {.size = sizeof threads, .threads = -1};
  carve_session* s2 = NULL;
  EXPECT_ERROR(carve_session_create(&threads, &s2), CARVE_INVALID_ARGUMENT, "threads");
  carve_session_options device = {.size = sizeof device, .device = (carve_device_type)7};
  EXPECT_ERROR(carve_session_create(&device, &s2), CARVE_INVALID_ARGUMENT, "device type 7");
  CHECK(p == NULL && s2 == NULL);
  carve_session_free(s);
  return 0;
}

CARVE_C_TEST(signature_and_plan) {
  carve_session* s;
  carve_program* p;
  carve_compile_options options = {.size = sizeof options};
  options.strategy = "best";
  int rc = compile_model(&s, &p, &options);
  if (rc) return rc;
  CHECK(carve_program_input_count(p) == 1 && carve_program_output_count(p) == 1);
  CHECK(carve_program_handle_count(p) == 1);
  carve_tensor_info info = {.size = sizeof info};
  OK(carve_program_input_info(p, 0, &info));
  CHECK(strcmp(info.name, "x") == 0 && info.dtype == CARVE_F32 && info.rank == 1 && info.dims[0] == 4);
  OK(carve_program_handle_info(p, 0, &info));
  CHECK(strcmp(info.name, "acc") == 0);
  EXPECT_ERROR(carve_program_output_info(p, 1, &info), CARVE_OUT_OF_BOUNDS, "output 1");

  carve_plan_summary plan = {.size = sizeof plan};
  OK(carve_program_plan(p, &plan));
  CHECK(plan.strategy[0] != '\0');  /* "best" reports the strategy that won */
  CHECK(plan.arena_bytes >= plan.lower_bound_bytes && plan.no_reuse_bytes >= plan.arena_bytes);
  size_t in_arena = 0;
  uint64_t storage = 0;
  for (size_t i = 0; i < carve_program_value_count(p); ++i) {
    carve_value_plan v = {.size = sizeof v};
    OK(carve_program_value_plan(p, i, &v));
    CHECK(v.bytes == 16);
    if (strcmp(v.name, "x") == 0) CHECK(!v.in_arena && strcmp(v.kind, "input") == 0 && v.offset == -1);
    if (!v.in_arena) continue;
    ++in_arena;
    CHECK(v.buffer_id != 0 && v.offset >= 0 && v.offset + v.bytes <= plan.arena_bytes);
    CHECK(storage == 0 || storage == v.storage_id);  /* one arena storage */
    storage = v.storage_id;
  }
  CHECK(in_arena > 0);
  /* An old caller's smaller struct: only its fields are written. */
  struct { size_t size; const char* strategy; } old = {.size = sizeof old, .strategy = NULL};
  OK(carve_program_plan(p, (carve_plan_summary*)&old));
  CHECK(old.size == sizeof old && old.strategy != NULL);
  carve_program_free(p);
  carve_session_free(s);
  return 0;
}

/* Inputs and caller outputs are used in place: the kernels read the caller's bytes. */
CARVE_C_TEST(run_is_zero_copy) {
  carve_session* s;
  carve_program* p;
  int rc = compile_model(&s, &p, NULL);
  if (rc) return rc;
  float x[4] = {1, 2, 3, -1}, y[4] = {0};
  int64_t dims[1] = {4};
  carve_tensor *tx, *ty;
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, x, sizeof x, 0, &tx));
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, y, sizeof y, 1, &ty));
  const carve_tensor* inputs[1] = {tx};
  OK(carve_program_run(p, inputs, 1, &ty, 1, NULL));
  CHECK(y[0] == 2 && y[1] == 6 && y[2] == 12 && y[3] == 0);
  x[0] = 10;  /* the same tensor, new bytes: the next run reads them */
  OK(carve_program_run(p, inputs, 1, &ty, 1, NULL));
  CHECK(y[0] == 110);
  /* Output memory that is the input's: only detectable because nothing was copied. */
  carve_tensor* alias;
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, x, sizeof x, 1, &alias));
  EXPECT_ERROR(carve_program_run(p, inputs, 1, &alias, 1, NULL), CARVE_INVALID_ARGUMENT, "");
  carve_tensor_free(alias);
  carve_tensor_free(tx);
  carve_tensor_free(ty);
  carve_program_free(p);
  carve_session_free(s);
  return 0;
}

CARVE_C_TEST(run_owned_outputs_and_handles) {
  carve_session* s;
  carve_program* p;
  int rc = compile_model(&s, &p, NULL);
  if (rc) return rc;
  float x[4] = {1, 2, 3, 4};
  int64_t dims[1] = {4};
  carve_tensor* tx;
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, x, sizeof x, 0, &tx));
  const carve_tensor* inputs[1] = {tx};
  for (int i = 0; i < 3; ++i) {
    carve_tensor* y = NULL;
    OK(carve_program_run(p, inputs, 1, &y, 1, NULL));
    CHECK(y != NULL && ((const float*)carve_tensor_data(y))[3] == 20);
    carve_tensor_free(y);
  }
  carve_tensor* acc = NULL;
  OK(carve_program_read_handle(p, "acc", &acc));
  CHECK(((const float*)carve_tensor_data(acc))[3] == 60);  /* 3 runs of 20 */
  float zeros[4] = {0};
  carve_tensor* z;
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, zeros, sizeof zeros, 0, &z));
  OK(carve_program_write_handle(p, "acc", z));
  carve_tensor_free(acc);
  OK(carve_program_read_handle(p, "acc", &acc));
  CHECK(((const float*)carve_tensor_data(acc))[3] == 0);
  carve_tensor_free(acc);
  EXPECT_ERROR(carve_program_read_handle(p, "kv", &acc), CARVE_NOT_FOUND, "acc");
  int64_t two[1] = {2};
  carve_tensor* wrong;
  OK(carve_tensor_create(CARVE_F32, two, 1, &wrong));
  EXPECT_ERROR(carve_program_write_handle(p, "acc", wrong), CARVE_SHAPE_ERROR, "");
  carve_tensor_free(wrong);
  carve_tensor_free(z);
  carve_tensor_free(tx);
  carve_program_free(p);
  carve_session_free(s);
  return 0;
}

/* A second program bound to the first one's handle sees what the first wrote. */
CARVE_C_TEST(shared_handles) {
  carve_session* s;
  carve_program *p, *q;
  int rc = compile_model(&s, &p, NULL);
  if (rc) return rc;
  carve_compile_options options = {.size = sizeof options};
  options.share_handles_with = p;
  OK(carve_session_compile_text(s, kModel, sizeof kModel - 1, &options, &q));
  float x[4] = {1, 1, 1, 1};
  int64_t dims[1] = {4};
  carve_tensor *tx, *y = NULL, *acc = NULL;
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, x, sizeof x, 0, &tx));
  const carve_tensor* inputs[1] = {tx};
  OK(carve_program_run(p, inputs, 1, &y, 1, NULL));
  carve_tensor_free(y);
  y = NULL;
  OK(carve_program_run(q, inputs, 1, &y, 1, NULL));
  OK(carve_program_read_handle(q, "acc", &acc));
  CHECK(((const float*)carve_tensor_data(acc))[0] == 4);  /* 2 + 2 */
  carve_tensor_free(acc);
  carve_tensor_free(y);
  carve_tensor_free(tx);
  carve_program_free(p);  /* q keeps the shared handle alive */
  OK(carve_program_read_handle(q, "acc", &acc));
  carve_tensor_free(acc);
  carve_program_free(q);
  carve_session_free(s);
  return 0;
}

CARVE_C_TEST(run_errors) {
  carve_session* s;
  carve_program* p;
  int rc = compile_model(&s, &p, NULL);
  if (rc) return rc;
  int32_t xi[4] = {0};
  int64_t dims[1] = {4}, three[1] = {3};
  carve_tensor *ti, *t3, *y = NULL;
  OK(carve_tensor_wrap(CARVE_I32, dims, 1, xi, sizeof xi, 0, &ti));
  OK(carve_tensor_create(CARVE_F32, three, 1, &t3));
  const carve_tensor* inputs[1] = {ti};
  EXPECT_ERROR(carve_program_run(p, inputs, 1, &y, 1, NULL), CARVE_TYPE_MISMATCH, "");
  inputs[0] = t3;
  EXPECT_ERROR(carve_program_run(p, inputs, 1, &y, 1, NULL), CARVE_SHAPE_ERROR, "");
  EXPECT_ERROR(carve_program_run(p, inputs, 2, &y, 1, NULL), CARVE_INVALID_ARGUMENT, "2 inputs");
  inputs[0] = NULL;
  EXPECT_ERROR(carve_program_run(p, inputs, 1, &y, 1, NULL), CARVE_INVALID_ARGUMENT, "'x'");
  EXPECT_ERROR(carve_program_run(NULL, inputs, 1, &y, 1, NULL), CARVE_INVALID_ARGUMENT, "'program' is NULL");
  float x[4] = {0}, out[4];
  carve_tensor *tx, *read_only;
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, x, sizeof x, 0, &tx));
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, out, sizeof out, 0, &read_only));
  inputs[0] = tx;
  EXPECT_ERROR(carve_program_run(p, inputs, 1, &read_only, 1, NULL), CARVE_READ_ONLY, "'y'");
  carve_tensor_free(read_only);
  carve_tensor_free(tx);
  CHECK(y == NULL);  /* no output handed out by a failed run */
  carve_run_info info = {.size = sizeof info};
  EXPECT_ERROR(carve_program_last_run(p, &info), CARVE_NOT_FOUND, "not run");
  carve_tensor_free(ti);
  carve_tensor_free(t3);
  carve_program_free(p);
  carve_session_free(s);
  return 0;
}

CARVE_C_TEST(run_cancelled_and_deadline) {
  carve_session* s;
  carve_program* p;
  int rc = compile_model(&s, &p, NULL);
  if (rc) return rc;
  float x[4] = {1, 2, 3, 4};
  int64_t dims[1] = {4};
  carve_tensor *tx, *y = NULL;
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, x, sizeof x, 0, &tx));
  const carve_tensor* inputs[1] = {tx};
  carve_cancel* cancel;
  OK(carve_cancel_create(&cancel));
  carve_run_options options = {.size = sizeof options};
  options.cancel = cancel;
  OK(carve_program_run(p, inputs, 1, &y, 1, &options));  /* not requested: runs */
  carve_tensor_free(y);
  y = NULL;
  carve_cancel_request(cancel);
  EXPECT_ERROR(carve_program_run(p, inputs, 1, &y, 1, &options), CARVE_CANCELLED, "");
  CHECK(y == NULL);
  carve_run_options deadline = {.size = sizeof deadline};
  deadline.timeout_ns = 1;  /* passed before the first launch */
  EXPECT_ERROR(carve_program_run(p, inputs, 1, &y, 1, &deadline), CARVE_CANCELLED, "");
  deadline.timeout_ns = -5;
  EXPECT_ERROR(carve_program_run(p, inputs, 1, &y, 1, &deadline), CARVE_INVALID_ARGUMENT, "timeout_ns");
  carve_cancel_free(cancel);
  carve_tensor_free(tx);
  carve_program_free(p);
  carve_session_free(s);
  return 0;
}

CARVE_C_TEST(hazard_check_and_trace) {
  carve_session* s;
  carve_program* p;
  int rc = compile_model(&s, &p, NULL);
  if (rc) return rc;
  float x[4] = {1, 2, 3, 4};
  int64_t dims[1] = {4};
  carve_tensor *tx, *y = NULL;
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, x, sizeof x, 0, &tx));
  const carve_tensor* inputs[1] = {tx};
  EXPECT_ERROR(carve_program_write_trace(p, "unused.json"), CARVE_INVALID_ARGUMENT, "not run");
  carve_run_options options = {.size = sizeof options};
  options.check_hazards = 1;
  OK(carve_program_run(p, inputs, 1, &y, 1, &options));
  carve_run_info info = {.size = sizeof info};
  OK(carve_program_last_run(p, &info));
  CHECK(info.hazards_checked && info.races == 0 && info.parallel && info.elapsed_ns >= 0);
  const char* path = "capi_trace.json";
  remove(path);
  OK(carve_program_write_trace(p, path));
  FILE* f = fopen(path, "r");
  CHECK(f != NULL);
  static char text[1 << 16];
  CHECK(fread(text, 1, sizeof text - 1, f) > 0);
  fclose(f);
  CHECK(strstr(text, "\"traceEvents\"") != NULL);
  remove(path);
  carve_tensor_free(y);
  carve_tensor_free(tx);
  carve_program_free(p);
  carve_session_free(s);
  return 0;
}

/* A shipped ONNX model: compiled, run on its reference input shape. */
CARVE_C_TEST(onnx_model) {
  carve_session* s;
  carve_program* p = NULL;
  int rc = create_session(&s);
  if (rc) return rc;
  carve_status* st = carve_session_compile_onnx_file(s, CARVE_TEST_SOURCE_DIR "/tests/onnx/models/op_binary.onnx",
                                                     NULL, &p);
  if (!CARVE_TEST_HAVE_ONNX) {
    printf("SKIP: this build has no ONNX importer: %s\n", carve_status_message(st));
    CHECK(carve_status_code(st) == CARVE_UNAVAILABLE);
    carve_status_free(st);
    carve_session_free(s);
    return SKIP;
  }
  OK(st);
  size_t n_in = carve_program_input_count(p), n_out = carve_program_output_count(p);
  CHECK(n_in == 2 && n_out == 1);
  carve_tensor* inputs[2];
  for (size_t i = 0; i < n_in; ++i) {
    carve_tensor_info info = {.size = sizeof info};
    OK(carve_program_input_info(p, i, &info));
    OK(carve_tensor_create(info.dtype, info.dims, info.rank, &inputs[i]));
  }
  carve_tensor* out = NULL;
  OK(carve_program_run(p, (const carve_tensor* const*)inputs, n_in, &out, 1, NULL));
  carve_tensor_info info = {.size = sizeof info};
  OK(carve_program_output_info(p, 0, &info));
  CHECK(carve_tensor_rank(out) == info.rank && carve_tensor_dtype(out) == info.dtype);
  carve_tensor_free(out);
  for (size_t i = 0; i < n_in; ++i) carve_tensor_free(inputs[i]);
  carve_program_free(p);
  carve_session_free(s);
  return 0;
}

/* non_zero's output has a data-dependent extent: carve-owned, it comes back at its actual
 * shape; a caller tensor for it is refused (it could not say the shape). */
CARVE_C_TEST(data_dependent_extent) {
  static const char kNonZero[] =
      "graph nz {\n"
      "  input x: f32[4]\n"
      "  n = non_zero(x) -> idx: i64[1,4], count: i64[]\n"
      "  output idx\n"
      "}\n";
  carve_session* s;
  carve_program* p;
  int rc = create_session(&s);
  if (rc) return rc;
  OK(carve_session_compile_text(s, kNonZero, sizeof kNonZero - 1, NULL, &p));
  float x[4] = {0, 3, 0, 5};
  int64_t dims[1] = {4};
  carve_tensor* tx;
  OK(carve_tensor_wrap(CARVE_F32, dims, 1, x, sizeof x, 0, &tx));
  const carve_tensor* inputs[1] = {tx};
  carve_tensor* idx = NULL;
  OK(carve_program_run(p, inputs, 1, &idx, 1, NULL));
  CHECK(carve_tensor_rank(idx) == 2);
  const int64_t* got = (const int64_t*)carve_tensor_data(idx);
  CHECK(got[0] == 1 && got[1] == 3);
  CHECK(carve_tensor_dims(idx)[0] == 1 && carve_tensor_dims(idx)[1] == 2);
  carve_tensor_free(idx);
  int64_t bound[2] = {1, 4};
  carve_tensor* given;
  OK(carve_tensor_create(CARVE_I64, bound, 2, &given));
  EXPECT_ERROR(carve_program_run(p, inputs, 1, &given, 1, NULL), CARVE_INVALID_ARGUMENT, "data-dependent extent");
  carve_tensor_free(given);
  carve_tensor_free(tx);
  carve_program_free(p);
  carve_session_free(s);
  return 0;
}

#define CASE(name) {#name, test_##name}
static const struct { const char* name; int (*fn)(void); } kCases[] = {
    CASE(version), CASE(tensor_wrap_and_create), CASE(tensor_errors), CASE(compile_errors_name_the_problem),
    CASE(signature_and_plan), CASE(run_is_zero_copy), CASE(run_owned_outputs_and_handles), CASE(shared_handles),
    CASE(run_errors), CASE(run_cancelled_and_deadline), CASE(hazard_check_and_trace), CASE(onnx_model), CASE(data_dependent_extent),
};

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CASE\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; ++i)
    if (strcmp(kCases[i].name, argv[1]) == 0) return kCases[i].fn();
  fprintf(stderr, "no case named '%s'\n", argv[1]);
  return 2;
}
