// Reads segmentation-3.0 from an ONNX file. Exports of this model differ in opset, in tensor names
// (`onnx::LSTM_784`, `sincnet.conv1d.1.weight`, ...) and in whether the SincNet filters are folded
// into a constant, so every weight is found by the graph's structure and the tensors' shapes.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "model/onnx_graph.h"
#include "model/segmentation_model.h"
#include "model/sinc_filters.h"

namespace speakerseg {
namespace {

using namespace onnx_graph;

// SincNet's band-pass filters are symmetric (the 40 cosine ones) and antisymmetric (the 40 sine
// ones) about their centre tap; both engines add or subtract each pair of taps before multiplying.
// Filters folded into a constant by an export keep that to the bit; anything further off is
// another network, which the engines would silently compute wrongly.
void check_sinc_symmetry(const GraphIndex& g, const std::vector<float>& filters) {
  float largest = 0;
  for (float v : filters) largest = std::max(largest, std::fabs(v));
  const float tolerance = 1e-6f * largest;
  for (int f = 0; f < kSincFilters; ++f) {
    const float* w = &filters[static_cast<size_t>(f) * kSincKernel];
    const bool cosine = f < kSincFilters / 2;
    for (int k = 0; k <= kSincKernel / 2; ++k) {
      const float mirror = w[kSincKernel - 1 - k];
      const float off = std::fabs(cosine ? w[k] - mirror : w[k] + mirror);
      if (off <= tolerance) continue;
      // Full precision: at std::to_string's six decimals two unequal taps can print alike.
      const auto num = [](float v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", v);
        return std::string(buf);
      };
      const int m = kSincKernel - 1 - k;
      const std::string filter =
          "SincNet filter " + std::to_string(f) + " (a " + (cosine ? "cosine" : "sine") +
          " filter, " + (cosine ? "symmetric" : "antisymmetric") +
          " about its centre tap, as segmentation-3.0's band-pass filters are)";
      const std::string rule =
          k == m ? "its centre tap " + std::to_string(k) + " must be 0 but holds " + num(w[k])
                 : "tap " + std::to_string(k) + " must hold " + (cosine ? "" : "minus ") +
                       "what tap " + std::to_string(m) + " holds, but holds " + num(w[k]) +
                       " against " + num(mirror);
      g.fail(filter + " is not " + (cosine ? "symmetric" : "antisymmetric") + ": " + rule +
             " (off by " + num(off) + ", more than the " + num(tolerance) + " allowed)");
    }
  }
}

// SincNet weight [80, 1, 251]: a constant, or computed from the band edges low_hz_ and band_hz_.
std::vector<float> load_sinc_filters(const GraphIndex& g, const std::string& weight_name,
                                     bool* computed) {
  if (g.is_initializer(weight_name)) {
    *computed = false;
    auto filters =
        g.tensor(weight_name, {kSincFilters, 1, kSincKernel}, "SincNet filter weight").data;
    check_sinc_symmetry(g, filters);
    return filters;
  }
  // Computed in the graph: the band edges are the [40, 1] constants taken through Abs
  // (low = 50 + |low_hz_|, high = low + 50 + |band_hz_|); other [40, 1] constants, such as the
  // zero centre taps of the sine filters, are not.
  std::vector<std::string> edges;
  for (const auto* n : g.nodes())
    if (n->op_type() == "Abs" && n->input_size() == 1 &&
        g.dims_of(n->input(0)) == Dims{kSincFilters / 2, 1} &&
        std::find(edges.begin(), edges.end(), n->input(0)) == edges.end())
      edges.push_back(n->input(0));
  if (edges.size() != 2)
    g.fail("the SincNet filters are computed in the graph but " + std::to_string(edges.size()) +
           " band-edge tensors of shape [40, 1] were found instead of 2 (low_hz_, band_hz_)");
  auto named = [&](const std::string& n, const char* key) {
    return n.find(key) != std::string::npos;
  };
  std::string low = edges[0], band = edges[1];
  if (named(edges[1], "low_hz") || named(edges[0], "band_hz")) {
    std::swap(low, band);
  } else if (!named(edges[0], "low_hz")) {
    // Unnamed: low_hz_ feeds both band edges (high = low + 50 + |band_hz_|), so more of the graph
    // depends on it than on band_hz_.
    if (g.reachable_from(edges[1]).size() > g.reachable_from(edges[0]).size()) std::swap(low, band);
  }
  *computed = true;
  auto lo = g.tensor(low, {kSincFilters / 2, 1}, "SincNet low_hz_").data;
  auto bd = g.tensor(band, {kSincFilters / 2, 1}, "SincNet band_hz_").data;
  return sinc_filters_from_band_edges(lo, bd);
}

// [out][in][k] (ONNX Conv) -> [out][k][in] (ours, see SegmentationModel).
std::vector<float> tap_major(const std::vector<float>& w, int out, int in, int k) {
  std::vector<float> r(w.size());
  for (int o = 0; o < out; ++o)
    for (int c = 0; c < in; ++c)
      for (int t = 0; t < k; ++t) r[(o * k + t) * in + c] = w[(o * in + c) * k + t];
  return r;
}

}  // namespace

size_t SegmentationModel::parameter_count() const {
  // The 80 x 251 SincNet taps are a function of 80 learnt band edges.
  size_t n = 2 + kSincFilters;
  for (int s = 0; s < 3; ++s) n += norm_scale[s].size() + norm_bias[s].size();
  for (int c = 0; c < 2; ++c) n += conv_weight[c].size() + conv_bias[c].size();
  for (const auto& l : lstm) n += l.w.size() + l.r.size() + 2 * l.bias.size();  // Wb and Rb
  for (int h = 0; h < 3; ++h) n += head_weight[h].size() + head_bias[h].size();
  return n;
}

std::shared_ptr<const SegmentationModel> SegmentationModel::load_onnx(
    const std::string& path, const std::string& name_another) {
  const std::string hint =
      "Run scripts/setup.sh to fetch segmentation-3.0.onnx, or " + name_another;
  const onnx::ModelProto proto = onnx_graph::read_model(path, hint);
  GraphIndex g(path, proto.graph(), "Expected pyannote segmentation-3.0 exported to ONNX. " + hint);
  auto m = std::make_shared<SegmentationModel>();
  m->source = path;

  std::vector<const onnx::NodeProto*> norms, convs, lstms, matmuls;
  std::set<std::string> conv_weights;
  for (const auto* n : g.nodes()) {
    const std::string& op = n->op_type();
    if (op == "InstanceNormalization") norms.push_back(n);
    if (op == "Conv" && n->input_size() >= 2 && conv_weights.insert(n->input(1)).second)
      convs.push_back(n);  // the same convolution can sit in both branches of an If
    if (op == "LSTM") {
      lstms.push_back(n);
      matmuls.clear();  // the head's linear layers are the products after the last LSTM
    }
    if ((op == "MatMul" || op == "Gemm") && n->input_size() >= 2 && g.is_initializer(n->input(1)))
      matmuls.push_back(n);
  }
  if (norms.size() != 4)
    g.fail("found " + std::to_string(norms.size()) + " InstanceNormalization nodes, expected 4");
  if (convs.size() != 3)
    g.fail("found " + std::to_string(convs.size()) + " Conv layers, expected 3");
  if (lstms.size() != kLstmLayers)
    g.fail("found " + std::to_string(lstms.size()) + " LSTM layers, expected 4");
  if (matmuls.size() != 3)
    g.fail("found " + std::to_string(matmuls.size()) + " linear layers, expected 3");

  // Instance norms, in order: waveform (1 channel), then stages 0, 1, 2.
  const int norm_channels[4] = {1, kSincFilters, kConvChannels, kConvChannels};
  for (int i = 0; i < 4; ++i) {
    const auto& n = *norms[i];
    const std::string role =
        i == 0 ? "waveform instance norm" : "stage " + std::to_string(i - 1) + " instance norm";
    if (n.input_size() != 3) g.fail(role + " has no affine parameters");
    auto scale = g.tensor(n.input(1), {norm_channels[i]}, (role + " scale").c_str()).data;
    auto bias = g.tensor(n.input(2), {norm_channels[i]}, (role + " bias").c_str()).data;
    if (const auto* eps = attribute(n, "epsilon")) m->norm_eps = eps->f();
    if (i == 0) {
      m->wav_norm_scale = scale[0];
      m->wav_norm_bias = bias[0];
    } else {
      m->norm_scale[i - 1] = std::move(scale);
      m->norm_bias[i - 1] = std::move(bias);
    }
  }

  // Convolutions: SincNet (stride 10, 251 taps), then 80->60 and 60->60 with 5 taps.
  const auto& sinc = *convs[0];
  if (ints_attribute(sinc, "strides") != std::vector<int64_t>{kSincStride})
    g.fail("first convolution (" + node_label(sinc) + ") does not have stride 10");
  m->sinc_filters = load_sinc_filters(g, sinc.input(1), &m->sinc_computed_from_band_edges);
  for (int c = 0; c < 2; ++c) {
    const auto& n = *convs[c + 1];
    const int in = c == 0 ? kSincFilters : kConvChannels;
    const std::string role = "convolution " + std::to_string(c + 1);
    auto w =
        g.tensor(n.input(1), {kConvChannels, in, kConvKernel}, (role + " weight").c_str()).data;
    m->conv_weight[c] = tap_major(w, kConvChannels, in, kConvKernel);
    if (n.input_size() >= 3 && !n.input(2).empty())
      m->conv_bias[c] = g.tensor(n.input(2), {kConvChannels}, (role + " bias").c_str()).data;
    else
      m->conv_bias[c].assign(kConvChannels, 0.f);
    for (const char* a : {"strides", "dilations"}) {
      auto v = ints_attribute(n, a);
      if (!v.empty() && v != std::vector<int64_t>{1}) g.fail(role + " has " + a + " != 1");
    }
  }

  for (int l = 0; l < kLstmLayers; ++l) {
    const auto& n = *lstms[l];
    const std::string role = "LSTM layer " + std::to_string(l);
    const int in = l == 0 ? kConvChannels : kLstmOutput;
    const auto* hidden = attribute(n, "hidden_size");
    const auto* direction = attribute(n, "direction");
    if (!hidden || hidden->i() != kLstmHidden) g.fail(role + " does not have hidden size 128");
    if (!direction || direction->s() != "bidirectional") g.fail(role + " is not bidirectional");
    if (const auto* a = attribute(n, "activations"); a && a->strings_size() > 0) {
      const std::vector<std::string> def{"Sigmoid", "Tanh", "Tanh", "Sigmoid", "Tanh", "Tanh"};
      if (std::vector<std::string>(a->strings().begin(), a->strings().end()) != def)
        g.fail(role + " uses non-default activations");
    }
    if (const auto* a = attribute(n, "input_forget"); a && a->i() != 0)
      g.fail(role + " couples input and forget gates");
    if (const auto* a = attribute(n, "clip"); a) g.fail(role + " clips its cell state");
    if (n.input_size() < 3 || n.input(2).empty()) g.fail(role + " has no bias");
    if (n.input_size() >= 8 && !n.input(7).empty()) g.fail(role + " has peephole weights");
    // Inputs 4 and 5 (sequence_lens, initial_h, initial_c) must not carry a learnt state.
    for (int s = 5; s <= 6 && s < n.input_size(); ++s)
      if (g.is_initializer(n.input(s))) {
        auto st = g.tensor(n.input(s), g.dims_of(n.input(s)), (role + " initial state").c_str());
        for (float v : st.data)
          if (v != 0.f) g.fail(role + " has a non-zero initial state");
      }
    auto& L = m->lstm[l];
    L.input_size = in;
    L.w = g.tensor(n.input(1), {2, kLstmGates, in}, (role + " input weights W").c_str()).data;
    L.r =
        g.tensor(n.input(2), {2, kLstmGates, kLstmHidden}, (role + " recurrent weights R").c_str())
            .data;
    auto b = g.tensor(n.input(3), {2, 2 * kLstmGates}, (role + " bias B").c_str()).data;
    L.bias.resize(2 * kLstmGates);
    for (int d = 0; d < 2; ++d)
      for (int j = 0; j < kLstmGates; ++j)
        L.bias[d * kLstmGates + j] =
            b[d * 2 * kLstmGates + j] + b[d * 2 * kLstmGates + kLstmGates + j];
  }

  // Linear head: MatMul + Add, or Gemm.
  const int head_in[3] = {kLstmOutput, kHeadHidden, kHeadHidden};
  const int head_out[3] = {kHeadHidden, kHeadHidden, kClasses};
  for (int h = 0; h < 3; ++h) {
    const auto& n = *matmuls[h];
    const std::string role = "linear layer " + std::to_string(h);
    bool trans_b = false;
    if (const auto* a = attribute(n, "transB")) trans_b = a->i() != 0;
    Dims want = trans_b ? Dims{head_out[h], head_in[h]} : Dims{head_in[h], head_out[h]};
    auto w = g.tensor(n.input(1), want, (role + " weight").c_str()).data;
    if (trans_b) {
      std::vector<float> t(w.size());
      for (int i = 0; i < head_in[h]; ++i)
        for (int o = 0; o < head_out[h]; ++o) t[i * head_out[h] + o] = w[o * head_in[h] + i];
      w.swap(t);
    }
    m->head_weight[h] = std::move(w);
    std::string bias_name;
    if (n.op_type() == "Gemm" && n.input_size() >= 3) {
      bias_name = n.input(2);
    } else {
      for (const auto* c : g.consumers(n.output(0)))
        if (c->op_type() == "Add")
          for (const auto& in : c->input())
            if (g.is_initializer(in)) bias_name = in;
    }
    if (bias_name.empty()) g.fail(role + " has no bias");
    m->head_bias[h] = g.tensor(bias_name, {head_out[h]}, (role + " bias").c_str()).data;
  }

  // The engines return log-probabilities; a graph ending in Softmax or in raw logits would need
  // another decoder and must not be mistaken for this one.
  const auto& output = proto.graph().output(0).name();
  bool log_softmax = false;
  for (const auto* n : g.nodes())
    if (n->op_type() == "LogSoftmax" && n->output_size() > 0 && n->output(0) == output)
      log_softmax = true;
  if (!log_softmax) g.fail("the output '" + output + "' is not produced by LogSoftmax");
  return m;
}

}  // namespace speakerseg
