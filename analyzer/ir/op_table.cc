#include "analyzer/ir/op_table.h"

#include <algorithm>
#include <map>

namespace memplan {
namespace {

enum class Family {
  kUnknown,
  kMatmul,     // linear matmul mm bmm convolution: dX needs W, dW needs X
  kAddmm,      // addmm(bias, a, b)
  kSavesOut,   // relu sigmoid tanh softmax log_softmax
  kSavesIn,    // gelu silu hardtanh leaky_relu avg_pool2d adaptive_avg_pool2d
  kAdd,        // add
  kSub,        // sub
  kMul,        // mul
  kDiv,        // div
  kLayerNorm,  // layer_norm(x, w, b)
  kRmsNorm,    // rms_norm(x, w)
  kBatchNorm,  // batch_norm(x, w, b, running_mean, running_var)
  kGroupNorm,  // group_norm(x, w, b)
  kDropout,
  kEmbedding,  // embedding(weight, indices)
  kMaxPool,
  kCat,
  kSplit,
  kView,      // reshape view transpose permute: gradient is a view
  kReduceTo,  // expand slice: gradient is a new input-sized buffer
  kSdpa,      // scaled_dot_product_attention(q, k, v, [mask])
  kCrossEntropy,
  kMseLoss,
  kSum,
  kMean,
  kNoGrad,  // ones_like, zeros_like, detach, ...
};

const std::map<std::string, Family, std::less<>>& Families() {
  static const auto* table = new std::map<std::string, Family, std::less<>>{
      {"linear", Family::kMatmul},
      {"matmul", Family::kMatmul},
      {"mm", Family::kMatmul},
      {"bmm", Family::kMatmul},
      {"convolution", Family::kMatmul},
      {"conv1d", Family::kMatmul},
      {"conv2d", Family::kMatmul},
      {"conv3d", Family::kMatmul},
      {"addmm", Family::kAddmm},
      {"relu", Family::kSavesOut},
      {"sigmoid", Family::kSavesOut},
      {"tanh", Family::kSavesOut},
      {"softmax", Family::kSavesOut},
      {"_softmax", Family::kSavesOut},
      {"log_softmax", Family::kSavesOut},
      {"_log_softmax", Family::kSavesOut},
      {"gelu", Family::kSavesIn},
      {"silu", Family::kSavesIn},
      {"hardtanh", Family::kSavesIn},
      {"leaky_relu", Family::kSavesIn},
      {"avg_pool2d", Family::kSavesIn},
      {"adaptive_avg_pool2d", Family::kSavesIn},
      {"add", Family::kAdd},
      {"sub", Family::kSub},
      {"mul", Family::kMul},
      {"div", Family::kDiv},
      {"layer_norm", Family::kLayerNorm},
      {"native_layer_norm", Family::kLayerNorm},
      {"rms_norm", Family::kRmsNorm},
      {"batch_norm", Family::kBatchNorm},
      {"native_batch_norm", Family::kBatchNorm},
      {"group_norm", Family::kGroupNorm},
      {"native_group_norm", Family::kGroupNorm},
      {"dropout", Family::kDropout},
      {"native_dropout", Family::kDropout},
      {"embedding", Family::kEmbedding},
      {"max_pool2d", Family::kMaxPool},
      {"max_pool2d_with_indices", Family::kMaxPool},
      {"cat", Family::kCat},
      {"split", Family::kSplit},
      {"reshape", Family::kView},
      {"view", Family::kView},
      {"_unsafe_view", Family::kView},
      {"transpose", Family::kView},
      {"t", Family::kView},
      {"permute", Family::kView},
      {"flatten", Family::kView},
      {"squeeze", Family::kView},
      {"unsqueeze", Family::kView},
      {"expand", Family::kReduceTo},
      {"slice", Family::kReduceTo},
      {"select", Family::kReduceTo},
      {"narrow", Family::kReduceTo},
      {"scaled_dot_product_attention", Family::kSdpa},
      {"cross_entropy", Family::kCrossEntropy},
      {"mse_loss", Family::kMseLoss},
      {"sum", Family::kSum},
      {"mean", Family::kMean},
      {"ones_like", Family::kNoGrad},
      {"zeros_like", Family::kNoGrad},
      {"detach", Family::kNoGrad},
  };
  return *table;
}

// CanonicalOpType without building a string.
std::string_view CanonicalView(std::string_view type) {
  for (std::string_view prefix : {std::string_view("aten."), std::string_view("aten::")}) {
    if (type.substr(0, prefix.size()) == prefix) {
      type.remove_prefix(prefix.size());
      return type.substr(0, type.find('.'));
    }
  }
  return type;
}

Family FamilyOf(const Op& op) {
  const auto& table = Families();
  auto it = table.find(CanonicalView(op.type));
  return it == table.end() ? Family::kUnknown : it->second;
}

Shape DropLast(const Shape& shape) {
  if (shape.empty()) return {};
  return Shape(shape.begin(), shape.end() - 1);
}

// Gradient of an add-like operand: the output gradient itself when the
// operand has the output's size, else a reduction into a new buffer.
GradFlow Broadcast(const Graph& g, const Op& op, size_t i) {
  if (op.outputs.empty()) return GradFlow::kNew;
  return g.tensors[op.inputs[i]].numel == g.tensors[op.outputs[0]].numel ? GradFlow::kView
                                                                         : GradFlow::kNew;
}

}  // namespace

BackwardRule RuleFor(const Graph& g, const Op& op, const std::vector<bool>& requires_grad) {
  BackwardRule r;
  const size_t n = op.inputs.size();
  r.input_grad.assign(n, GradFlow::kNew);
  auto rg = [&](size_t i) { return i < n && requires_grad[op.inputs[i]]; };
  auto shape = [&](size_t i) -> const Shape& { return g.tensors[op.inputs[i]].shape; };
  auto save_other_pair = [&] {  // dA needs B, dB needs A
    if (n >= 2 && rg(0)) r.saved_inputs.push_back(1);
    if (n >= 2 && rg(1)) r.saved_inputs.push_back(0);
    std::sort(r.saved_inputs.begin(), r.saved_inputs.end());
  };
  const Family family = FamilyOf(op);
  switch (family) {
    case Family::kUnknown:
      r.known = false;
      for (size_t i = 0; i < n; ++i) r.saved_inputs.push_back(static_cast<int>(i));
      r.cost_factor = 2.0;
      break;
    case Family::kMatmul:
      save_other_pair();
      r.cost_factor = 2.0;
      break;
    case Family::kAddmm:
      if (n >= 3 && rg(1)) r.saved_inputs.push_back(2);
      if (n >= 3 && rg(2)) r.saved_inputs.push_back(1);
      std::sort(r.saved_inputs.begin(), r.saved_inputs.end());
      if (n >= 1) r.input_grad[0] = Broadcast(g, op, 0);
      r.cost_factor = 2.0;
      break;
    case Family::kSavesOut:
      if (!op.outputs.empty()) r.saved_outputs.push_back(0);
      r.cost_factor = 1.0;
      break;
    case Family::kSavesIn:
      if (n >= 1) r.saved_inputs.push_back(0);
      r.cost_factor = 1.0;
      break;
    case Family::kAdd:
      for (size_t i = 0; i < n; ++i) r.input_grad[i] = Broadcast(g, op, i);
      r.cost_factor = 1.0;
      break;
    case Family::kSub:
      if (n >= 1) r.input_grad[0] = Broadcast(g, op, 0);
      r.cost_factor = 1.0;
      break;
    case Family::kMul:
      save_other_pair();
      r.cost_factor = 2.0;
      break;
    case Family::kDiv:
      if (n >= 2 && (rg(0) || rg(1))) r.saved_inputs.push_back(1);
      if (n >= 2 && rg(1)) r.saved_inputs.insert(r.saved_inputs.begin(), 0);
      r.cost_factor = 2.0;
      break;
    case Family::kLayerNorm:
    case Family::kRmsNorm:
      for (size_t i = 0; i < std::min<size_t>(n, 2); ++i)
        r.saved_inputs.push_back(static_cast<int>(i));
      if (n >= 1) {
        DType stat =
            g.tensors[op.inputs[0]].dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
        if (family == Family::kLayerNorm) r.extras.push_back({"mean", DropLast(shape(0)), stat});
        r.extras.push_back({"rstd", DropLast(shape(0)), stat});
      }
      r.cost_factor = 2.0;
      break;
    case Family::kBatchNorm:
    case Family::kGroupNorm:
      for (size_t i = 0; i < std::min<size_t>(n, 2); ++i)
        r.saved_inputs.push_back(static_cast<int>(i));
      for (size_t i = 3; i < n; ++i) r.input_grad[i] = GradFlow::kNone;  // running stats
      if (n >= 1 && !shape(0).empty()) {
        Shape stat_shape;
        if (family == Family::kBatchNorm) {
          if (shape(0).size() >= 2) stat_shape = {shape(0)[1]};
        } else {
          stat_shape = {shape(0)[0], Dim{32, ""}};  // the usual group count
        }
        r.extras.push_back({"save_mean", stat_shape, DType::kFloat32});
        r.extras.push_back({"save_invstd", stat_shape, DType::kFloat32});
      }
      r.cost_factor = 2.0;
      break;
    case Family::kDropout:
      if (n >= 1) r.extras.push_back({"mask", shape(0), DType::kBool});
      r.cost_factor = 1.0;
      break;
    case Family::kEmbedding:
      if (n >= 2) {
        r.saved_inputs.push_back(1);
        r.input_grad[1] = GradFlow::kNone;
      }
      r.cost_factor = 1.0;
      break;
    case Family::kMaxPool:
      if (n >= 1) r.saved_inputs.push_back(0);
      if (!op.outputs.empty())
        r.extras.push_back({"indices", g.tensors[op.outputs[0]].shape, DType::kInt64});
      r.cost_factor = 1.0;
      break;
    case Family::kCat:
      r.input_grad.assign(n, GradFlow::kView);
      r.cost_factor = 0.0;
      break;
    case Family::kSplit:
      r.cost_factor = 1.0;
      break;
    case Family::kView:
      r.input_grad.assign(n, GradFlow::kNone);
      if (n >= 1) r.input_grad[0] = GradFlow::kView;
      r.cost_factor = 0.0;
      break;
    case Family::kReduceTo:
      r.input_grad.assign(n, GradFlow::kNone);
      if (n >= 1) r.input_grad[0] = GradFlow::kNew;
      r.cost_factor = 1.0;
      break;
    case Family::kSdpa:
      for (size_t i = 0; i < std::min<size_t>(n, 3); ++i)
        r.saved_inputs.push_back(static_cast<int>(i));
      if (!op.outputs.empty()) r.saved_outputs.push_back(0);
      for (size_t i = 3; i < n; ++i) r.input_grad[i] = GradFlow::kNone;  // mask
      if (n >= 1) r.extras.push_back({"logsumexp", DropLast(shape(0)), DType::kFloat32});
      r.cost_factor = 2.5;
      break;
    case Family::kCrossEntropy:
      // log_softmax saves its output, nll_loss the target.
      if (n >= 1) r.extras.push_back({"log_probs", shape(0), g.tensors[op.inputs[0]].dtype});
      if (n >= 2) r.saved_inputs.push_back(1);
      for (size_t i = 1; i < n; ++i) r.input_grad[i] = GradFlow::kNone;
      r.cost_factor = 1.0;
      break;
    case Family::kMseLoss:
      for (size_t i = 0; i < std::min<size_t>(n, 2); ++i)
        r.saved_inputs.push_back(static_cast<int>(i));
      r.cost_factor = 2.0;
      break;
    case Family::kSum:
      if (n >= 1) r.input_grad[0] = GradFlow::kView;  // an expanded view of the gradient
      for (size_t i = 1; i < n; ++i) r.input_grad[i] = GradFlow::kNone;
      r.cost_factor = 0.0;
      break;
    case Family::kMean:
      for (size_t i = 1; i < n; ++i) r.input_grad[i] = GradFlow::kNone;
      r.cost_factor = 1.0;
      break;
    case Family::kNoGrad:
      r.input_grad.assign(n, GradFlow::kNone);
      r.cost_factor = 0.0;
      break;
  }
  return r;
}

double EstimateFlops(const Graph& g, const Op& op) {
  if (op.flops >= 0) return op.flops;
  auto numel = [&](int t) { return static_cast<double>(g.tensors[t].numel); };
  auto last_dim = [&](int t) {
    const auto& s = g.tensors[t].shape;
    return s.empty() ? 1.0 : static_cast<double>(s.back().value);
  };
  const size_t n = op.inputs.size();
  double out = op.outputs.empty() ? 0.0 : numel(op.outputs[0]);
  double in0 = n >= 1 ? numel(op.inputs[0]) : 0.0;
  const std::string_view type = CanonicalView(op.type);
  switch (FamilyOf(op)) {
    case Family::kMatmul:
      if (n < 2) return out;
      if (type.rfind("conv", 0) == 0) {
        const auto& w = g.tensors[op.inputs[1]];
        double per_out = w.shape.empty() || w.shape[0].value == 0
                             ? 0.0
                             : numel(op.inputs[1]) / static_cast<double>(w.shape[0].value);
        return 2.0 * out * per_out + (n >= 3 ? out : 0.0);
      }
      return 2.0 * out * last_dim(op.inputs[0]) + (n >= 3 ? out : 0.0);
    case Family::kAddmm:
      return n >= 3 ? 2.0 * out * last_dim(op.inputs[1]) + out : out;
    case Family::kSdpa: {
      if (n < 3) return out;
      const auto& q = g.tensors[op.inputs[0]].shape;
      const auto& k = g.tensors[op.inputs[1]].shape;
      double s = k.size() >= 2 ? static_cast<double>(k[k.size() - 2].value) : 1.0;
      double rows = q.empty() ? 1.0 : numel(op.inputs[0]) / last_dim(op.inputs[0]);
      return 4.0 * rows * s * last_dim(op.inputs[0]) + 5.0 * rows * s;
    }
    case Family::kLayerNorm:
    case Family::kRmsNorm:
    case Family::kBatchNorm:
    case Family::kGroupNorm:
    case Family::kCrossEntropy:
      return 5.0 * in0;
    case Family::kSavesIn:
      return type == "gelu" || type == "silu" ? 8.0 * in0 : in0;
    case Family::kSavesOut:
      return type.find("softmax") != std::string::npos ? 5.0 * in0 : in0;
    case Family::kView:
    case Family::kNoGrad:
      return 0.0;
    case Family::kSum:
    case Family::kMean:
      return in0;
    default:
      return std::max(out, in0);
  }
}

std::vector<std::string> KnownOpTypes() {
  std::vector<std::string> names;
  for (const auto& [name, family] : Families()) names.push_back(name);
  return names;
}

}  // namespace memplan
