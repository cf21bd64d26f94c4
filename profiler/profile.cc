#include "profiler/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "profiler/executor.h"
#if MEMPLAN_HAVE_CUDA
#include "profiler/cuda_backend.h"
#include "profiler/cupti_collector.h"
#endif

namespace memplan {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Element-wise maximum of `v` into `into` (sized like v on first use).
void MaxInto(const std::vector<int64_t>& v, std::vector<int64_t>* into) {
  if (into->empty()) {
    *into = v;
    return;
  }
  for (size_t i = 0; i < v.size() && i < into->size(); ++i) (*into)[i] = std::max((*into)[i], v[i]);
}

// Fills the per-step and per-op summaries from the runs of every repeat.
void Summarize(const Graph& g, const Program& program, const std::vector<ExecResult>& runs,
               ProfileResult* r) {
  r->measured_source = "allocator";
  r->measured_start_bytes = 0;
  r->measured_during.clear();
  r->measured_after.clear();
  std::vector<double> run_us, wall_us;
  std::vector<std::vector<double>> op_times(g.ops.size());
  for (const ExecResult& e : runs) {
    r->measured_start_bytes = std::max(r->measured_start_bytes, e.start_bytes);
    MaxInto(e.live_during, &r->measured_during);
    MaxInto(e.live_after, &r->measured_after);
    r->allocator_peak_bytes = std::max(r->allocator_peak_bytes, e.peak_bytes);
    if (e.device_base_bytes >= 0)
      r->device_peak_bytes =
          std::max(r->device_peak_bytes, e.device_max_bytes - e.device_base_bytes);
    double sum = 0;
    for (size_t s = 0; s < program.steps.size(); ++s) {
      if (!program.steps[s].IsRun()) continue;
      op_times[program.steps[s].op].push_back(e.op_us[s]);
      sum += e.op_us[s];
    }
    run_us.push_back(sum);
    wall_us.push_back(e.wall_us);
  }
  r->run_us = Median(run_us);
  r->wall_us = Median(wall_us);
  if (!runs.empty()) {
    r->step_begin_us = runs.back().step_begin_us;
    r->step_end_us = runs.back().step_end_us;
  }
  std::vector<int> per_op(g.ops.size(), 0);
  for (const Step& s : program.steps)
    if (s.IsRun()) ++per_op[s.op];
  r->ops.clear();
  for (size_t o = 0; o < g.ops.size(); ++o) {
    if (per_op[o] == 0) continue;
    r->ops.push_back({static_cast<int>(o), per_op[o], per_op[o] - 1, Median(op_times[o])});
  }
}

// Peak and its first step from the measured series.
void FindPeak(ProfileResult* r) {
  r->measured_peak_bytes = r->measured_start_bytes;
  r->measured_peak_step = -1;
  for (size_t s = 0; s < r->measured_during.size(); ++s)
    if (r->measured_during[s] > r->measured_peak_bytes) {
      r->measured_peak_bytes = r->measured_during[s];
      r->measured_peak_step = static_cast<int>(s);
    }
}

ProfileStatus Repeat(const Graph& g, const Program& program, const ProfileOptions& options,
                     Backend* backend, StepObserver* observer, void (*set_repeat)(void*, int),
                     void* repeat_arg, std::vector<ExecResult>* runs, std::string* err) {
  ExecOptions exec;
  exec.op_flops = options.op_flops;
  exec.observer = observer;
  runs->assign(static_cast<size_t>(std::max(1, options.repeat)), ExecResult());
  for (size_t i = 0; i < runs->size(); ++i) {
    if (set_repeat) set_repeat(repeat_arg, static_cast<int>(i));
    std::string e;
    if (!Execute(g, program, backend, exec, &(*runs)[i], &e)) {
      *err = runs->size() > 1 ? fmt::format("repeat {}: {}", i + 1, e) : e;
      return ProfileStatus::kRunFailed;
    }
  }
  return ProfileStatus::kOk;
}

ProfileStatus RunCpu(const Graph& g, const Program& program, const ProfileOptions& options,
                     ProfileResult* r, std::string* err) {
  // Without a cap, refuse to go past 90% of physical memory: a clean "out of
  // memory at step N" rather than the kernel's OOM killer.
  CpuBackendOptions cpu = options.cpu;
  if (cpu.capacity_bytes == 0) cpu.capacity_bytes = PhysicalMemoryBytes() / 10 * 9;
  CpuBackend backend(cpu);
  r->backend = "cpu";
  r->allocator = "host";
  r->device = "cpu";
  r->device_name = CpuDeviceName();
  std::vector<ExecResult> runs;
  ProfileStatus status =
      Repeat(g, program, options, &backend, nullptr, nullptr, nullptr, &runs, err);
  if (status != ProfileStatus::kOk) return status;
  if (backend.outstanding() != 0) {
    *err = fmt::format("{} host allocations were not freed", backend.outstanding());
    return ProfileStatus::kRunFailed;
  }
  Summarize(g, program, runs, r);
  FindPeak(r);
  return ProfileStatus::kOk;
}

#if MEMPLAN_HAVE_CUDA
// The step a record at `ts_us` falls in, by the step times of `run`, or -2
// when outside the run (-1: the resident set-up).
int StepAt(const ExecResult& run, double ts_us) {
  double t = ts_us - run.t0_us;
  if (t < 0 || t > run.wall_us) return -2;
  const auto& begin = run.step_begin_us;
  auto it = std::upper_bound(begin.begin(), begin.end(), t);
  int s = static_cast<int>(it - begin.begin()) - 1;
  if (s >= 0 && static_cast<size_t>(s) < run.step_end_us.size() && t > run.step_end_us[s])
    return static_cast<size_t>(s) + 1 == begin.size() ? -2 : s;  // after the last: teardown
  return s;
}

// Tags records CUPTI could not correlate by the step times of each repeat.
StepTag TagByTime(const std::vector<ExecResult>& runs, uint64_t ts_ns) {
  double ts_us = static_cast<double>(ts_ns) / 1000.0;
  for (size_t r = 0; r < runs.size(); ++r) {
    int s = StepAt(runs[r], ts_us);
    if (s >= -1) return {static_cast<int>(r), s};
  }
  return {};
}

// The per-step live bytes of each repeat from CUPTI's memory records.
void CuptiSeries(const CuptiRecords& records, const std::vector<ExecResult>& runs, size_t steps,
                 ProfileResult* r) {
  // buckets[repeat][step + 1]: deltas in time order.
  std::vector<std::vector<std::vector<int64_t>>> buckets(
      runs.size(), std::vector<std::vector<int64_t>>(steps + 1));
  int64_t used = 0;
  for (const MemoryRecord& m : records.memory) {
    StepTag tag = m.tag.repeat >= 0 ? m.tag : TagByTime(runs, m.ts_ns);
    if (tag.repeat < 0 || tag.repeat >= static_cast<int>(runs.size()) || tag.step < -1 ||
        tag.step >= static_cast<int>(steps))
      continue;  // teardown, or outside every run
    buckets[tag.repeat][tag.step + 1].push_back(m.delta);
    ++used;
  }
  if (used == 0) {
    r->notes.push_back(
        "CUPTI reported no device memory records for the run; measured bytes come from the "
        "backend's allocation counter");
    return;
  }
  r->measured_source = "cupti";
  r->measured_start_bytes = 0;
  r->measured_during.assign(steps, 0);
  r->measured_after.assign(steps, 0);
  for (const auto& by_step : buckets) {
    int64_t live = 0;
    for (int64_t d : by_step[0]) live += d;
    r->measured_start_bytes = std::max(r->measured_start_bytes, live);
    for (size_t s = 0; s < steps; ++s) {
      int64_t during = live;
      for (int64_t d : by_step[s + 1]) {
        live += d;
        during = std::max(during, live);
      }
      r->measured_during[s] = std::max(r->measured_during[s], during);
      r->measured_after[s] = std::max(r->measured_after[s], live);
    }
  }
}

void SetCollectorRepeat(void* collector, int repeat) {
  static_cast<CuptiCollector*>(collector)->SetRepeat(repeat);
}

ProfileStatus RunCuda(const Graph& g, const Program& program, const ProfileOptions& options,
                      ProfileResult* r, std::string* err) {
  r->backend = "cuda";
  r->allocator = options.async_allocator ? "async" : "default";
  r->cupti = options.cupti;
  CuptiCollector collector;
  // CUPTI goes first: it must see the context and every allocation.
  if (options.cupti && !collector.Start(err)) return ProfileStatus::kUnavailable;
  auto stop = [&](CuptiRecords* records, std::string* e) {
    CuptiRecords ignored;
    std::string ignored_err;
    return collector.Stop(records ? records : &ignored, e ? e : &ignored_err);
  };
  CudaBackendOptions bo;
  bo.allocator = options.async_allocator ? CudaAllocator::kAsync : CudaAllocator::kDefault;
  if (options.cupti) bo.clock_us = &CuptiCollector::NowUs;
  std::unique_ptr<Backend> backend;
  CudaDeviceInfo info;
  if (!OpenCudaBackend(bo, &backend, &info, err)) {
    stop(nullptr, nullptr);
    return ProfileStatus::kUnavailable;
  }
  r->device = info.device;
  r->device_name = info.name;
  r->driver_version = info.driver_version;
  r->cuda_version = info.runtime_version;
  std::vector<ExecResult> runs;
  ProfileStatus status =
      Repeat(g, program, options, backend.get(), options.cupti ? &collector : nullptr,
             options.cupti ? &SetCollectorRepeat : nullptr, &collector, &runs, err);
  if (status != ProfileStatus::kOk) {
    stop(nullptr, nullptr);
    return status;
  }
  Summarize(g, program, runs, r);
  if (options.cupti) {
    CuptiRecords records;
    if (!stop(&records, err)) return ProfileStatus::kRunFailed;
    r->dropped_records = records.dropped;
    r->memory_records = static_cast<int64_t>(records.memory.size());
    r->kernel_records = static_cast<int64_t>(records.kernels.size());
    r->untagged_memory_records = records.untagged_memory;
    CuptiSeries(records, runs, program.steps.size(), r);
    const ExecResult& last = runs.back();
    int last_repeat = static_cast<int>(runs.size()) - 1;
    for (const KernelRecord& k : records.kernels) {
      StepTag tag = k.tag.repeat >= 0 ? k.tag : TagByTime(runs, k.start_ns);
      if (tag.repeat != last_repeat) continue;
      double start = static_cast<double>(k.start_ns) / 1000.0 - last.t0_us;
      double dur = static_cast<double>(k.end_ns - std::min(k.end_ns, k.start_ns)) / 1000.0;
      r->kernels.push_back({k.name, tag.step, start, dur});
    }
  }
  FindPeak(r);
  return ProfileStatus::kOk;
}
#endif  // MEMPLAN_HAVE_CUDA

}  // namespace

bool BuiltWithCuda() { return MEMPLAN_HAVE_CUDA != 0; }

bool ParseBackendChoice(std::string_view name, BackendChoice* out) {
  if (name == "auto")
    *out = BackendChoice::kAuto;
  else if (name == "cpu")
    *out = BackendChoice::kCpu;
  else if (name == "cuda")
    *out = BackendChoice::kCuda;
  else
    return false;
  return true;
}

ProfileStatus RunProfile(const Graph& g, const Program& program, const ProfileOptions& options,
                         ProfileResult* result, std::string* err) {
  *result = ProfileResult();
  result->repeat = std::max(1, options.repeat);
  bool cuda = false;
  if (options.backend == BackendChoice::kCuda) {
    if (!BuiltWithCuda()) {
      *err =
          "--backend cuda: this memplan was built without CUDA (no CUDA toolkit with CUPTI was "
          "found, or MEMPLAN_WITH_CUDA=OFF)";
      return ProfileStatus::kUnavailable;
    }
#if MEMPLAN_HAVE_CUDA
    if (!ProbeCudaDevice(err)) return ProfileStatus::kUnavailable;
#endif
    cuda = true;
  } else if (options.backend == BackendChoice::kAuto) {
    if (!BuiltWithCuda()) {
      result->notes.push_back("built without CUDA: profiling on the cpu backend");
    } else {
#if MEMPLAN_HAVE_CUDA
      std::string why;
      cuda = ProbeCudaDevice(&why);
      if (!cuda) result->notes.push_back(why + "; profiling on the cpu backend");
#endif
    }
  }
  if (!cuda) return RunCpu(g, program, options, result, err);
#if MEMPLAN_HAVE_CUDA
  return RunCuda(g, program, options, result, err);
#else
  return ProfileStatus::kUnavailable;
#endif
}

int FirstDivergentStep(int64_t predicted_start, const std::vector<int64_t>& predicted_during,
                       const std::vector<int64_t>& predicted_after, int64_t measured_start,
                       const std::vector<int64_t>& measured_during,
                       const std::vector<int64_t>& measured_after) {
  if (measured_start != predicted_start) return -1;
  size_t n = std::max({predicted_during.size(), predicted_after.size(), measured_during.size(),
                       measured_after.size()});
  for (size_t s = 0; s < n; ++s) {
    bool same = s < predicted_during.size() && s < measured_during.size() &&
                s < predicted_after.size() && s < measured_after.size() &&
                predicted_during[s] == measured_during[s] &&
                predicted_after[s] == measured_after[s];
    if (!same) return static_cast<int>(s);
  }
  return -2;
}

}  // namespace memplan
