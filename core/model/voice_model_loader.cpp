// Reads the GE2E encoder that scripts/models/convert_voice_model.py writes. The weights are found
// by the graph's structure (three chained LSTM nodes, then one Gemm) and checked by shape; the
// metadata must name this encoder and its front end, since a different mel or embedding size would
// load and run and give meaningless voiceprints.
#include <map>
#include <string>
#include <utility>

#include "model/onnx_graph.h"
#include "model/voice_model.h"

namespace speakerseg {
namespace {

using namespace onnx_graph;

constexpr const char* kFetchHint =
    "Run scripts/setup.sh (or scripts/models/fetch_voice_model.sh) to make "
    "voice-encoder-ge2e.onnx, or ";

}  // namespace

std::shared_ptr<const VoiceModel> VoiceModel::load_onnx(const std::string& path,
                                                        const std::string& name_another) {
  const std::string hint = kFetchHint + name_another;
  const onnx::ModelProto proto = read_model(path, hint);
  GraphIndex g(path, proto.graph(),
               "Expected Resemblyzer's GE2E voice encoder converted to ONNX. " + hint);

  std::map<std::string, std::string> meta;
  for (const auto& p : proto.metadata_props()) meta[p.key()] = p.value();
  // In this order: the encoder's name first, so another network is called that, not a size.
  const std::pair<std::string, std::string> want[] = {
      {"encoder", kVoiceEncoderName},
      {"embedding_dim", std::to_string(kEmbeddingDim)},
      {"mel_bands", std::to_string(kMelBands)},
      {"partial_frames", std::to_string(kPartialFrames)},
      {"sample_rate", "16000"},
      {"n_fft", std::to_string(kMelFft)},
      {"hop_length", std::to_string(kMelHop)},
  };
  for (const auto& [key, value] : want) {
    auto it = meta.find(key);
    if (it == meta.end()) g.fail("its metadata has no '" + key + "' (expected " + value + ")");
    if (it->second != value)
      g.fail("its metadata says " + key + "=" + it->second + ", expected " + value);
  }

  std::vector<const onnx::NodeProto*> lstms, gemms;
  for (const auto* n : g.nodes()) {
    if (n->op_type() == "LSTM") lstms.push_back(n);
    if (n->op_type() == "Gemm" || n->op_type() == "MatMul") gemms.push_back(n);
  }
  if (lstms.size() != kVoiceLayers)
    g.fail("found " + std::to_string(lstms.size()) + " LSTM layers, expected 3");
  if (gemms.size() != 1)
    g.fail("found " + std::to_string(gemms.size()) + " linear layers, expected 1");

  auto m = std::make_shared<VoiceModel>();
  m->source = path;
  m->encoder = kVoiceEncoderName;
  for (int l = 0; l < kVoiceLayers; ++l) {
    const auto& n = *lstms[l];
    const std::string role = "LSTM layer " + std::to_string(l) + " (" + node_label(n) + ")";
    const auto* hidden = attribute(n, "hidden_size");
    if (!hidden || hidden->i() != kVoiceHidden) g.fail(role + " does not have hidden size 256");
    if (const auto* d = attribute(n, "direction"); d && d->s() != "forward")
      g.fail(role + " is not unidirectional (direction " + d->s() + ")");
    if (const auto* a = attribute(n, "activations"); a && a->strings_size() > 0)
      g.fail(role + " uses non-default activations");
    if (attribute(n, "clip")) g.fail(role + " clips its cell state");
    if (n.input_size() < 4 || n.input(3).empty()) g.fail(role + " has no bias");
    for (int i = 4; i < n.input_size(); ++i)
      if (!n.input(i).empty()) g.fail(role + " has sequence lengths, initial states or peepholes");
    const int in = l == 0 ? kMelBands : kVoiceHidden;
    VoiceLstmLayer& L = m->lstm[l];
    L.input_size = in;
    L.w = g.tensor(n.input(1), {1, kVoiceGates, in}, (role + " input weights W").c_str()).data;
    L.r = g.tensor(n.input(2), {1, kVoiceGates, kVoiceHidden},
                   (role + " recurrent weights R").c_str())
              .data;
    const auto b = g.tensor(n.input(3), {1, 2 * kVoiceGates}, (role + " bias B").c_str()).data;
    L.bias.resize(kVoiceGates);
    for (int j = 0; j < kVoiceGates; ++j) L.bias[j] = b[j] + b[kVoiceGates + j];
  }

  const auto& linear = *gemms[0];
  const auto* trans_b = attribute(linear, "transB");
  if (linear.op_type() != "Gemm" || !trans_b || trans_b->i() != 1 || linear.input_size() < 3)
    g.fail("the linear layer is not Gemm(h, W, b) with transB=1");
  m->linear_weight =
      g.tensor(linear.input(1), {kEmbeddingDim, kVoiceHidden}, "linear layer weight").data;
  m->linear_bias = g.tensor(linear.input(2), {kEmbeddingDim}, "linear layer bias").data;

  bool normalised = false;
  for (const auto* n : g.nodes())
    if (n->op_type() == "LpNormalization") normalised = true;
  if (!normalised) g.fail("the embedding is not L2-normalised (no LpNormalization)");
  return m;
}

}  // namespace speakerseg
