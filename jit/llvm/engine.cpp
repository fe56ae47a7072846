// The JIT engine: per-group LLVM modules, verification, new-PM optimisation for the host
// CPU, ORC LLJIT code generation, and the in-memory + on-disk kernel caches (see jit.h).
//
// Module shape: an internal always-inline body `carve_body(ptr op0, ..., i64 tb, i64 te)`
// whose pointer parameters carry noalias (unless the group lists the operand in
// may_alias), natural element alignment and dereferenceable(byte size); and the exported
// Kernel-ABI wrapper that loads operands[i] and calls the body. After inlining, the
// noalias facts become scoped alias metadata, so loops vectorise without runtime checks.
//
// Compilation path for one group (compile_group):
//   emit IR -> verify -> key = SHA-256(IR text, triple, cpu, features, LLVM version,
//   carve version, opt level, engine tag) -> memory cache? -> add the module to LLJIT
//   under the symbol "carve_k_<key>" -> lookup triggers CarveCompiler (on this thread, or
//   on another compile thread whose lookup ORC lets pick it up; see materialise):
//   disk entry (kernel_cache.h) that is an object defining exactly that symbol? else
//   optimise (O2/O3 PassBuilder pipeline with the TargetMachine) + codegen + store the
//   entry. If the JIT cannot link an object that came from disk, the entry is discarded
//   and the kernel compiled afresh in a JITDylib of its own (the failed symbol stays in
//   error in the main one), so a bad entry never fails a compile.
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/SelfExecutorProcessControl.h>
#include <llvm/ExecutionEngine/Orc/TaskDispatch.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Attributes.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SHA256.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/TargetParser/Triple.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <iostream>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "carve/jit/tiles.h"
#include "carve/jit/host_target.h"
#include "carve/jit/jit.h"
#include "emit.h"

namespace carve::jit {

namespace {

// Bump when generated code changes in a way the IR text does not show (e.g. pipeline).
constexpr const char* kEngineTag = "carve-jit-engine-1";

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string err_text(llvm::Error err) { return llvm::toString(std::move(err)); }

void atomic_add(std::atomic<double>& a, double v) {
  double cur = a.load();
  while (!a.compare_exchange_weak(cur, cur + v)) {
  }
}

// How a module may use the disk cache, carried to CarveCompiler as a suffix of the module
// identifier (the key): all of it; write only (a retry after a bad entry); not at all
// (a compile() call with use_disk_cache = false).
enum class DiskUse { kReadWrite, kWriteOnly, kNone };
constexpr std::string_view kWriteOnlySuffix = "#write-only";
constexpr std::string_view kNoDiskSuffix = "#no-disk";

std::string module_identifier(const std::string& key, DiskUse use) {
  if (use == DiskUse::kWriteOnly) return key + std::string(kWriteOnlySuffix);
  if (use == DiskUse::kNone) return key + std::string(kNoDiskSuffix);
  return key;
}

// The key of a module identifier, and its disk use.
std::pair<std::string, DiskUse> parse_identifier(std::string id) {
  for (auto [suffix, use] : {std::pair{kWriteOnlySuffix, DiskUse::kWriteOnly}, std::pair{kNoDiskSuffix, DiskUse::kNone}})
    if (id.ends_with(suffix)) return {id.substr(0, id.size() - suffix.size()), use};
  return {id, DiskUse::kReadWrite};
}

std::string kernel_symbol(const std::string& key) { return "carve_k_" + key; }

// Why a disk object cannot serve `symbol`, or "" when it can: it must parse as an object
// file and define exactly that one global symbol (a foreign object would add others to
// the JIT's symbol table).
std::string object_problem(llvm::MemoryBufferRef buffer, const std::string& symbol) {
  auto obj = llvm::object::ObjectFile::createObjectFile(buffer);
  if (!obj) return "not an object file: " + err_text(obj.takeError());
  bool found = false;
  for (const llvm::object::SymbolRef& sym : (*obj)->symbols()) {
    auto flags = sym.getFlags();
    if (!flags) return "unreadable symbol table: " + err_text(flags.takeError());
    if (!(*flags & llvm::object::SymbolRef::SF_Global) || (*flags & llvm::object::SymbolRef::SF_Undefined)) continue;
    auto name = sym.getName();
    if (!name) return "unreadable symbol name: " + err_text(name.takeError());
    if (*name != symbol) return fmt::format("defines '{}', not only '{}'", name->str(), symbol);
    found = true;
  }
  return found ? "" : fmt::format("does not define '{}'", symbol);
}


void optimize_module(llvm::Module& m, llvm::TargetMachine& tm, int level) {
  if (level <= 0) return;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = m.getModuleFlag(detail::kNoSlpFlag) == nullptr;
  pto.LoopUnrolling = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel ol = level == 1 ? llvm::OptimizationLevel::O1
                               : level == 2 ? llvm::OptimizationLevel::O2
                                            : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(ol);
  mpm.run(m, mam);
}

std::string hex(const std::array<uint8_t, 32>& digest) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : digest) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

}  // namespace

struct JitCompiler::Impl {
  JitOptions options;
  std::string cache_dir;
  HostTarget host;
  std::optional<llvm::orc::JITTargetMachineBuilder> jtmb;
  llvm::DataLayout data_layout{""};
  std::unique_ptr<KernelDiskCache> disk;
  CacheLog log;
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::atomic<int64_t> retry_dylibs{0};

  struct Entry {
    uint64_t address = 0;
    bool from_disk = false;
  };
  std::mutex mu;
  std::unordered_map<std::string, std::shared_future<Result<Entry>>> kernels;
  // key -> where its object came from and its size (set by CarveCompiler while ORC
  // materialises the module)
  struct Origin {
    bool from_disk = false;
    size_t object_bytes = 0;
  };
  std::mutex origin_mu;
  std::unordered_map<std::string, Origin> origin;

  std::atomic<int64_t> requested{0}, emitted{0}, codegen{0}, memory_hits{0}, disk_hits{0}, object_bytes{0};
  std::atomic<double> emit_s{0}, codegen_s{0}, link_s{0};

  // Builds the module for a group (function named `carve_kernel`, identifier "carve").
  Result<std::unique_ptr<llvm::Module>> build(llvm::LLVMContext& ctx, const ir::Graph& graph,
                                              const KernelGroup& group);
  Result<CompiledKernel> compile(const ir::Graph& graph, const KernelGroup& group, bool use_disk);
  // Adds the module to `jd` under the kernel's symbol and looks it up (which compiles it
  // on this thread); the function address.
  Result<uint64_t> materialise(llvm::orc::JITDylib& jd, std::unique_ptr<llvm::Module> module,
                               std::unique_ptr<llvm::LLVMContext> ctx, const std::string& key, DiskUse use,
                               const KernelGroup& group);
  // A new JITDylib that resolves libm/libc from this process, for a retry.
  Result<llvm::orc::JITDylib*> retry_dylib();
};

namespace {

// The IR compiler ORC calls while materialising a kernel module: disk cache, else
// optimise + codegen with a TargetMachine of its own (so concurrent compiles are safe).
class CarveCompiler final : public llvm::orc::IRCompileLayer::IRCompiler {
 public:
  CarveCompiler(llvm::orc::JITTargetMachineBuilder jtmb, JitCompiler::Impl& impl)
      : IRCompiler(llvm::orc::irManglingOptionsFromTargetOptions(jtmb.getOptions())),
        jtmb_(std::move(jtmb)),
        impl_(impl) {}

  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> operator()(llvm::Module& m) override {
    const auto [key, use] = parse_identifier(m.getModuleIdentifier());
    if (impl_.disk && use == DiskUse::kReadWrite) {
      if (std::optional<std::string> payload = impl_.disk->load(key)) {
        auto buffer = llvm::MemoryBuffer::getMemBufferCopy(*payload, key);
        std::string problem = object_problem(buffer->getMemBufferRef(), kernel_symbol(key));
        if (problem.empty()) {
          set_origin(key, true, buffer->getBufferSize());
          return buffer;
        }
        impl_.disk->discard(key, problem);
      }
    }
    auto t0 = Clock::now();
    auto tm = jtmb_.createTargetMachine();
    if (!tm) return tm.takeError();
    optimize_module(m, **tm, impl_.options.opt_level);
    llvm::orc::SimpleCompiler compiler(**tm);
    auto obj = compiler(m);
    if (!obj) return obj.takeError();
    impl_.codegen.fetch_add(1);
    atomic_add(impl_.codegen_s, seconds_since(t0));
    if (impl_.disk && use != DiskUse::kNone)
      impl_.disk->store(key, std::string_view((*obj)->getBufferStart(), (*obj)->getBufferSize()));
    set_origin(key, false, (*obj)->getBufferSize());
    return obj;
  }

 private:
  void set_origin(const std::string& key, bool from_disk, size_t object_bytes) {
    std::lock_guard<std::mutex> lock(impl_.origin_mu);
    impl_.origin[key] = {from_disk, object_bytes};
  }

  llvm::orc::JITTargetMachineBuilder jtmb_;
  JitCompiler::Impl& impl_;
};

}  // namespace

Result<std::unique_ptr<llvm::Module>> JitCompiler::Impl::build(llvm::LLVMContext& ctx, const ir::Graph& graph,
                                                               const KernelGroup& group) {
  // Validate the operands so the emitters can trust them.
  for (size_t i = 0; i < group.operands.size(); ++i) {
    const KernelOperand& op = group.operands[i];
    if (op.value != ir::kNoValue && !graph.has_value(op.value)) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("group '{}': operand #{} names value id {}, which the graph lacks", group.name, i, op.value));
    }
  }
  for (auto [a, b] : group.may_alias) {
    if (a < 0 || b < 0 || static_cast<size_t>(a) >= group.operands.size() ||
        static_cast<size_t>(b) >= group.operands.size()) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("group '{}': may_alias pair ({}, {}) is outside the operands", group.name, a, b));
    }
  }
  if (group.num_tiles < 1) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("group '{}': num_tiles {} < 1", group.name, group.num_tiles));
  }

  auto module = std::make_unique<llvm::Module>("carve", ctx);
  module->setTargetTriple(llvm::Triple(host.triple));
  module->setDataLayout(data_layout);

  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type* void_ty = llvm::Type::getVoidTy(ctx);
  const size_t n = group.operands.size();

  auto set_target_attrs = [&](llvm::Function* f) {
    f->addFnAttr("target-cpu", host.cpu);
    f->addFnAttr("target-features", host.features);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    f->addFnAttr(llvm::Attribute::NoFree);
    f->addFnAttr(llvm::Attribute::NoSync);
    f->addFnAttr(llvm::Attribute::WillReturn);
  };

  std::vector<llvm::Type*> params(n, ptr);
  params.push_back(i64);
  params.push_back(i64);
  auto* body_ty = llvm::FunctionType::get(void_ty, params, false);
  auto* body = llvm::Function::Create(body_ty, llvm::Function::InternalLinkage, "carve_body", module.get());
  set_target_attrs(body);
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  std::vector<bool> aliased(n, false);
  for (auto [a, b] : group.may_alias) {
    aliased[static_cast<size_t>(a)] = true;
    aliased[static_cast<size_t>(b)] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    const KernelOperand& op = group.operands[i];
    unsigned idx = static_cast<unsigned>(i);
    if (!aliased[i]) body->addParamAttr(idx, llvm::Attribute::NoAlias);
    int64_t bytes = 0;
    int64_t align = 1;
    if (op.role == OperandRole::kScratch) {
      bytes = group.scratch_bytes;
      align = 16;
    } else if (op.value != ir::kNoValue) {
      const ir::TensorType& t = graph.value(op.value).type;
      auto bs = t.byte_size();
      bytes = bs.ok() ? *bs : 0;
      align = ir::dtype_size(t.dtype);
    }
    if (align > 1) body->addParamAttr(idx, llvm::Attribute::getWithAlignment(ctx, llvm::Align(static_cast<uint64_t>(align))));
    if (bytes > 0) body->addDereferenceableParamAttr(idx, static_cast<uint64_t>(bytes));
    if (op.role == OperandRole::kInput) body->addParamAttr(idx, llvm::Attribute::ReadOnly);
    body->getArg(idx)->setName(fmt::format("op{}", i));
  }
  body->getArg(static_cast<unsigned>(n))->setName("tile_begin");
  body->getArg(static_cast<unsigned>(n + 1))->setName("tile_end");

  llvm::IRBuilder<> b(ctx);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", body));
  detail::EmitContext ec{ctx, *module, b, body, graph, group, {}, body->getArg(static_cast<unsigned>(n)),
                         body->getArg(static_cast<unsigned>(n + 1)), tiling::vector_width_f32(host.features)};
  for (size_t i = 0; i < n; ++i) ec.operand_ptrs.push_back(body->getArg(static_cast<unsigned>(i)));
  CARVE_RETURN_IF_ERROR(detail::emit_group(ec));
  b.CreateRetVoid();

  // The Kernel-ABI wrapper.
  auto* abi_ty = llvm::FunctionType::get(void_ty, {ptr, i64, i64}, false);
  auto* kernel = llvm::Function::Create(abi_ty, llvm::Function::ExternalLinkage, "carve_kernel", module.get());
  set_target_attrs(kernel);
  kernel->addParamAttr(0, llvm::Attribute::NoAlias);
  kernel->addParamAttr(0, llvm::Attribute::ReadOnly);
  if (n > 0) kernel->addDereferenceableParamAttr(0, n * 8);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", kernel));
  std::vector<llvm::Value*> args;
  for (size_t i = 0; i < n; ++i) {
    llvm::Value* slot = b.CreateConstInBoundsGEP1_64(ptr, kernel->getArg(0), i);
    args.push_back(b.CreateAlignedLoad(ptr, slot, llvm::Align(8), fmt::format("op{}", i)));
  }
  args.push_back(kernel->getArg(1));
  args.push_back(kernel->getArg(2));
  b.CreateCall(body, args);
  b.CreateRetVoid();

  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*module, &os)) {
    os.flush();
    return Status(ErrorCode::kInternal,
                  fmt::format("group '{}': generated IR does not verify: {}", group.name, problems));
  }
  return module;
}

Result<CompiledKernel> JitCompiler::Impl::compile(const ir::Graph& graph, const KernelGroup& group, bool use_disk) {
  requested.fetch_add(1);
  auto t0 = Clock::now();
  auto ctx = std::make_unique<llvm::LLVMContext>();
  CARVE_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> module, build(*ctx, graph, group));
  emitted.fetch_add(1);
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    module->print(os, nullptr);
  }
  llvm::SHA256 sha;
  sha.update(text);
  for (const std::string* part : {&host.triple, &host.cpu, &host.features, &host.llvm_version}) {
    sha.update(llvm::StringRef("\0", 1));
    sha.update(*part);
  }
  sha.update(fmt::format("|O{}|{}|carve {}", options.opt_level, kEngineTag, CARVE_VERSION));
  const std::string key = hex(sha.final());
  atomic_add(emit_s, seconds_since(t0));

  CompiledKernel out;
  out.group = group;
  out.key = key;

  std::promise<Result<Entry>> promise;
  std::shared_future<Result<Entry>> future;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = kernels.find(key);
    if (it != kernels.end()) {
      future = it->second;
    } else {
      future = promise.get_future().share();
      kernels.emplace(key, future);
      owner = true;
    }
  }
  if (!owner) {
    Result<Entry> entry = future.get();
    if (!entry.ok()) return entry.status();
    memory_hits.fetch_add(1);
    out.fn = reinterpret_cast<KernelFn>(entry->address);
    out.from_memory_cache = true;
    return out;
  }

  // A failed key stays failed (the failure is deterministic: a disk entry the JIT could not
  // link was already retried below).
  auto fail = [&](Status s) -> Status {
    promise.set_value(s);
    return s;
  };
  auto origin_of = [&] {
    std::lock_guard<std::mutex> lock(origin_mu);
    auto it = origin.find(key);
    return it != origin.end() ? it->second : Origin{};
  };

  auto t1 = Clock::now();
  double codegen_before = codegen_s.load();
  Result<uint64_t> address = materialise(lljit->getMainJITDylib(), std::move(module), std::move(ctx), key,
                                         use_disk ? DiskUse::kReadWrite : DiskUse::kNone, group);
  if (!address.ok() && origin_of().from_disk) {
    // The entry passed its checksum and object checks yet did not link: drop it and
    // compile afresh, in a JITDylib of its own (the symbol is in error in the main one).
    if (disk) disk->discard(key, "the JIT could not load it: " + address.status().message());
    Result<llvm::orc::JITDylib*> jd = retry_dylib();
    if (!jd.ok()) return fail(jd.status());  // (every path sets the promise: others may wait on it)
    auto retry_ctx = std::make_unique<llvm::LLVMContext>();
    auto rebuilt = build(*retry_ctx, graph, group);
    if (!rebuilt.ok()) return fail(rebuilt.status());
    address = materialise(**jd, std::move(*rebuilt), std::move(retry_ctx), key, DiskUse::kWriteOnly, group);
  }
  if (!address.ok()) return fail(address.status());
  double link = seconds_since(t1) - (codegen_s.load() - codegen_before);
  atomic_add(link_s, link > 0 ? link : 0);
  Entry entry;
  entry.address = *address;
  const Origin where = origin_of();
  entry.from_disk = where.from_disk;
  if (entry.from_disk) disk_hits.fetch_add(1);
  object_bytes.fetch_add(static_cast<int64_t>(where.object_bytes));
  promise.set_value(entry);
  out.fn = reinterpret_cast<KernelFn>(entry.address);
  out.from_disk_cache = entry.from_disk;
  return out;
}

Result<uint64_t> JitCompiler::Impl::materialise(llvm::orc::JITDylib& jd, std::unique_ptr<llvm::Module> module,
                                                std::unique_ptr<llvm::LLVMContext> ctx, const std::string& key,
                                                DiskUse use, const KernelGroup& group) {
  // The symbol depends on the key only: cached objects are shared between processes.
  const std::string symbol = kernel_symbol(key);
  module->getFunction("carve_kernel")->setName(symbol);
  module->setModuleIdentifier(module_identifier(key, use));
  if (llvm::Error err = lljit->addIRModule(jd, llvm::orc::ThreadSafeModule(std::move(module), std::move(ctx)))) {
    return Status(ErrorCode::kInternal, fmt::format("group '{}': adding the module to the JIT failed: {}", group.name, err_text(std::move(err))));
  }
  // The lookup compiles and links the module. It is ORC's asynchronous lookup, waited on
  // here with a mutex and condition variable of carve's, not the blocking
  // lljit->lookup(): the thread that finishes a lookup is not always the one that asked
  // for it (ORC runs one lookup at a time through a JITDylib's generator, and the thread
  // that frees the generator resumes the next waiting lookup, whose link then finishes on
  // that thread; a lookup also dispatches every outstanding materialisation, other
  // threads' included). The blocking lookup hands the result over in a std::promise
  // inside uninstrumented libLLVM, which ThreadSanitizer cannot see, so it reported the
  // promise's shared state as raced. The hand-over below is in carve's code, through
  // pthread calls TSan intercepts.
  struct Found {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::optional<std::string> error;
    uint64_t address = 0;
  } found;
  const llvm::orc::SymbolStringPtr name = lljit->mangleAndIntern(symbol);
  lljit->getExecutionSession().lookup(
      llvm::orc::LookupKind::Static,
      llvm::orc::makeJITDylibSearchOrder(&jd, llvm::orc::JITDylibLookupFlags::MatchAllSymbols),
      llvm::orc::SymbolLookupSet(name), llvm::orc::SymbolState::Ready,
      [&found, name](llvm::Expected<llvm::orc::SymbolMap> result) {
        // Possibly on another thread. Notified under the lock: the waiter cannot see
        // `done`, return and destroy `found` before this is finished with it.
        std::lock_guard<std::mutex> lock(found.mu);
        if (!result) {
          found.error = err_text(result.takeError());
        } else if (auto it = result->find(name); it != result->end()) {
          found.address = it->second.getAddress().getValue();
        } else {
          found.error = "the lookup did not return the kernel's symbol";
        }
        found.done = true;
        found.cv.notify_all();
      },
      llvm::orc::NoDependenciesToRegister);
  std::unique_lock<std::mutex> lock(found.mu);
  found.cv.wait(lock, [&] { return found.done; });
  if (found.error) {
    return Status(ErrorCode::kInternal, fmt::format("group '{}': JIT compilation failed: {}", group.name, *found.error));
  }
  return found.address;
}

Result<llvm::orc::JITDylib*> JitCompiler::Impl::retry_dylib() {
  auto jd = lljit->createJITDylib(fmt::format("carve-retry-{}", retry_dylibs.fetch_add(1)));
  if (!jd) return Status(ErrorCode::kInternal, "creating a JITDylib failed: " + err_text(jd.takeError()));
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(lljit->getDataLayout().getGlobalPrefix());
  if (!gen) return Status(ErrorCode::kInternal, "process symbol search failed: " + err_text(gen.takeError()));
  jd->addGenerator(std::move(*gen));
  return &*jd;
}

JitCompiler::JitCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitCompiler::~JitCompiler() = default;

Result<std::unique_ptr<JitCompiler>> JitCompiler::create(const JitOptions& options) {
  static std::once_flag init_once;
  static bool init_ok = false;
  std::call_once(init_once, [] {
    init_ok = !llvm::InitializeNativeTarget() && !llvm::InitializeNativeTargetAsmPrinter() &&
              !llvm::InitializeNativeTargetAsmParser();
  });
  if (!init_ok) return Status(ErrorCode::kUnavailable, "LLVM has no native target for this host");
  if (options.compile_threads < 0) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("compile_threads {} < 0", options.compile_threads));
  }
  if (options.opt_level < 0 || options.opt_level > 3) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("opt_level {} is not in 0..3", options.opt_level));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  CARVE_ASSIGN_OR_RETURN(impl->host, host_target());

  impl->log = options.log ? options.log : CacheLog([](const std::string& line) { std::cerr << "carve: " << line << std::endl; });
  if (options.cache_max_bytes < 1) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("cache_max_bytes {} < 1", options.cache_max_bytes));
  }
  if (options.disk_cache) {
    std::string dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
    if (!dir.empty()) {
      auto disk = KernelDiskCache::open(dir, options.cache_max_bytes, impl->log);
      if (disk.ok()) {
        impl->cache_dir = dir;
        impl->disk = std::move(*disk);
      } else {
        impl->log(disk.status().message() + "; running without a disk cache");
      }
    }
  }

  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return Status(ErrorCode::kUnavailable, "LLVM cannot target this host: " + err_text(jtmb.takeError()));
  jtmb->setCPU(impl->host.cpu);
  {
    llvm::SubtargetFeatures features;
    llvm::SmallVector<llvm::StringRef, 64> parts;
    llvm::StringRef(impl->host.features).split(parts, ',', -1, false);
    for (llvm::StringRef p : parts) features.AddFeature(p);
    jtmb->getFeatures() = features;
  }
  jtmb->setCodeGenOptLevel(options.opt_level >= 3   ? llvm::CodeGenOptLevel::Aggressive
                           : options.opt_level == 0 ? llvm::CodeGenOptLevel::None
                                                    : llvm::CodeGenOptLevel::Default);
  auto dl = jtmb->getDefaultDataLayoutForTarget();
  if (!dl) return Status(ErrorCode::kUnavailable, "no data layout for the host: " + err_text(dl.takeError()));
  impl->data_layout = *dl;
  impl->jtmb = *jtmb;

  Impl* raw = impl.get();
  // In-place task dispatch: every compile runs on a thread that is inside compile() (as a
  // rule the one that asked for it; materialise says when not), so concurrent compile()
  // calls compile concurrently and nothing runs in the background.
  auto epc = llvm::orc::SelfExecutorProcessControl::Create(nullptr, std::make_unique<llvm::orc::InPlaceTaskDispatcher>());
  if (!epc) return Status(ErrorCode::kInternal, "creating the ORC process control failed: " + err_text(epc.takeError()));
  auto lljit = llvm::orc::LLJITBuilder()
                   .setJITTargetMachineBuilder(*jtmb)
                   .setExecutorProcessControl(std::move(*epc))
                   .setSupportConcurrentCompilation(true)
                   .setCompileFunctionCreator(
                       [raw](llvm::orc::JITTargetMachineBuilder jtmb)
                           -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
                         return std::make_unique<CarveCompiler>(std::move(jtmb), *raw);
                       })
                   .create();
  if (!lljit) return Status(ErrorCode::kInternal, "creating the LLJIT failed: " + err_text(lljit.takeError()));
  impl->lljit = std::move(*lljit);
  // libm (erf, exp, tanh, pow, ...) and libc (memcpy) from this process.
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      impl->lljit->getDataLayout().getGlobalPrefix());
  if (!gen) return Status(ErrorCode::kInternal, "process symbol search failed: " + err_text(gen.takeError()));
  impl->lljit->getMainJITDylib().addGenerator(std::move(*gen));
  return std::unique_ptr<JitCompiler>(new JitCompiler(std::move(impl)));
}

Result<std::vector<CompiledKernel>> JitCompiler::compile(const ir::Graph& graph, std::span<const KernelGroup> groups,
                                                         bool use_disk_cache) {
  // Workers take groups in order from a shared counter; each kernel's code depends on its
  // group only, so the result is the same for any number of threads.
  std::vector<std::optional<Result<CompiledKernel>>> results(groups.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < groups.size(); i = next.fetch_add(1)) results[i] = impl_->compile(graph, groups[i], use_disk_cache);
  };
  std::vector<std::thread> helpers;
  const size_t wanted = std::min(groups.size(), static_cast<size_t>(compile_threads()));
  for (size_t t = 1; t < wanted; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the ones running (and this one) do the rest
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  std::vector<CompiledKernel> out;
  out.reserve(groups.size());
  for (auto& r : results) {  // the first error in group order
    if (!r->ok()) return r->status();
    out.push_back(std::move(*r).value());
  }
  return out;
}

int JitCompiler::compile_threads() const {
  if (impl_->options.compile_threads > 0) return impl_->options.compile_threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Result<CompiledKernel> JitCompiler::compile_group(const ir::Graph& graph, const KernelGroup& group,
                                                  bool use_disk_cache) {
  return impl_->compile(graph, group, use_disk_cache);
}

Result<std::string> JitCompiler::emit_ir(const ir::Graph& graph, const KernelGroup& group, bool optimized) {
  llvm::LLVMContext ctx;
  CARVE_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> module, impl_->build(ctx, graph, group));
  if (optimized) {
    auto tm = impl_->jtmb->createTargetMachine();
    if (!tm) return Status(ErrorCode::kInternal, "creating a TargetMachine failed: " + err_text(tm.takeError()));
    optimize_module(*module, **tm, impl_->options.opt_level);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, nullptr);
  os.flush();
  return text;
}

JitStats JitCompiler::stats() const {
  JitStats s;
  s.kernels_requested = impl_->requested.load();
  s.modules_emitted = impl_->emitted.load();
  s.codegen_count = impl_->codegen.load();
  s.memory_hits = impl_->memory_hits.load();
  s.disk_hits = impl_->disk_hits.load();
  s.object_bytes = impl_->object_bytes.load();
  if (impl_->disk) {
    const KernelCacheStats d = impl_->disk->stats();
    s.disk_writes = d.writes;
    s.disk_bad_entries = d.bad_entries;
    s.disk_write_failures = d.write_failures;
    s.disk_evictions = d.evictions;
  }
  s.emit_seconds = impl_->emit_s.load();
  s.codegen_seconds = impl_->codegen_s.load();
  s.link_seconds = impl_->link_s.load();
  return s;
}

const JitOptions& JitCompiler::options() const { return impl_->options; }
const std::string& JitCompiler::cache_dir() const { return impl_->cache_dir; }

}  // namespace carve::jit
