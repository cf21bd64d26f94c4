#include "analyzer/plan/plan_document.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <sstream>

#include "analyzer/base/file_io.h"
#include "analyzer/base/json_util.h"

namespace memplan {
namespace {

using json = nlohmann::json;
using json_util::Found;
using json_util::IsNonNegativeInteger;
using json_util::PointerToken;
using json_util::Quote;
using json_util::TypeName;

// A string as JSON text.
std::string Str(const std::string& s) { return json_util::Dump(json(s)); }

bool IsLowerHex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Builds the DOM like nlohmann's own SAX DOM parser, and refuses an object
// with a key that appears twice (the DOM would keep only the last one),
// naming its JSON pointer.
class DomBuilder final : public nlohmann::json_sax<json> {
 public:
  explicit DomBuilder(json* root) : dom_(*root, /*allow_exceptions=*/false) {}

  const std::string& duplicate() const { return duplicate_; }
  const std::string& syntax_error() const { return syntax_error_; }

  bool null() override { return Value() && dom_.null(); }
  bool boolean(bool v) override { return Value() && dom_.boolean(v); }
  bool number_integer(number_integer_t v) override { return Value() && dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) override { return Value() && dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) override {
    return Value() && dom_.number_float(v, s);
  }
  bool string(string_t& v) override { return Value() && dom_.string(v); }
  bool binary(binary_t& v) override { return Value() && dom_.binary(v); }
  bool start_object(std::size_t n) override { return Open(true) && dom_.start_object(n); }
  bool start_array(std::size_t n) override { return Open(false) && dom_.start_array(n); }
  bool end_object() override {
    frames_.pop_back();
    return dom_.end_object();
  }
  bool end_array() override {
    frames_.pop_back();
    return dom_.end_array();
  }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second) {
      duplicate_ = Pointer() + "/" + PointerToken(k);
      return false;
    }
    f.key = k;
    return dom_.key(k);
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    syntax_error_ = json_util::ExceptionText(e);
    return false;
  }

 private:
  struct Frame {
    bool object = false;
    std::string token;  // this container's pointer token in its parent
    std::string key;    // object: the current member's key
    size_t next_index = 0;
    std::set<std::string> keys;
  };

  // The token of the value that starts now, in its parent.
  std::string Token() {
    if (frames_.empty()) return "";
    Frame& f = frames_.back();
    return f.object ? PointerToken(f.key) : std::to_string(f.next_index++);
  }
  bool Value() {
    Token();
    return true;
  }
  bool Open(bool object) {
    Frame f;
    f.object = object;
    f.token = Token();
    frames_.push_back(std::move(f));
    return true;
  }
  std::string Pointer() const {
    std::string p;
    for (size_t i = 1; i < frames_.size(); ++i) p += "/" + frames_[i].token;
    return p;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<Frame> frames_;
  std::string duplicate_;
  std::string syntax_error_;
};

class PlanParser {
 public:
  PlanParser(const std::string& file, const Graph& g, Plan* plan, std::string* err)
      : file_(file), g_(g), plan_(plan), err_(err) {}

  bool Parse(const json& doc) {
    if (!doc.is_object()) return WrongType("", doc, "an object");
    return ParseFormat(doc) && ParseHeader(doc) && ParseAccumulation(doc) &&
           TensorList(doc, "", "saved", &plan_->saved) &&
           TensorList(doc, "", "recomputed", &plan_->recomputed) && ParseModules(doc) &&
           ParseSac(doc) && ParsePredicted(doc) && ParseSteps(doc);
  }

 private:
  bool Fail(const std::string& pointer, const std::string& message) {
    *err_ = fmt::format("{}: {}: {}", file_, pointer.empty() ? "(root)" : pointer, message);
    return false;
  }
  bool Missing(const std::string& pointer, const char* expected) {
    return Fail(pointer, fmt::format("missing; expected {}", expected));
  }
  bool WrongType(const std::string& pointer, const json& j, const char* expected) {
    return Fail(pointer, fmt::format("expected {}, found {}", expected, Found(j)));
  }

  // The member `key` of `obj` (at `ptr`), or nullptr after recording that it
  // is missing.
  const json* Required(const json& obj, const std::string& ptr, const char* key,
                       const char* expected) {
    auto it = obj.find(key);
    if (it != obj.end()) return &*it;
    Missing(ptr + "/" + key, expected);
    return nullptr;
  }

  bool ReqNonNegativeInteger(const json& obj, const std::string& ptr, const char* key,
                             int64_t* out) {
    const char* expected = "a non-negative integer";
    const json* j = Required(obj, ptr, key, expected);
    if (!j) return false;
    if (!IsNonNegativeInteger(*j)) return WrongType(ptr + "/" + key, *j, expected);
    *out = j->get<int64_t>();
    return true;
  }

  bool ParseFormat(const json& doc) {
    const json* f = Required(doc, "", "format", "\"memplan.plan/1\"");
    if (!f) return false;
    if (!f->is_string()) return WrongType("/format", *f, "\"memplan.plan/1\"");
    if (*f != "memplan.plan/1")
      return Fail("/format",
                  fmt::format("unsupported format {}; expected \"memplan.plan/1\"", Found(*f)));
    return true;
  }

  bool ParseHeader(const json& doc) {
    const json* name = Required(doc, "", "graph", "a string");
    if (!name) return false;
    if (!name->is_string()) return WrongType("/graph", *name, "a string");
    plan_->graph = name->get<std::string>();
    const char* hex = "64 lower-case hex digits (the SHA-256 of the graph file)";
    const json* sha = Required(doc, "", "graph_sha256", hex);
    if (!sha) return false;
    if (!sha->is_string() || !IsLowerHex64(sha->get<std::string>()))
      return WrongType("/graph_sha256", *sha, hex);
    plan_->graph_sha256 = sha->get<std::string>();
    if (!ReqNonNegativeInteger(doc, "", "budget_bytes", &plan_->budget_bytes)) return false;
    const json* feasible = Required(doc, "", "feasible", "a boolean");
    if (!feasible) return false;
    if (!feasible->is_boolean()) return WrongType("/feasible", *feasible, "a boolean");
    plan_->feasible = feasible->get<bool>();
    return true;
  }

  bool TensorRef(const json& j, const std::string& ptr, int* out) {
    if (!j.is_string()) return WrongType(ptr, j, "a tensor id");
    int t = g_.FindTensor(j.get_ref<const std::string&>());
    if (t < 0)
      return Fail(ptr, fmt::format("unknown tensor {}; expected the id of a tensor in the joint "
                                   "graph",
                                   Found(j)));
    *out = t;
    return true;
  }

  bool TensorArray(const json& j, const std::string& ptr, std::vector<int>* out) {
    if (!j.is_array()) return WrongType(ptr, j, "an array of tensor ids");
    out->reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      int t = -1;
      if (!TensorRef(j[i], fmt::format("{}/{}", ptr, i), &t)) return false;
      out->push_back(t);
    }
    return true;
  }

  bool TensorList(const json& obj, const std::string& ptr, const char* key, std::vector<int>* out) {
    const json* j = Required(obj, ptr, key, "an array of tensor ids");
    return j && TensorArray(*j, ptr + "/" + key, out);
  }

  bool ParseAccumulation(const json& doc) {
    const char* expected = "an object mapping tensor ids to accumulation modes";
    const json* acc = Required(doc, "", "accumulation", expected);
    if (!acc) return false;
    if (!acc->is_object()) return WrongType("/accumulation", *acc, expected);
    for (auto it = acc->begin(); it != acc->end(); ++it) {
      std::string ptr = "/accumulation/" + PointerToken(it.key());
      int t = g_.FindTensor(it.key());
      if (t < 0)
        return Fail(ptr, fmt::format("unknown tensor {}; expected the id of a tensor in the "
                                     "joint graph",
                                     Quote(it.key())));
      AccumulationMode mode;
      if (!it->is_string() || !ParseAccumulationMode(it->get<std::string>(), &mode))
        return Fail(ptr, fmt::format("unknown accumulation mode {}; expected inplace, "
                                     "out_of_place or deferred",
                                     Found(*it)));
      plan_->accumulation.emplace_back(t, mode);
    }
    std::stable_sort(plan_->accumulation.begin(), plan_->accumulation.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    return true;
  }

  bool ParseModules(const json& doc) {
    auto it = doc.find("modules");
    if (it == doc.end()) return true;
    if (!it->is_array()) return WrongType("/modules", *it, "an array of module scopes");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& m = (*it)[i];
      if (!m.is_string() || m.get_ref<const std::string&>().empty())
        return WrongType(fmt::format("/modules/{}", i), m, "a non-empty string");
      plan_->modules.push_back(m.get<std::string>());
    }
    return true;
  }

  // "sac": [{"module": M, "ops": [{"op": ID, "type": T, "policy": "save" |
  // "recompute"}, ...]}, ...]
  bool ParseSac(const json& doc) {
    auto it = doc.find("sac");
    if (it == doc.end()) return true;
    const char* regions = "an array of {\"module\", \"ops\"} objects";
    if (!it->is_array()) return WrongType("/sac", *it, regions);
    for (size_t i = 0; i < it->size(); ++i) {
      const json& r = (*it)[i];
      const std::string ptr = fmt::format("/sac/{}", i);
      if (!r.is_object()) return WrongType(ptr, r, "a {\"module\", \"ops\"} object");
      SacRegion& region = plan_->sac.emplace_back();
      const json* module = Required(r, ptr, "module", "a non-empty string");
      if (!module) return false;
      if (!module->is_string() || module->get_ref<const std::string&>().empty())
        return WrongType(ptr + "/module", *module, "a non-empty string");
      region.module = module->get<std::string>();
      const json* ops = Required(r, ptr, "ops", "an array of {\"op\", \"type\", \"policy\"}");
      if (!ops) return false;
      if (!ops->is_array())
        return WrongType(ptr + "/ops", *ops, "an array of {\"op\", \"type\", \"policy\"}");
      for (size_t k = 0; k < ops->size(); ++k) {
        const json& o = (*ops)[k];
        const std::string optr = fmt::format("{}/ops/{}", ptr, k);
        if (!o.is_object()) return WrongType(optr, o, "an {\"op\", \"type\", \"policy\"} object");
        const json* id = Required(o, optr, "op", "the id of a forward op");
        if (!id) return false;
        int op = id->is_string() ? g_.FindOp(id->get_ref<const std::string&>()) : -1;
        if (op < 0 || g_.ops[op].phase != Phase::kForward)
          return Fail(optr + "/op", fmt::format("{} is not a forward op of the joint graph; "
                                                "expected the id of a forward op",
                                                Found(*id)));
        const json* type = Required(o, optr, "type", "the op's type");
        if (!type) return false;
        if (!type->is_string() || type->get_ref<const std::string&>() != g_.ops[op].type)
          return Fail(optr + "/type",
                      fmt::format("{} is not the type of op {}; expected {}", Found(*type),
                                  Str(g_.ops[op].id), Str(g_.ops[op].type.str())));
        const char* expected = "\"save\", \"recompute\", or one of them per output of the op";
        const json* policy = Required(o, optr, "policy", expected);
        if (!policy) return false;
        SacOp sac{op, false, {}};
        auto one = [&](const json& p, const std::string& pp) {
          if (p != "save" && p != "recompute")
            return Fail(pp, fmt::format("unknown policy {}; expected {}", Found(p), expected));
          sac.save_outputs.push_back(p == "save");
          sac.save = sac.save || p == "save";
          return true;
        };
        if (policy->is_array()) {
          if (policy->size() != g_.ops[op].outputs.size())
            return Fail(optr + "/policy",
                        fmt::format("{} policies for {} outputs; expected one per output",
                                    policy->size(), g_.ops[op].outputs.size()));
          for (size_t i = 0; i < policy->size(); ++i)
            if (!one((*policy)[i], fmt::format("{}/policy/{}", optr, i))) return false;
        } else {
          if (!one(*policy, optr + "/policy")) return false;
          sac.save_outputs.assign(g_.ops[op].outputs.size(), sac.save);
        }
        region.ops.push_back(std::move(sac));
      }
    }
    return true;
  }

  bool ParsePredicted(const json& doc) {
    const json* p = Required(doc, "", "predicted", "an object");
    if (!p) return false;
    if (!p->is_object()) return WrongType("/predicted", *p, "an object");
    PlanPrediction& pred = plan_->predicted;
    if (!ReqNonNegativeInteger(*p, "/predicted", "peak_bytes", &pred.peak_bytes) ||
        !ReqNonNegativeInteger(*p, "/predicted", "baseline_peak_bytes", &pred.baseline_peak_bytes))
      return false;
    const char* number = "a non-negative number";
    const json* cost = Required(*p, "/predicted", "recompute_cost", number);
    if (!cost) return false;
    if (!cost->is_number() || !(cost->get<double>() >= 0) || !std::isfinite(cost->get<double>()))
      return WrongType("/predicted/recompute_cost", *cost, number);
    pred.recompute_cost = cost->get<double>();
    const json* unit = Required(*p, "/predicted", "cost_unit", "flops, time_us or bytes");
    if (!unit) return false;
    if (!unit->is_string() || !IsPlanCostUnit(unit->get<std::string>()))
      return Fail(
          "/predicted/cost_unit",
          fmt::format("unknown cost unit {}; expected flops, time_us or bytes", Found(*unit)));
    pred.cost_unit = unit->get<std::string>();
    return true;
  }

  bool ParseSteps(const json& doc) {
    const json* steps = Required(doc, "", "steps", "an array of steps");
    if (!steps) return false;
    if (!steps->is_array()) return WrongType("/steps", *steps, "an array of steps");
    plan_->program.steps.reserve(steps->size());
    for (size_t i = 0; i < steps->size(); ++i)
      if (!ParseStep(fmt::format("/steps/{}", i), (*steps)[i])) return false;
    return true;
  }

  bool ParseStep(const std::string& ptr, const json& s) {
    if (!s.is_object()) return WrongType(ptr, s, "a step object (\"run\" or \"free\")");
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != "run" && it.key() != "inplace" && it.key() != "free")
        return Fail(ptr + "/" + PointerToken(it.key()),
                    "unknown member; expected \"run\" (with an optional \"inplace\") or "
                    "\"free\"");
    }
    auto run = s.find("run"), free = s.find("free"), inplace = s.find("inplace");
    bool is_run = run != s.end(), is_free = free != s.end();
    if (is_run && is_free)
      return Fail(ptr, "a step with both \"run\" and \"free\"; expected exactly one of them");
    if (!is_run && !is_free)
      return Fail(ptr, "a step with neither \"run\" nor \"free\"; expected exactly one of them");
    if (inplace != s.end() && !is_run)
      return Fail(ptr + "/inplace", "\"inplace\" on a free step; expected it only beside \"run\"");
    Step& step = plan_->program.steps.emplace_back();
    if (is_free) {
      std::vector<int> freed;
      if (!TensorArray(*free, ptr + "/free", &freed)) return false;
      step.free.assign(freed.begin(), freed.end());
      return true;
    }
    if (!run->is_string()) return WrongType(ptr + "/run", *run, "an op id");
    step.op = g_.FindOp(run->get_ref<const std::string&>());
    if (step.op < 0)
      return Fail(ptr + "/run", fmt::format("unknown op {}; expected the id of an op in the joint "
                                            "graph",
                                            Found(*run)));
    if (inplace == s.end()) return true;
    const char* expected = "an object mapping output ids to input ids";
    if (!inplace->is_object()) return WrongType(ptr + "/inplace", *inplace, expected);
    for (auto it = inplace->begin(); it != inplace->end(); ++it) {
      std::string p = ptr + "/inplace/" + PointerToken(it.key());
      int out = -1, in = -1;
      if (!TensorRef(json(it.key()), p, &out) || !TensorRef(*it, p, &in)) return false;
      step.inplace.emplace_back(out, in);
    }
    return true;
  }

  std::string file_;
  const Graph& g_;
  Plan* plan_;
  std::string* err_;
};

// Lists of ids as JSON text, with ", " between elements.

std::string IdList(const Graph& g, std::span<const int> tensors) {
  std::string out = "[";
  for (size_t i = 0; i < tensors.size(); ++i)
    out += (i ? ", " : "") + Str(g.tensors[tensors[i]].id);
  return out + "]";
}

}  // namespace

bool IsPlanCostUnit(const std::string& unit) {
  return unit == "flops" || unit == "time_us" || unit == "bytes";
}

std::string PlanToJson(const Graph& g, const Plan& plan) {
  std::string out = "{\n \"format\": \"memplan.plan/1\",\n";
  out += fmt::format(" \"graph\": {},\n \"graph_sha256\": {},\n", Str(plan.graph),
                     Str(plan.graph_sha256));
  out += fmt::format(" \"budget_bytes\": {},\n \"feasible\": {},\n", plan.budget_bytes,
                     plan.feasible ? "true" : "false");
  auto accumulation = plan.accumulation;
  std::stable_sort(accumulation.begin(), accumulation.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  out += " \"accumulation\": {";
  for (size_t i = 0; i < accumulation.size(); ++i)
    out += fmt::format("{}{}: \"{}\"", i ? ", " : "", Str(g.tensors[accumulation[i].first].id),
                       AccumulationModeName(accumulation[i].second));
  out += "},\n";
  out += " \"saved\": " + IdList(g, plan.saved) + ",\n";
  out += " \"recomputed\": " + IdList(g, plan.recomputed) + ",\n";
  if (!plan.modules.empty()) {
    out += " \"modules\": [";
    for (size_t i = 0; i < plan.modules.size(); ++i) out += (i ? ", " : "") + Str(plan.modules[i]);
    out += "],\n";
  }
  if (!plan.sac.empty()) {
    out += " \"sac\": [";
    for (size_t i = 0; i < plan.sac.size(); ++i) {
      const SacRegion& r = plan.sac[i];
      out += fmt::format("{}\n  {{\"module\": {}, \"ops\": [", i ? "," : "", Str(r.module));
      for (size_t k = 0; k < r.ops.size(); ++k) {
        const Op& op = g.ops[r.ops[k].op];
        const SacOp& sac = r.ops[k];
        bool mixed = false;
        for (bool s : sac.save_outputs) mixed = mixed || s != sac.save;
        std::string policy = Str(sac.save ? "save" : "recompute");
        if (mixed) {
          policy = "[";
          for (size_t i = 0; i < sac.save_outputs.size(); ++i)
            policy +=
                fmt::format("{}\"{}\"", i ? ", " : "", sac.save_outputs[i] ? "save" : "recompute");
          policy += "]";
        }
        out += fmt::format("{}\n   {{\"op\": {}, \"type\": {}, \"policy\": {}}}", k ? "," : "",
                           Str(op.id), Str(op.type.str()), policy);
      }
      out += "]}";
    }
    out += "\n ],\n";
  }
  const PlanPrediction& p = plan.predicted;
  out += fmt::format(
      " \"predicted\": {{\"peak_bytes\": {}, \"baseline_peak_bytes\": {}, \"recompute_cost\": "
      "{}, \"cost_unit\": {}}},\n",
      p.peak_bytes, p.baseline_peak_bytes, json_util::Dump(json(p.recompute_cost)),
      Str(p.cost_unit));
  out += " \"steps\": [";
  const std::vector<Step>& steps = plan.program.steps;
  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& step = steps[s];
    out += s ? ",\n  " : "\n  ";
    if (!step.IsRun()) {
      out += "{\"free\": " + IdList(g, step.free) + "}";
      continue;
    }
    out += "{\"run\": " + Str(g.ops[step.op].id);
    if (!step.inplace.empty()) {
      out += ", \"inplace\": {";
      for (size_t i = 0; i < step.inplace.size(); ++i)
        out += fmt::format("{}{}: {}", i ? ", " : "", Str(g.tensors[step.inplace[i].first].id),
                           Str(g.tensors[step.inplace[i].second].id));
      out += "}";
    }
    out += "}";
  }
  out += steps.empty() ? "]\n}\n" : "\n ]\n}\n";
  return out;
}

bool ParsePlan(const std::string& text, const std::string& file, const Graph& joint, Plan* plan,
               std::string* err) {
  *plan = Plan();
  std::string depth_err;
  if (!CheckJsonDepth(text, kMaxJsonDepth, &depth_err)) {
    *err = fmt::format("{}: {}; expected at most {} levels of arrays and objects", file, depth_err,
                       kMaxJsonDepth);
    return false;
  }
  json doc;
  DomBuilder builder(&doc);
  if (!json::sax_parse(text, &builder)) {
    if (!builder.duplicate().empty())
      *err = fmt::format("{}: {}: appears twice; expected each member once", file,
                         builder.duplicate());
    else
      *err =
          fmt::format("{}: invalid JSON: {}", file,
                      builder.syntax_error().empty() ? "unexpected input" : builder.syntax_error());
    return false;
  }
  PlanParser parser(file, joint, plan, err);
  return parser.Parse(doc);
}

bool LoadPlanFile(const std::string& path, const Graph& joint, Plan* plan, std::string* err) {
  std::string text;
  if (!ReadFile(path, &text, err)) return false;
  return ParsePlan(text, path, joint, plan, err);
}

}  // namespace memplan
