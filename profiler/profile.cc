#include "profiler/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "analyzer/base/enum_table.h"
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
    bool after_first = runs.size() == 1 || &e != &runs.front();
    if (e.device_base_bytes >= 0 && after_first)
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
  if (options.cupti) {
    r->cupti_library = collector.info().library;
    r->cupti_version = collector.info().version;
    r->cupti_built_version = collector.info().built_version;
  }
  std::vector<RequestedAllocation> requested;
  CudaBackendOptions bo;
  bo.allocator = options.async_allocator ? CudaAllocator::kAsync : CudaAllocator::kDefault;
  bo.allocation_log = &requested;
  if (options.cupti) bo.clock_ns = &CuptiCollector::NowNs;
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
  // Module loading and CUPTI's own device buffers happen here, not in the
  // first repeat's measurement.
  if (!backend->WarmUp(err)) {
    stop(nullptr, nullptr);
    return ProfileStatus::kRunFailed;
  }
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
    r->api_records = records.api_records;
    r->external_correlation_records = records.external_records;
    r->size_check = CheckRecordSizes(requested, records.memory);
    if (options.async_allocator) r->async_expected = static_cast<int64_t>(requested.size());
    RecordSeries series;
    bool any = SeriesFromRecords(records.memory, runs, program.steps.size(), &series);
    r->correlated_memory_records = series.correlated;
    r->time_attributed_memory_records = series.by_time;
    r->outside_memory_records = series.outside;
    if (any) {
      r->measured_source = "cupti";
      r->measured_start_bytes = series.start_bytes;
      r->measured_during = series.during;
      r->measured_after = series.after;
    } else {
      r->notes.push_back(
          "CUPTI reported no device memory records for the run; measured bytes come from the "
          "backend's allocation counter");
    }
    if (r->memory_records > 0 && series.correlated == 0)
      r->notes.push_back(fmt::format(
          "none of CUPTI's {} memory records carried a step tag (external correlation; {} API "
          "records, {} correlation records): steps were attributed by time",
          r->memory_records, r->api_records, r->external_correlation_records));
    if (r->size_check.disagree > 0)
      r->notes.push_back(fmt::format(
          "{} of {} CUPTI allocation records differ from the bytes requested (at most {} bytes)",
          r->size_check.disagree, r->size_check.matched, r->size_check.max_abs_diff_bytes));
    if (options.async_allocator && r->size_check.async_records != r->async_expected)
      r->notes.push_back(fmt::format("{} cudaMallocAsync calls, {} async allocation records",
                                     r->async_expected, r->size_check.async_records));
    if (r->cupti_version != r->cupti_built_version)
      r->notes.push_back(fmt::format("CUPTI {} loaded from {}; memplan was built with {}",
                                     r->cupti_version, r->cupti_library, r->cupti_built_version));
    const ExecResult& last = runs.back();
    int last_repeat = static_cast<int>(runs.size()) - 1;
    for (const KernelRecord& k : records.kernels) {
      StepTag tag = k.tag.repeat >= 0 ? k.tag : TagByTime(runs, k.start_ns);
      if (tag.repeat != last_repeat) continue;
      double start = static_cast<double>(static_cast<int64_t>(k.start_ns) - last.t0_ns) / 1000.0;
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

namespace {

constexpr EnumName<BackendChoice> kBackendChoices[] = {
    {BackendChoice::kAuto, "auto"},
    {BackendChoice::kCpu, "cpu"},
    {BackendChoice::kCuda, "cuda"},
};

}  // namespace

bool ParseBackendChoice(std::string_view name, BackendChoice* out) {
  return ParseEnum(kBackendChoices, name, out);
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
