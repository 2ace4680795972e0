// The loader on the real file, on its computed-SincNet variant, and on every kind of bad file:
// each must fail with a message that names the file and what is wrong.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/temp_dir.h"
#include "common/test_env.h"
#include "model/model_location.h"
#include "model/segmentation_model.h"

namespace speakerseg {
namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string temp_file(const std::string& name, const std::string& bytes) {
  return test::scratch().file(name, bytes);
}

// Loads `path`, expects a ModelError whose message names the file and contains `what`.
void expect_model_error(const std::string& path, const std::string& what) {
  try {
    SegmentationModel::load_onnx(path);
    ADD_FAILURE() << path << " loaded but should not have";
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << "expected '" << what << "' in: " << msg;
    EXPECT_NE(msg.find("scripts/setup.sh"), std::string::npos)
        << "message does not say how to fix it: " << msg;
  }
}

onnx::ModelProto real_proto() {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(read_bytes(test::model_path())));
  return m;
}

TEST(ModelLoader, LoadsTheRealModel) {
  auto m = SegmentationModel::load_onnx(test::model_path());
  EXPECT_EQ(m->parameter_count(), 1473265u);  // segmentation-3.0: about 1.47 M
  EXPECT_FALSE(m->sinc_computed_from_band_edges);
  EXPECT_EQ(m->sinc_filters.size(), size_t(kSincFilters) * kSincKernel);
  // The cosine filters are symmetric and the sine filters antisymmetric: the CPU engine relies on
  // it.
  for (int f = 0; f < kSincFilters; ++f)
    for (int k = 0; k < kSincKernel / 2; ++k) {
      const float a = m->sinc_filters[f * kSincKernel + k];
      const float b = m->sinc_filters[f * kSincKernel + kSincKernel - 1 - k];
      ASSERT_EQ(a, f < kSincFilters / 2 ? b : -b) << "filter " << f << " tap " << k;
    }
  for (const auto& l : m->lstm) {
    EXPECT_EQ(l.w.size(), size_t(2) * kLstmGates * l.input_size);
    EXPECT_EQ(l.bias.size(), size_t(2) * kLstmGates);
  }
  EXPECT_EQ(m->lstm[0].input_size, kConvChannels);
  EXPECT_EQ(m->lstm[3].input_size, kLstmOutput);
}

TEST(ModelLoader, ComputesSincFiltersFromBandEdges) {
  auto m = SegmentationModel::load_onnx(test::reference_dir() + "/sinc_computed.onnx");
  EXPECT_TRUE(m->sinc_computed_from_band_edges);
  EXPECT_EQ(m->parameter_count(), 1473265u);
}

TEST(ModelLoader, MissingFile) {
  expect_model_error(::testing::TempDir() + "no_such_dir/segmentation-3.0.onnx",
                     "cannot be opened");
}

TEST(ModelLoader, Directory) {
  expect_model_error(test::scratch().path(), "is not a regular file");
}

TEST(ModelLoader, EmptyFile) {
  expect_model_error(temp_file("empty.onnx", ""), "not a readable ONNX model");
}

TEST(ModelLoader, NotAnOnnxFile) {
  expect_model_error(temp_file("text.onnx", "This is a README, not a neural network.\n"),
                     "not a readable ONNX model");
  std::string wav("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\x3e\x00\x00",
                  28);
  wav.append(4000, '\x11');
  expect_model_error(temp_file("audio.onnx", wav), "not a readable ONNX model");
}

TEST(ModelLoader, TruncatedFile) {
  const std::string bytes = read_bytes(test::model_path());
  ASSERT_GT(bytes.size(), 1000000u);
  for (size_t keep : {bytes.size() / 2, bytes.size() - 7})
    expect_model_error(temp_file("truncated.onnx", bytes.substr(0, keep)),
                       "not a readable ONNX model");
}

TEST(ModelLoader, ModelOfAnotherArchitecture) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("relu");
  auto* n = g->add_node();
  n->set_op_type("Relu");
  n->add_input("input");
  n->add_output("output");
  g->add_input()->set_name("input");
  g->add_output()->set_name("output");
  expect_model_error(temp_file("relu.onnx", m.SerializeAsString()), "InstanceNormalization");
}

TEST(ModelLoader, ModelOfAnotherShape) {
  // segmentation-3.0's graph with a 4-class classifier instead of the 7 powerset classes.
  onnx::ModelProto m = real_proto();
  bool changed = false;
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    if (t.dims_size() == 2 && t.dims(0) == 128 && t.dims(1) == 7) {
      t.set_dims(1, 4);
      t.set_raw_data(std::string(128 * 4 * sizeof(float), '\0'));
      changed = true;
    }
  ASSERT_TRUE(changed);
  expect_model_error(temp_file("four_classes.onnx", m.SerializeAsString()),
                     "linear layer 2 weight has shape [128, 4], expected [128, 7]");
}

TEST(ModelLoader, LstmOfAnotherSize) {
  onnx::ModelProto m = real_proto();
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "LSTM")
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "hidden_size") a.set_i(64);
  expect_model_error(temp_file("hidden64.onnx", m.SerializeAsString()), "hidden size 128");
}

TEST(ModelLoader, NonFiniteWeights) {
  onnx::ModelProto m = real_proto();
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    if (t.dims_size() == 3 && t.dims(0) == 60 && t.dims(1) == 80) {
      std::string raw = t.raw_data();
      const float nan = NAN;
      std::memcpy(&raw[0], &nan, sizeof nan);
      t.set_raw_data(raw);
    }
  expect_model_error(temp_file("nan.onnx", m.SerializeAsString()), "NaN");
}

// Where the element and speakerseg look when no model is named.
TEST(ModelLocation, TheEnvironmentFirstThenTheBuildTreeThenTheInstalledCopy) {
  const char* saved = std::getenv(kModelEnvironmentVariable);
  const std::string before = saved ? saved : "";
  setenv(kModelEnvironmentVariable, "/srv/models/segmentation-3.0.onnx", 1);
  EXPECT_EQ(default_model_path(), "/srv/models/segmentation-3.0.onnx");
  setenv(kModelEnvironmentVariable, "", 1);  // empty counts as unset
  // The suite's model is the build's (meson -Dmodel), so it exists here.
  ASSERT_TRUE(std::ifstream(build_model_path()).good()) << build_model_path();
  EXPECT_EQ(default_model_path(), build_model_path());
  const std::string installed = installed_model_path();
  const std::string tail = "/speakerchange/segmentation-3.0.onnx";
  ASSERT_GT(installed.size(), tail.size());
  EXPECT_EQ(installed.substr(installed.size() - tail.size()), tail);
  EXPECT_EQ(installed[0], '/') << "the installed copy has an absolute path: " << installed;
  if (saved)
    setenv(kModelEnvironmentVariable, before.c_str(), 1);
  else
    unsetenv(kModelEnvironmentVariable);
}

// Both engines fold the SincNet taps in pairs; filters without that symmetry are another network.
TEST(ModelLoader, SincFiltersWithoutTheirSymmetry) {
  struct Case {
    int filter, tap;
    const char* what;
  } cases[] = {
      {3, 10, "is not symmetric: tap 10 must hold what tap 240 holds, but holds"},
      {52, kSincKernel / 2, "is not antisymmetric: its centre tap 125 must be 0 but holds"},
      {60, 3, "is not antisymmetric: tap 3 must hold minus what tap 247 holds"}};
  for (const Case& c : cases) {
    onnx::ModelProto m = real_proto();
    bool changed = false;
    for (auto& t : *m.mutable_graph()->mutable_initializer())
      if (t.dims_size() == 3 && t.dims(0) == kSincFilters && t.dims(2) == kSincKernel) {
        std::string raw = t.raw_data();
        float v;
        const size_t at = (static_cast<size_t>(c.filter) * kSincKernel + c.tap) * sizeof v;
        std::memcpy(&v, &raw[at], sizeof v);
        v += 0.01f;
        std::memcpy(&raw[at], &v, sizeof v);
        t.set_raw_data(raw);
        changed = true;
      }
    ASSERT_TRUE(changed);
    expect_model_error(temp_file("asymmetric_sinc.onnx", m.SerializeAsString()), c.what);
  }
}

}  // namespace
}  // namespace speakerseg
