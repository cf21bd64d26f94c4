#include "profiler/executor.h"

#include <fmt/format.h>

#include <algorithm>

namespace memplan {
namespace {

// A device buffer and the number of live names (a base, its views) on it.
struct Buffer {
  void* ptr = nullptr;  // null for a 0-byte buffer (nothing allocated)
  int64_t bytes = 0;
  int refs = 0;
};

class Execution {
 public:
  Execution(const Graph& g, const Program& p, Backend* b, const ExecOptions& o, ExecResult* r)
      : g_(g), p_(p), backend_(b), opt_(o), r_(r) {}

  bool Run(std::string* err) {
    *r_ = ExecResult();
    buffer_of_.assign(g_.tensors.size(), -1);
    AllocationCounter& counter = backend_->Counter();
    counter.Reset();
    std::string e;
    if (!backend_->Sync(&e)) return Fail("start", e, err);
    int64_t used = 0;
    if (backend_->DeviceUsedBytes(&used)) r_->device_base_bytes = r_->device_max_bytes = used;
    t0_ = backend_->NowNs();
    r_->t0_ns = t0_;

    Begin(-1);
    if (!Resident(&e)) return Fail("the resident tensors", e, err);
    End(-1);
    r_->start_bytes = counter.live();
    r_->peak_bytes = r_->start_bytes;
    const size_t n = p_.steps.size();
    r_->live_during.reserve(n);
    r_->live_after.reserve(n);
    r_->op_us.reserve(n);
    for (size_t s = 0; s < n; ++s) {
      step_ = static_cast<int>(s);
      const Step& step = p_.steps[s];
      counter.ResetWindow();
      r_->step_begin_us.push_back(SinceStartUs());
      Begin(step_);
      double op_us = -1;
      bool ok = step.IsRun() ? RunStep(step, &op_us, &e) : FreeStep(step, &e);
      if (!ok) return Fail(Where(), e, err);
      End(step_);
      r_->step_end_us.push_back(SinceStartUs());
      r_->live_during.push_back(counter.window_peak());
      r_->live_after.push_back(counter.live());
      r_->op_us.push_back(op_us);
      if (r_->live_during.back() > r_->peak_bytes) {
        r_->peak_bytes = r_->live_during.back();
        r_->peak_step = step_;
      }
    }
    r_->end_bytes = counter.live();
    if (counter.peak() != r_->peak_bytes)
      return Fail("end",
                  fmt::format("the allocator's peak {} differs from the per-step peak {}",
                              counter.peak(), r_->peak_bytes),
                  err);
    step_ = static_cast<int>(n);
    Begin(step_);
    bool freed = FreeEverything(&e);
    End(step_);
    r_->wall_us = SinceStartUs();
    if (!freed) {
      *err = "teardown: " + e;
      return false;
    }
    return true;
  }

 private:
  void Begin(int step) {
    open_ = true;
    if (opt_.observer) opt_.observer->BeginStep(step);
  }
  void End(int step) {
    open_ = false;
    if (opt_.observer) opt_.observer->EndStep(step);
  }
  std::string Where() const {
    const Step& step = p_.steps[step_];
    if (step.IsRun() && step.op < static_cast<int>(g_.ops.size()))
      return fmt::format("step {} (run \"{}\")", step_, g_.ops[step.op].id);
    return fmt::format("step {} ({})", step_, step.IsRun() ? "run" : "free");
  }
  std::string Name(int t) const { return "\"" + g_.tensors[t].id + "\""; }

  // Frees everything, then reports `what: message`.
  bool Fail(const std::string& what, const std::string& message, std::string* err) {
    std::string ignored;
    FreeEverything(&ignored);
    if (open_) End(step_);
    *err = what + ": " + message;
    return false;
  }

  void SampleDevice() {
    int64_t used = 0;
    if (r_->device_max_bytes >= 0 && backend_->DeviceUsedBytes(&used))
      r_->device_max_bytes = std::max(r_->device_max_bytes, used);
  }

  bool AllocateRaw(int64_t bytes, void** ptr, std::string* err) {
    *ptr = nullptr;
    if (bytes == 0) return true;
    if (!backend_->Allocate(bytes, ptr, err)) return false;
    backend_->Counter().Add(bytes);
    return true;
  }
  bool FreeRaw(void* ptr, int64_t bytes, std::string* err) {
    if (ptr == nullptr) return true;
    backend_->Counter().Remove(bytes);
    return backend_->Free(ptr, bytes, err);
  }

  int NewBuffer(void* ptr, int64_t bytes) {
    buffers_.push_back({ptr, bytes, 0});
    return static_cast<int>(buffers_.size()) - 1;
  }
  void Bind(int t, int b) {
    ++buffers_[b].refs;
    buffer_of_[t] = b;
  }
  bool Alive(int t) const { return buffer_of_[t] >= 0; }
  bool Release(int t, std::string* err) {
    Buffer& b = buffers_[buffer_of_[t]];
    buffer_of_[t] = -1;
    if (--b.refs > 0) return true;
    void* ptr = b.ptr;
    b.ptr = nullptr;
    return FreeRaw(ptr, b.bytes, err);
  }

  bool Resident(std::string* err) {
    const size_t nt = g_.tensors.size();
    for (size_t t = 0; t < nt; ++t) {
      if (!g_.IsResidentTensor(int(t)) || g_.IsView(int(t))) continue;
      void* ptr = nullptr;
      int64_t bytes = g_.tensors[t].bytes;
      if (!AllocateRaw(bytes, &ptr, err)) return false;
      Bind(int(t), NewBuffer(ptr, bytes));
      if (ptr && !backend_->Fill(ptr, bytes, err)) return false;
    }
    for (size_t t = 0; t < nt; ++t)
      if (g_.IsResidentTensor(int(t)) && g_.IsView(int(t)))
        Bind(int(t), buffer_of_[g_.tensors[t].base]);
    return backend_->Sync(err);
  }

  bool RunStep(const Step& step, double* op_us, std::string* err) {
    if (step.op < 0 || step.op >= static_cast<int>(g_.ops.size())) {
      *err = fmt::format("no op with index {}", step.op);
      return false;
    }
    const Op& op = g_.ops[step.op];
    for (int t : op.inputs)
      if (!Alive(t)) {
        *err = fmt::format("input {} is not alive", Name(t));
        return false;
      }
    std::vector<int> inplace_outs;
    for (auto [out, in] : step.inplace) {
      bool legal = Alive(in) && !Alive(out) && !g_.IsView(in) && !g_.IsView(out) &&
                   g_.tensors[in].bytes == g_.tensors[out].bytes &&
                   buffers_[buffer_of_[in]].refs == 1;
      if (!legal) {
        *err = fmt::format("in-place {} <- {} is not legal", Name(out), Name(in));
        return false;
      }
      inplace_outs.push_back(out);
    }
    auto is_inplace = [&](int t) {
      return std::find(inplace_outs.begin(), inplace_outs.end(), t) != inplace_outs.end();
    };

    // Allocated when the op starts: new outputs, fresh copies of outputs
    // still alive, the workspace.
    OpLaunch launch;
    launch.step = step_;
    launch.op = step.op;
    launch.name = op.id.c_str();
    launch.flops = step.op < static_cast<int>(opt_.op_flops.size()) ? opt_.op_flops[step.op] : 0;
    std::vector<std::pair<int, void*>> created;        // (tensor, ptr)
    std::vector<std::pair<void*, int64_t>> transient;  // fresh copies, workspace
    auto free_transient = [&](std::string* e) {
      bool ok = true;
      for (auto [ptr, bytes] : transient) ok = FreeRaw(ptr, bytes, e) && ok;
      transient.clear();
      return ok;
    };
    auto free_created = [&]() {
      std::string ignored;
      for (auto [t, ptr] : created) FreeRaw(ptr, g_.tensors[t].bytes, &ignored);
      created.clear();
      free_transient(&ignored);
    };
    for (int t : op.outputs) {
      if (g_.IsView(t) || is_inplace(t)) continue;
      int64_t bytes = g_.tensors[t].bytes;
      void* ptr = nullptr;
      if (!AllocateRaw(bytes, &ptr, err)) {
        free_created();
        return false;
      }
      if (Alive(t))
        transient.push_back({ptr, bytes});
      else
        created.push_back({t, ptr});
      if (ptr) launch.outputs.push_back({ptr, bytes});
    }
    if (op.workspace_bytes > 0) {
      void* ptr = nullptr;
      if (!AllocateRaw(op.workspace_bytes, &ptr, err)) {
        free_created();
        return false;
      }
      transient.push_back({ptr, op.workspace_bytes});
      launch.workspace = {ptr, op.workspace_bytes};
    }
    for (auto [out, in] : step.inplace) {
      const Buffer& b = buffers_[buffer_of_[in]];
      if (b.ptr) launch.outputs.push_back({b.ptr, b.bytes});
    }
    for (int t : op.inputs) {
      const Buffer& b = buffers_[buffer_of_[t]];
      int64_t bytes = std::min(g_.tensors[t].bytes, b.bytes);
      if (b.ptr == nullptr || bytes == 0) continue;
      auto same = std::find_if(launch.inputs.begin(), launch.inputs.end(),
                               [&](const Operand& o) { return o.ptr == b.ptr; });
      if (same == launch.inputs.end())
        launch.inputs.push_back({b.ptr, bytes});
      else
        same->bytes = std::max(same->bytes, bytes);
    }

    // An op that writes nothing (views only) does no work, as in a framework.
    bool work = !launch.outputs.empty() || launch.workspace.ptr || launch.flops > 0;
    if (work && (!backend_->RunOp(launch, err) || !backend_->Sync(err))) {
      free_created();
      return false;
    }
    *op_us = work ? backend_->LastOpUs() : 0.0;
    SampleDevice();

    // The op is done: transient buffers go; outputs take their names.
    if (!free_transient(err)) {
      free_created();
      return false;
    }
    for (auto [out, in] : step.inplace) {
      int b = buffer_of_[in];
      buffer_of_[in] = -1;
      buffer_of_[out] = b;
    }
    for (auto [t, ptr] : created) Bind(t, NewBuffer(ptr, g_.tensors[t].bytes));
    created.clear();
    for (int t : op.outputs) {
      if (!g_.IsView(t) || Alive(t)) continue;
      int parent = g_.tensors[t].alias_of;
      if (!Alive(parent)) {
        *err = fmt::format("view {} of {}: {} is not alive", Name(t), Name(parent), Name(parent));
        return false;
      }
      Bind(t, buffer_of_[parent]);
    }
    SampleDevice();
    return true;
  }

  bool FreeStep(const Step& step, std::string* err) {
    for (int t : step.free) {
      if (t < 0 || t >= static_cast<int>(g_.tensors.size())) {
        *err = fmt::format("no tensor with index {}", t);
        return false;
      }
      if (g_.IsResidentTensor(t) || !Alive(t)) {
        *err = fmt::format("{} cannot be freed: {}", Name(t),
                           Alive(t) ? "it is resident" : "it is not alive");
        return false;
      }
      if (!Release(t, err)) return false;
    }
    if (!backend_->Sync(err)) return false;
    SampleDevice();
    return true;
  }

  // Frees every buffer still allocated; keeps going after an error and
  // reports the first.
  bool FreeEverything(std::string* err) {
    bool ok = true;
    std::string first;
    for (Buffer& b : buffers_) {
      if (b.ptr == nullptr) continue;
      std::string e;
      if (!FreeRaw(b.ptr, b.bytes, &e) && ok) {
        ok = false;
        first = e;
      }
      b.ptr = nullptr;
      b.refs = 0;
    }
    buffer_of_.assign(g_.tensors.size(), -1);
    std::string e;
    if (!backend_->Sync(&e) && ok) {
      ok = false;
      first = e;
    }
    if (!ok) *err = first;
    return ok;
  }

  const Graph& g_;
  const Program& p_;
  Backend* backend_;
  const ExecOptions& opt_;
  ExecResult* r_;
  int step_ = -1;
  bool open_ = false;  // BeginStep called without EndStep
  int64_t t0_ = 0;
  double SinceStartUs() { return static_cast<double>(backend_->NowNs() - t0_) / 1000.0; }
  std::vector<Buffer> buffers_;
  std::vector<int> buffer_of_;
};

}  // namespace

bool Execute(const Graph& g, const Program& program, Backend* backend, const ExecOptions& options,
             ExecResult* result, std::string* err) {
  Execution run(g, program, backend, options, result);
  return run.Run(err);
}

}  // namespace memplan
