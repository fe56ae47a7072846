/* Embedding carve from plain C, through the installed package:
 *
 *   cc -std=c11 main.c $(pkg-config --cflags --libs carve) -o embed_c && ./embed_c
 *
 * Compiles model.carve (beside this file; run from this folder), runs it on caller
 * memory without copies, checks the output against values computed by hand, and prints
 * the memory plan. Exit 0 on success. */
#include <stdio.h>

#include <carve/carve.h>

/* Prints carve's error and returns 1 from main. */
#define TRY(call)                                                                             \
  do {                                                                                        \
    carve_status* st_ = (call);                                                               \
    if (st_) {                                                                                \
      fprintf(stderr, "embed_c: %s: %s\n", carve_code_name(carve_status_code(st_)),          \
              carve_status_message(st_));                                                     \
      carve_status_free(st_);                                                                 \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

int main(void) {
  printf("carve %s\n", carve_version());
  carve_session* session;
  TRY(carve_session_create(NULL, &session));
  carve_compile_options options = {.size = sizeof options, .strategy = "best"};
  carve_program* program;
  TRY(carve_session_compile_text_file(session, "model.carve", &options, &program));

  float x[2][3] = {{1.0f, 2.0f, 3.0f}, {-1.0f, 0.5f, 2.0f}};
  const int64_t dims[2] = {2, 3};
  carve_tensor* input;
  TRY(carve_tensor_wrap(CARVE_F32, dims, 2, x, sizeof x, 0, &input)); /* zero copy */
  carve_tensor* output = NULL; /* NULL: carve allocates it */
  const carve_tensor* inputs[1] = {input};
  TRY(carve_program_run(program, inputs, 1, &output, 1, NULL));

  const float want[8] = {0.0f, 2.8f, 2.05f, 3.1f, 0.0f, 3.05f, 1.675f, 0.0f};
  const float* y = carve_tensor_data(output);
  int bad = 0;
  for (int i = 0; i < 8; ++i)
    if (y[i] - want[i] > 1e-5f || want[i] - y[i] > 1e-5f) {
      fprintf(stderr, "embed_c: y[%d] = %g, want %g\n", i, y[i], want[i]);
      bad = 1;
    }

  carve_plan_summary plan = {.size = sizeof plan};
  TRY(carve_program_plan(program, &plan));
  printf("plan (%s): arena %lld bytes, lower bound %lld, no reuse %lld\n", plan.strategy,
         (long long)plan.arena_bytes, (long long)plan.lower_bound_bytes, (long long)plan.no_reuse_bytes);
  printf("y = [%g %g %g %g; %g %g %g %g]: %s\n", y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7],
         bad ? "WRONG" : "as expected");

  carve_tensor_free(output);
  carve_tensor_free(input);
  carve_program_free(program);
  carve_session_free(session);
  return bad;
}
