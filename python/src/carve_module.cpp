// carve._carve: the Python module's native part (pybind11), a thin layer over libcarve.so:
// the C ABI (carve/carve.h) for sessions, programs and runs, the C++ planner for
// carve.plan(). python/carve/__init__.py re-exports it with the error classes.
//
// Memory: inputs (numpy arrays and DLPack tensors on the CPU) are wrapped, not copied,
// and kept alive until the run returns; returned arrays view carve-owned tensors that the
// array frees. Errors: every carve status becomes the carve.Error subclass of its code,
// with carve's message. The GIL is released while a run executes, so another thread
// can cancel it.
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "carve/carve.h"
#include "carve/planner/csv.h"
#include "carve/planner/strategy.h"

namespace py = pybind11;

namespace {

[[noreturn]] void raise_error(carve_code code, const std::string& message) {
  py::object cls = py::module_::import("carve").attr("_error_class")(static_cast<int>(code));
  PyErr_SetString(cls.ptr(), message.c_str());
  throw py::error_already_set();
}

void check(carve_status* status) {
  if (status == nullptr) return;
  const carve_code code = carve_status_code(status);
  std::string message = carve_status_message(status);
  carve_status_free(status);
  raise_error(code, message);
}

// A carve.h options/info struct: zeros (the defaults) with its size set.
template <typename T>
T sized() {
  T value{};
  value.size = sizeof(T);
  return value;
}

template <typename T>
T unwrap(carve::Result<T> result) {
  if (!result.ok()) raise_error(static_cast<carve_code>(result.status().code()), result.status().message());
  return std::move(result).value();
}

// ---- dtypes ----------------------------------------------------------------------------

struct DTypeInfo {
  carve_dtype dtype;
  const char* numpy;  // numpy's name; bf16 has none (returned as its raw uint16 bits)
  uint8_t dl_code, dl_bits;
};
constexpr DTypeInfo kDTypes[] = {
    {CARVE_F32, "float32", kDLFloat, 32}, {CARVE_F16, "float16", kDLFloat, 16}, {CARVE_BF16, "uint16", kDLBfloat, 16},
    {CARVE_F64, "float64", kDLFloat, 64}, {CARVE_I8, "int8", kDLInt, 8},        {CARVE_I32, "int32", kDLInt, 32},
    {CARVE_I64, "int64", kDLInt, 64},     {CARVE_U8, "uint8", kDLUInt, 8},      {CARVE_BOOL, "bool", kDLUInt, 8},
    {CARVE_I16, "int16", kDLInt, 16},     {CARVE_U16, "uint16", kDLUInt, 16},   {CARVE_U32, "uint32", kDLUInt, 32},
    {CARVE_U64, "uint64", kDLUInt, 64},
};

carve_dtype from_numpy(const py::dtype& dtype, const std::string& what) {
  for (const DTypeInfo& d : kDTypes)
    if (d.dtype != CARVE_BF16 && dtype.is(py::dtype(d.numpy))) return d.dtype;
  raise_error(CARVE_TYPE_MISMATCH, what + ": numpy dtype " + std::string(py::str(static_cast<const py::handle&>(dtype))) + " has no carve dtype");
}

// kDLBool of DLPack 0.8 (Debian 12 ships the 0.6 header, which predates it).
constexpr uint8_t kDLBoolCode = 6;

carve_dtype from_dlpack(const DLDataType& t, const std::string& what) {
  if (t.lanes == 1) {
    if (t.code == kDLBoolCode && t.bits == 8) return CARVE_BOOL;
    for (const DTypeInfo& d : kDTypes)
      if (d.dtype != CARVE_BOOL && d.dl_code == t.code && d.dl_bits == t.bits) return d.dtype;
  }
  raise_error(CARVE_TYPE_MISMATCH, what + ": DLPack dtype (code " + std::to_string(t.code) + ", " +
                                       std::to_string(t.bits) + " bits, " + std::to_string(t.lanes) +
                                       " lanes) has no carve dtype");
}

// ---- tensors ---------------------------------------------------------------------------

struct TensorDeleter {
  void operator()(carve_tensor* t) const { carve_tensor_free(t); }
};
using TensorPtr = std::unique_ptr<carve_tensor, TensorDeleter>;

// A numpy array over a carve-owned tensor; the array owns (and frees) it.
py::array to_numpy(TensorPtr tensor) {
  const carve_dtype dtype = carve_tensor_dtype(tensor.get());
  const int64_t* dims = carve_tensor_dims(tensor.get());
  std::vector<py::ssize_t> shape(dims, dims + carve_tensor_rank(tensor.get()));
  void* data = carve_tensor_data(tensor.get());
  py::capsule owner(tensor.release(), [](void* p) { carve_tensor_free(static_cast<carve_tensor*>(p)); });
  return py::array(py::dtype(kDTypes[dtype].numpy), shape, data, owner);
}

// Releases a consumed DLPack tensor (its producer's memory) through its deleter.
struct DLPackDeleter {
  void operator()(DLManagedTensor* m) const {
    if (m->deleter) m->deleter(m);
  }
};

// An input kept alive (and, for DLPack, released) for the duration of one run.
struct Held {
  TensorPtr tensor;
  py::object keep;
  std::unique_ptr<DLManagedTensor, DLPackDeleter> managed;
};

Held wrap_array(py::array array, const std::string& what, bool writable) {
  if (writable && !array.writeable()) raise_error(CARVE_READ_ONLY, what + ": the array is read-only");
  if (!(array.flags() & py::array::c_style)) {
    if (writable) raise_error(CARVE_INVALID_ARGUMENT, what + ": the array is not C-contiguous");
    array = py::module_::import("numpy").attr("ascontiguousarray")(array);  // the one copy, documented
  }
  const carve_dtype dtype = from_numpy(array.dtype(), what);
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  Held held;
  carve_tensor* t = nullptr;
  check(carve_tensor_wrap(dtype, dims.data(), dims.size(), const_cast<void*>(array.data()),
                          static_cast<size_t>(array.nbytes()), writable ? 1 : 0, &t));
  held.tensor.reset(t);
  held.keep = std::move(array);
  return held;
}

// A producer's __dlpack__ capsule (torch, jax, cupy on the host, numpy): used in place.
Held wrap_dlpack(const py::object& obj, const std::string& what) {
  py::object capsule = obj.attr("__dlpack__")();
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) throw py::error_already_set();
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");  // consumed: we call its deleter
  Held held;
  held.managed.reset(managed);
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU)
    raise_error(CARVE_NOT_CPU_ACCESSIBLE, what + ": DLPack tensor is not in host memory");
  const carve_dtype dtype = from_dlpack(t.dtype, what);
  std::vector<int64_t> dims(t.shape, t.shape + t.ndim);
  int64_t expected = 1, count = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.strides && dims[i] != 1 && t.strides[i] != expected)
      raise_error(CARVE_INVALID_ARGUMENT, what + ": DLPack tensor is not C-contiguous (pass a contiguous one)");
    expected *= dims[i];
    count *= dims[i];
  }
  const size_t bytes = static_cast<size_t>(count) * (t.dtype.bits / 8);
  carve_tensor* wrapped = nullptr;
  check(carve_tensor_wrap(dtype, dims.data(), dims.size(), static_cast<char*>(t.data) + t.byte_offset, bytes, 0,
                          &wrapped));
  held.tensor.reset(wrapped);
  return held;
}

Held wrap_input(const py::handle& value, const std::string& what) {
  if (py::isinstance<py::array>(value)) return wrap_array(py::reinterpret_borrow<py::array>(value), what, false);
  if (py::hasattr(value, "__dlpack__")) return wrap_dlpack(py::reinterpret_borrow<py::object>(value), what);
  return wrap_array(py::module_::import("numpy").attr("asarray")(value), what, false);
}

// ---- session, program ------------------------------------------------------------------

struct Cancel {
  carve_cancel* cancel = nullptr;
  Cancel() { check(carve_cancel_create(&cancel)); }
  ~Cancel() { carve_cancel_free(cancel); }
  void request() { carve_cancel_request(cancel); }
};

struct PlanValue {
  std::string name, kind;
  bool in_arena;
  uint64_t buffer_id, storage_id;
  int64_t offset, size;
};

struct Plan {
  std::string strategy;
  int64_t arena_bytes, lower_bound, no_reuse_bytes, buffers, views, inplace;
  double plan_seconds;
  std::vector<PlanValue> values;
};

struct TensorSpec {
  std::string name, dtype;
  std::vector<int64_t> shape;
};

class Program {
 public:
  explicit Program(carve_program* p) : p_(p) {}
  ~Program() { carve_program_free(p_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  carve_program* get() const { return p_; }

  std::vector<TensorSpec> specs(size_t count, carve_status* (*info)(const carve_program*, size_t, carve_tensor_info*)) const {
    std::vector<TensorSpec> out;
    for (size_t i = 0; i < count; ++i) {
      auto t = sized<carve_tensor_info>();
      check(info(p_, i, &t));
      out.push_back({t.name, kDTypes[t.dtype].numpy, std::vector<int64_t>(t.dims, t.dims + t.rank)});
    }
    return out;
  }
  std::vector<TensorSpec> inputs() const { return specs(carve_program_input_count(p_), carve_program_input_info); }
  std::vector<TensorSpec> outputs() const { return specs(carve_program_output_count(p_), carve_program_output_info); }
  std::vector<TensorSpec> handles() const { return specs(carve_program_handle_count(p_), carve_program_handle_info); }

  py::dict run(const py::object& inputs, const py::object& outputs, bool check_hazards, bool record_trace,
               std::optional<double> timeout, Cancel* cancel) {
    const auto in_specs = inputs_cached(), out_specs = outputs_cached();
    std::vector<Held> held;
    if (py::isinstance<py::dict>(inputs)) {
      py::dict d = inputs;
      for (const auto& [key, _] : d)
        if (std::none_of(in_specs.begin(), in_specs.end(), [&](const TensorSpec& s) { return s.name == py::str(key).cast<std::string>(); }))
          raise_error(CARVE_NOT_FOUND, "run: the program has no input '" + py::str(key).cast<std::string>() + "'");
      for (const TensorSpec& s : in_specs) {
        if (!d.contains(s.name)) raise_error(CARVE_INVALID_ARGUMENT, "run: input '" + s.name + "' is missing");
        py::object value = d[py::str(s.name)];
        held.push_back(wrap_input(value, "input '" + s.name + "'"));
      }
    } else {
      py::sequence seq = inputs;
      if (seq.size() != in_specs.size())
        raise_error(CARVE_INVALID_ARGUMENT, "run: " + std::to_string(seq.size()) + " inputs given, the program takes " +
                                                std::to_string(in_specs.size()));
      for (size_t i = 0; i < in_specs.size(); ++i) {
        py::object value = seq[i];
        held.push_back(wrap_input(value, "input '" + in_specs[i].name + "'"));
      }
    }
    std::vector<Held> given(out_specs.size());
    std::vector<carve_tensor*> out_slots(out_specs.size(), nullptr);
    if (!outputs.is_none()) {
      py::dict d = outputs;
      for (size_t i = 0; i < out_specs.size(); ++i)
        if (d.contains(out_specs[i].name)) {
          const std::string what = "output '" + out_specs[i].name + "'";
          py::object value = d[py::str(out_specs[i].name)];
          if (!py::isinstance<py::array>(value)) raise_error(CARVE_INVALID_ARGUMENT, what + ": expected a numpy array");
          given[i] = wrap_array(py::reinterpret_borrow<py::array>(value), what, true);
          out_slots[i] = given[i].tensor.get();
        }
    }
    std::vector<const carve_tensor*> in_ptrs;
    for (const Held& h : held) in_ptrs.push_back(h.tensor.get());
    auto options = sized<carve_run_options>();
    options.check_hazards = check_hazards;
    options.record_trace = record_trace;
    options.cancel = cancel ? cancel->cancel : nullptr;
    if (timeout) {
      if (*timeout <= 0) raise_error(CARVE_INVALID_ARGUMENT, "run: timeout must be > 0 seconds");
      options.timeout_ns = static_cast<int64_t>(*timeout * 1e9);
    }
    carve_status* status;
    {
      py::gil_scoped_release release;
      status = carve_program_run(p_, in_ptrs.data(), in_ptrs.size(), out_slots.data(), out_slots.size(), &options);
    }
    check(status);
    py::dict result;
    for (size_t i = 0; i < out_specs.size(); ++i) {
      if (given[i].tensor)
        result[py::str(out_specs[i].name)] = given[i].keep;  // the caller's array, filled in place
      else
        result[py::str(out_specs[i].name)] = to_numpy(TensorPtr(out_slots[i]));
    }
    return result;
  }

  Plan plan() const {
    auto s = sized<carve_plan_summary>();
    check(carve_program_plan(p_, &s));
    Plan plan{s.strategy, s.arena_bytes, s.lower_bound_bytes, s.no_reuse_bytes, s.buffers, s.views, s.inplace,
              s.plan_seconds, {}};
    for (size_t i = 0; i < carve_program_value_count(p_); ++i) {
      auto v = sized<carve_value_plan>();
      check(carve_program_value_plan(p_, i, &v));
      plan.values.push_back({v.name, v.kind, v.in_arena != 0, v.buffer_id, v.storage_id, v.offset, v.bytes});
    }
    return plan;
  }

  py::array handle(const std::string& name) const {
    carve_tensor* t = nullptr;
    check(carve_program_read_handle(p_, name.c_str(), &t));
    return to_numpy(TensorPtr(t));
  }
  void set_handle(const std::string& name, const py::object& value) {
    Held h = wrap_input(value, "handle '" + name + "'");
    check(carve_program_write_handle(p_, name.c_str(), h.tensor.get()));
  }
  py::dict last_run() const {
    auto r = sized<carve_run_info>();
    check(carve_program_last_run(p_, &r));
    py::dict d;
    d["parallel"] = r.parallel != 0;
    d["threads"] = r.threads;
    d["hazards_checked"] = r.hazards_checked != 0;
    d["races"] = r.races;
    d["seconds"] = static_cast<double>(r.elapsed_ns) * 1e-9;
    return d;
  }
  void write_trace(const std::string& path) const { check(carve_program_write_trace(p_, path.c_str())); }

 private:
  const std::vector<TensorSpec>& inputs_cached() {
    if (!in_cache_) in_cache_ = inputs();
    return *in_cache_;
  }
  const std::vector<TensorSpec>& outputs_cached() {
    if (!out_cache_) out_cache_ = outputs();
    return *out_cache_;
  }
  carve_program* p_;
  std::optional<std::vector<TensorSpec>> in_cache_, out_cache_;
};

class Session {
 public:
  Session(int threads, const std::string& device) {
    auto o = sized<carve_session_options>();
    o.threads = threads;
    if (device == "cpu") {
      o.device = CARVE_DEVICE_CPU;
    } else if (device.rfind("cuda", 0) == 0) {
      o.device = CARVE_DEVICE_CUDA;
      o.device_ordinal = device.size() > 5 && device[4] == ':' ? std::stoi(device.substr(5)) : 0;
    } else {
      raise_error(CARVE_INVALID_ARGUMENT, "Session: device '" + device + "' is not 'cpu' or 'cuda[:N]'");
    }
    check(carve_session_create(&o, &s_));
  }
  ~Session() { carve_session_free(s_); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // kind: "onnx" | "text_file" | "text" (python/carve/__init__.py chooses).
  std::unique_ptr<Program> compile(const std::string& source, const std::string& kind, const std::string& strategy,
                                   const std::string& order, bool inplace, bool fuse, bool sequential,
                                   bool parallel_safe, const Program* share_handles_with) {
    auto o = sized<carve_compile_options>();
    o.strategy = strategy.c_str();
    o.order = order.c_str();
    o.no_inplace = !inplace;
    o.no_fuse = !fuse;
    o.sequential = sequential;
    o.parallel_safe = parallel_safe;
    o.share_handles_with = share_handles_with ? share_handles_with->get() : nullptr;
    carve_program* p = nullptr;
    carve_status* status;
    {
      py::gil_scoped_release release;  // JIT compiles take a while
      if (kind == "onnx")
        status = carve_session_compile_onnx_file(s_, source.c_str(), &o, &p);
      else if (kind == "text_file")
        status = carve_session_compile_text_file(s_, source.c_str(), &o, &p);
      else
        status = carve_session_compile_text(s_, source.data(), source.size(), &o, &p);
    }
    check(status);
    return std::make_unique<Program>(p);
  }

 private:
  carve_session* s_ = nullptr;
};

// ---- the planner alone -----------------------------------------------------------------

struct PlannerResult {
  std::string strategy;
  int64_t arena_bytes, lower_bound;
  bool optimal;
  double plan_seconds;
  std::map<std::string, int64_t> offsets;
};

PlannerResult plan_csv(const std::string& path, const std::string& strategy, std::optional<int64_t> capacity,
                       double time_limit) {
  using namespace carve;
  planner::Problem problem = unwrap(planner::read_minimalloc_csv(path));
  std::unique_ptr<planner::Strategy> s = unwrap(planner::make_strategy(strategy));
  planner::PlanOptions options;
  options.capacity = capacity;
  options.time_limit_seconds = time_limit;
  std::optional<Result<planner::PlanResult>> result;
  {
    py::gil_scoped_release release;  // the exact search may take its whole time limit
    result.emplace(s->plan(problem, options));
  }
  planner::PlanResult r = unwrap(std::move(*result));
  PlannerResult out{r.strategy, r.plan.arena_bytes, planner::lower_bound_bytes(problem), r.optimal, r.plan_seconds, {}};
  for (size_t i = 0; i < problem.buffers.size(); ++i) out.offsets[problem.buffers[i].id] = r.plan.offsets[i];
  return out;
}

}  // namespace

PYBIND11_MODULE(_carve, m) {
  m.doc() = "carve's native module; use the `carve` package";
  m.attr("__version__") = carve_version();

  py::class_<TensorSpec>(m, "TensorSpec")
      .def_readonly("name", &TensorSpec::name)
      .def_readonly("dtype", &TensorSpec::dtype)
      .def_readonly("shape", &TensorSpec::shape)
      .def("__repr__", [](const TensorSpec& s) { return "TensorSpec(" + s.name + ", " + s.dtype + ")"; });
  py::class_<PlanValue>(m, "PlanValue")
      .def_readonly("name", &PlanValue::name)
      .def_readonly("kind", &PlanValue::kind)
      .def_readonly("in_arena", &PlanValue::in_arena)
      .def_readonly("buffer_id", &PlanValue::buffer_id)
      .def_readonly("storage_id", &PlanValue::storage_id)
      .def_readonly("offset", &PlanValue::offset)
      .def_readonly("size", &PlanValue::size)
      .def("__repr__", [](const PlanValue& v) {
        return "PlanValue(" + v.name + (v.in_arena ? ", buffer #" + std::to_string(v.buffer_id) + " storage #" +
                                                         std::to_string(v.storage_id) + " +" + std::to_string(v.offset)
                                                   : ", " + v.kind + " (not in the arena)") +
               ", " + std::to_string(v.size) + " bytes)";
      });
  py::class_<Plan>(m, "Plan")
      .def_readonly("strategy", &Plan::strategy)
      .def_readonly("arena_bytes", &Plan::arena_bytes)
      .def_readonly("lower_bound", &Plan::lower_bound)
      .def_readonly("no_reuse_bytes", &Plan::no_reuse_bytes)
      .def_readonly("buffers", &Plan::buffers)
      .def_readonly("views", &Plan::views)
      .def_readonly("inplace", &Plan::inplace)
      .def_readonly("plan_seconds", &Plan::plan_seconds)
      .def_readonly("values", &Plan::values);
  py::class_<PlannerResult>(m, "PlannerResult")
      .def_readonly("strategy", &PlannerResult::strategy)
      .def_readonly("arena_bytes", &PlannerResult::arena_bytes)
      .def_readonly("lower_bound", &PlannerResult::lower_bound)
      .def_readonly("optimal", &PlannerResult::optimal)
      .def_readonly("plan_seconds", &PlannerResult::plan_seconds)
      .def_readonly("offsets", &PlannerResult::offsets);

  py::class_<Cancel>(m, "CancelToken").def(py::init<>()).def("cancel", &Cancel::request);

  py::class_<Program>(m, "Program")
      .def_property_readonly("inputs", &Program::inputs)
      .def_property_readonly("outputs", &Program::outputs)
      .def_property_readonly("handles", &Program::handles)
      .def_property_readonly("plan", &Program::plan)
      .def("run", &Program::run, py::arg("inputs"), py::arg("outputs") = py::none(), py::arg("check_hazards") = false,
           py::arg("record_trace") = false, py::arg("timeout") = py::none(), py::arg("cancel") = py::none())
      .def("handle", &Program::handle, py::arg("name"))
      .def("set_handle", &Program::set_handle, py::arg("name"), py::arg("value"))
      .def_property_readonly("last_run", &Program::last_run)
      .def("write_trace", &Program::write_trace, py::arg("path"));

  py::class_<Session>(m, "Session")
      .def(py::init<int, const std::string&>(), py::arg("threads") = 0, py::arg("device") = "cpu")
      .def("_compile", &Session::compile);

  m.def("_plan_csv", &plan_csv);
}
