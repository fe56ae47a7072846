/* carve's C ABI (C11): compile a model once, plan its memory, run it many times.
 *
 *   carve_session* s; carve_program* p; carve_tensor *x, *y = NULL;
 *   carve_session_create(NULL, &s);
 *   carve_session_compile_onnx_file(s, "model.onnx", NULL, &p);
 *   carve_tensor_wrap(CARVE_F32, dims, 2, data, sizeof data, 0, &x);   // zero copy
 *   carve_program_run(p, &x, 1, &y, 1, NULL);                          // y: carve-owned
 *   ... carve_tensor_data(y) ...
 *   carve_tensor_free(y); carve_tensor_free(x); carve_program_free(p); carve_session_free(s);
 *
 * Contract (every function)
 *  - Errors: functions that can fail return carve_status*, NULL on success. A non-NULL
 *    status carries a code and a message naming the argument, node, value or line; the
 *    caller owns it and frees it with carve_status_free. On failure, out-parameters are
 *    left unchanged. No C++ exception crosses this ABI: allocation failures become
 *    CARVE_OUT_OF_MEMORY, anything unexpected CARVE_INTERNAL.
 *  - NULL: every pointer argument must be non-NULL unless its comment says otherwise
 *    (CARVE_INVALID_ARGUMENT naming the argument). carve_*_free(NULL) is a no-op.
 *  - Ownership: objects returned through `out` parameters are the caller's and are freed
 *    with the matching carve_*_free. Strings and arrays returned by accessors belong to
 *    the object they came from and stay valid while it lives.
 *  - Lifetime: a program may outlive its session (it keeps the kernels it needs alive).
 *    A wrapped tensor does not own its memory: the memory must outlive the tensor.
 *  - Options structs: the first field `size` is sizeof the struct the caller was built
 *    with (`carve_compile_options o = {.size = sizeof o};`); fields past it take their defaults,
 *    so older callers keep working when fields are added. A zero field is its default.
 *    Passing NULL means all defaults.
 *  - Thread-safety: a session may compile from several threads at once. A program runs
 *    one call at a time (concurrent carve_program_run calls on it wait for each other);
 *    its accessors may be called at any time. carve_cancel_request may be called from
 *    any thread. Tensors are not synchronised: don't write one while a run reads it.
 */
#ifndef CARVE_CARVE_H_
#define CARVE_CARVE_H_

#include <stddef.h>
#include <stdint.h>

#if defined(CARVE_BUILDING_LIBRARY)
#define CARVE_API __attribute__((visibility("default")))
#else
#define CARVE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version, status ---------------------------------------------------------------- */

/* "MAJOR.MINOR.PATCH" of the library loaded (static storage). MAJOR is the SONAME's. */
CARVE_API const char* carve_version(void);

/* Same order and meaning as carve::ErrorCode (carve/status.h). */
typedef enum carve_code {
  CARVE_OK = 0,
  CARVE_INVALID_ARGUMENT,
  CARVE_PARSE_ERROR,
  CARVE_VERIFY_ERROR,
  CARVE_SHAPE_ERROR,
  CARVE_TYPE_MISMATCH,
  CARVE_OUT_OF_BOUNDS,
  CARVE_NOT_ALLOCATED,
  CARVE_NOT_CPU_ACCESSIBLE,
  CARVE_READ_ONLY,
  CARVE_OUT_OF_MEMORY,
  CARVE_IO_ERROR,
  CARVE_NOT_FOUND,
  CARVE_UNSUPPORTED,
  CARVE_INFEASIBLE,
  CARVE_TIMEOUT,
  CARVE_CANCELLED,
  CARVE_UNAVAILABLE,
  CARVE_INTERNAL,
  CARVE_CODE_MAX_ENUM = 0x7FFFFFFF /* not a code: keeps the enum 32-bit, any value checkable */
} carve_code;

typedef struct carve_status carve_status;

/* CARVE_OK for NULL. */
CARVE_API carve_code carve_status_code(const carve_status* status);
/* The message ("" for NULL), valid until the status is freed. */
CARVE_API const char* carve_status_message(const carve_status* status);
CARVE_API void carve_status_free(carve_status* status);
/* "InvalidArgument", ... (static storage); "?" for a value outside the enum. */
CARVE_API const char* carve_code_name(carve_code code);

/* ---- tensors ------------------------------------------------------------------------ */

/* Same order as carve::ir::DType. Elements are little-endian; bool is one byte 0/1. */
typedef enum carve_dtype {
  CARVE_F32 = 0, CARVE_F16, CARVE_BF16, CARVE_F64, CARVE_I8, CARVE_I32, CARVE_I64, CARVE_U8, CARVE_BOOL,
  CARVE_I16, CARVE_U16, CARVE_U32, CARVE_U64,
  CARVE_DTYPE_MAX_ENUM = 0x7FFFFFFF /* not a dtype: keeps the enum 32-bit, any value checkable */
} carve_dtype;

/* A dtype, a row-major shape and bytes: caller memory (wrapped) or carve's (created). */
typedef struct carve_tensor carve_tensor;

/* Wraps caller memory without copying: runs read (and, when `writable`, write) it in
 * place. `bytes` must equal the element count times the dtype's size, `dims` has `rank`
 * entries (NULL allowed when rank is 0). The memory must stay valid and unmoved until
 * the tensor is freed; carve never frees it. Errors: CARVE_INVALID_ARGUMENT (a bad
 * dtype, NULL data with bytes > 0, a size that does not match), CARVE_SHAPE_ERROR. */
CARVE_API carve_status* carve_tensor_wrap(carve_dtype dtype, const int64_t* dims, size_t rank, void* data,
                                          size_t bytes, int writable, carve_tensor** out);
/* New carve-owned tensor, zero-filled and writable. Errors as carve_tensor_wrap, plus
 * CARVE_OUT_OF_MEMORY. */
CARVE_API carve_status* carve_tensor_create(carve_dtype dtype, const int64_t* dims, size_t rank, carve_tensor** out);
CARVE_API void carve_tensor_free(carve_tensor* tensor);

CARVE_API carve_dtype carve_tensor_dtype(const carve_tensor* tensor);
CARVE_API size_t carve_tensor_rank(const carve_tensor* tensor);
/* `rank` dims, owned by the tensor. */
CARVE_API const int64_t* carve_tensor_dims(const carve_tensor* tensor);
CARVE_API size_t carve_tensor_byte_size(const carve_tensor* tensor);
/* The first byte in host memory, or NULL when the tensor's memory is not host memory.
 * Writing through it is allowed for writable tensors only. */
CARVE_API void* carve_tensor_data(const carve_tensor* tensor);

/* ---- session ------------------------------------------------------------------------ */

typedef enum carve_device_type {
  CARVE_DEVICE_CPU = 0,
  CARVE_DEVICE_CUDA = 1,
  CARVE_DEVICE_MAX_ENUM = 0x7FFFFFFF /* not a device: keeps the enum 32-bit, any value checkable */
} carve_device_type;

typedef struct carve_session_options {
  size_t size;               /* sizeof(carve_session_options) */
  int32_t threads;           /* worker threads of parallel runs; 0 = hardware concurrency */
  carve_device_type device;  /* CPU (default) or CUDA */
  int32_t device_ordinal;    /* which CUDA device */
} carve_session_options;

typedef struct carve_session carve_session;

/* Errors: CARVE_INVALID_ARGUMENT (negative threads, an unknown device, a bad `size`),
 * CARVE_UNAVAILABLE ("no CUDA device: ..." without a driver or device). */
CARVE_API carve_status* carve_session_create(const carve_session_options* options, carve_session** out);
CARVE_API void carve_session_free(carve_session* session);

/* ---- compile ------------------------------------------------------------------------ */

typedef struct carve_program carve_program;

typedef struct carve_compile_options {
  size_t size;               /* sizeof(carve_compile_options) */
  const char* strategy;      /* planner strategy: "greedy-size" (NULL), "best", "exact", ... */
  const char* order;         /* "given" (NULL) or "memory" */
  int32_t no_inplace;        /* 1: no in-place reuse of dying inputs */
  int32_t no_fuse;           /* 1: one kernel per node */
  int32_t sequential;        /* 1: run launches one after another (no threads) */
  int32_t parallel_safe;     /* 1: no byte sharing between values the DAG leaves unordered */
  double plan_time_limit_seconds; /* 0 = 10 s */
  /* Optional: the graph's handles bind this program's handles of the same name (shared
   * state, e.g. a KV cache written by a prefill program and read by a decode program);
   * the others start as zeros. The program must stay alive while compiling. */
  const carve_program* share_handles_with;
} carve_compile_options;

/* Compile a model. Each graph handle gets a zero-filled handle (or a shared one, above).
 * Errors name the node, value or line: CARVE_IO_ERROR (the file), CARVE_PARSE_ERROR,
 * CARVE_VERIFY_ERROR, CARVE_SHAPE_ERROR, CARVE_TYPE_MISMATCH, CARVE_UNSUPPORTED (an
 * operator the importer does not handle), CARVE_NOT_FOUND (an unknown strategy),
 * CARVE_UNAVAILABLE (a library built without the CPU JIT, or without the ONNX importer
 * for carve_session_compile_onnx_file). */
CARVE_API carve_status* carve_session_compile_onnx_file(carve_session* session, const char* path,
                                                        const carve_compile_options* options, carve_program** out);
/* carve's text format (carve/ir/text.h). */
CARVE_API carve_status* carve_session_compile_text_file(carve_session* session, const char* path,
                                                        const carve_compile_options* options, carve_program** out);
CARVE_API carve_status* carve_session_compile_text(carve_session* session, const char* text, size_t length,
                                                   const carve_compile_options* options, carve_program** out);
CARVE_API void carve_program_free(carve_program* program);

/* ---- program signature -------------------------------------------------------------- */

typedef struct carve_tensor_info {
  size_t size;           /* sizeof(carve_tensor_info), set by the caller */
  const char* name;      /* owned by the program */
  carve_dtype dtype;
  size_t rank;
  const int64_t* dims;   /* `rank` entries, owned by the program */
} carve_tensor_info;

CARVE_API size_t carve_program_input_count(const carve_program* program);
CARVE_API size_t carve_program_output_count(const carve_program* program);
CARVE_API size_t carve_program_handle_count(const carve_program* program);
/* Input/output/handle `index`, in the order runs take them. CARVE_OUT_OF_BOUNDS past the
 * count. */
CARVE_API carve_status* carve_program_input_info(const carve_program* program, size_t index, carve_tensor_info* out);
CARVE_API carve_status* carve_program_output_info(const carve_program* program, size_t index, carve_tensor_info* out);
CARVE_API carve_status* carve_program_handle_info(const carve_program* program, size_t index, carve_tensor_info* out);

/* ---- run ---------------------------------------------------------------------------- */

/* A cancellation flag for runs; request it from any thread. */
typedef struct carve_cancel carve_cancel;
CARVE_API carve_status* carve_cancel_create(carve_cancel** out);
CARVE_API void carve_cancel_request(carve_cancel* cancel);
CARVE_API void carve_cancel_free(carve_cancel* cancel);

typedef struct carve_run_options {
  size_t size;                 /* sizeof(carve_run_options) */
  int32_t check_hazards;       /* 1: run in parallel and count launches that raced */
  int32_t fail_on_hazard;      /* 1 (with check_hazards): a race fails the run, CARVE_INTERNAL */
  int32_t record_trace;        /* 1: keep per-task timings for carve_program_write_trace */
  const carve_cancel* cancel;  /* optional; must outlive the run */
  int64_t timeout_ns;          /* > 0: a deadline this long after the call starts */
} carve_run_options;

/* Runs the program once. `inputs` has one tensor per input (carve_program_input_info
 * order), each of exactly that dtype and shape, read in place (no copy). `outputs` has
 * one slot per output: a non-NULL slot is filled in place (writable, exactly the
 * output's type); a NULL slot receives a new carve-owned tensor on success, which the
 * caller frees. Outputs may not share a byte with inputs or with each other.
 * Errors: CARVE_INVALID_ARGUMENT (counts, overlaps, a handle left invalid by an earlier
 * failed run), CARVE_READ_ONLY (an output wrapped read-only), CARVE_TYPE_MISMATCH,
 * CARVE_SHAPE_ERROR,
 * CARVE_CANCELLED (cancel requested or deadline passed: no further launch starts; the
 * handles the program writes are then invalid until written), CARVE_OUT_OF_BOUNDS (a
 * position outside a handle), CARVE_INTERNAL (a race with fail_on_hazard). */
CARVE_API carve_status* carve_program_run(carve_program* program, const carve_tensor* const* inputs,
                                          size_t num_inputs, carve_tensor** outputs, size_t num_outputs,
                                          const carve_run_options* options);

typedef struct carve_run_info {
  size_t size;             /* sizeof(carve_run_info), set by the caller */
  int32_t parallel;        /* 0: the sequential fallback ran */
  int32_t threads;
  int32_t hazards_checked;
  int64_t races;           /* conflicting launches that overlapped (with check_hazards) */
  int64_t elapsed_ns;
} carve_run_info;

/* What the program's last successful run did. CARVE_NOT_FOUND before any run. */
CARVE_API carve_status* carve_program_last_run(const carve_program* program, carve_run_info* out);
/* Writes the Chrome/Perfetto trace (JSON) of the last run made with record_trace or
 * check_hazards. CARVE_INVALID_ARGUMENT when it recorded no timings, CARVE_IO_ERROR. */
CARVE_API carve_status* carve_program_write_trace(const carve_program* program, const char* path);

/* ---- handles (state that persists across runs, e.g. a KV cache) ---------------------- */

/* A new carve-owned copy of handle `name`'s current value. CARVE_NOT_FOUND lists the
 * program's handles; CARVE_INVALID_ARGUMENT when a failed run left it invalid. Waits
 * for a run that uses the handle. */
CARVE_API carve_status* carve_program_read_handle(const carve_program* program, const char* name,
                                                  carve_tensor** out);
/* Copies `value` (exactly the handle's dtype and shape) into handle `name`. */
CARVE_API carve_status* carve_program_write_handle(carve_program* program, const char* name,
                                                   const carve_tensor* value);

/* ---- plan --------------------------------------------------------------------------- */

typedef struct carve_plan_summary {
  size_t size;                /* sizeof(carve_plan_summary), set by the caller */
  const char* strategy;       /* owned by the program */
  int64_t arena_bytes;        /* the one arena all planned values share */
  int64_t lower_bound_bytes;  /* no plan can use less (peak of live bytes) */
  int64_t no_reuse_bytes;     /* sum of planned buffer sizes */
  int64_t buffers, views, inplace;  /* planned buffers; values folded as views; in place */
  double plan_seconds;
} carve_plan_summary;

CARVE_API carve_status* carve_program_plan(const carve_program* program, carve_plan_summary* out);

typedef struct carve_value_plan {
  size_t size;            /* sizeof(carve_value_plan), set by the caller */
  const char* name;       /* owned by the program */
  const char* kind;       /* "input", "const" or "intermediate" */
  int32_t in_arena;       /* 0: caller memory, a constant, a handle, or kept in registers */
  uint64_t buffer_id;     /* arena values: the value's view (0 otherwise) */
  uint64_t storage_id;    /* arena values: the arena's storage, shared by all of them */
  int64_t offset;         /* arena values: bytes from the arena's start (-1 otherwise) */
  int64_t bytes;          /* the value's size */
} carve_value_plan;

/* One entry per graph value, in value-id order. */
CARVE_API size_t carve_program_value_count(const carve_program* program);
CARVE_API carve_status* carve_program_value_plan(const carve_program* program, size_t index, carve_value_plan* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CARVE_CARVE_H_ */
