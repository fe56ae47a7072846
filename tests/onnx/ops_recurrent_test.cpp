// ONNX RNN, GRU and LSTM (the importer unrolls them onto carve ops): one-node models run
// through the reference interpreter and a Session, against a plain loop over ONNX's
// equations written here in double, plus one case small enough to check by hand.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "one_node_model.h"

using carve::ErrorCode;
using carve::reference::HostTensor;
using carve::onnx_test::check_close;
using carve::onnx_test::check_fails;
using carve::onnx_test::kF32;
using carve::onnx_test::kI32;
using carve::onnx_test::Model;
using carve::onnx_test::Values;

namespace {

using Fn = std::function<double(double)>;
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
const Fn kSigmoid = sigmoid;
const Fn kTanh = [](double x) { return std::tanh(x); };

// One recurrent layer, layout 0, as the reference loop and the model builder read it.
struct Layer {
  std::string op;  // RNN, GRU, LSTM
  int seq = 3, batch = 2, input = 2, hidden = 2, dirs = 1;
  std::string direction = "forward";
  bool linear_before_reset = false;
  std::optional<double> clip;
  std::vector<float> x, w, r, b, p, h0, c0;  // empty: absent (x, w, r always given)
  std::vector<int32_t> lens;                 // empty: absent
  std::vector<Fn> f;                         // the op's activations (both directions)

  int gates() const { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }
};

// Deterministic values in [-scale, scale).
std::vector<float> values(size_t n, uint32_t seed, float scale = 0.8f) {
  std::vector<float> out;
  for (size_t k = 0; k < n; ++k) {
    seed = seed * 1664525u + 1013904223u;
    out.push_back(scale * (static_cast<float>(seed >> 8) / 8388608.f - 1.f));
  }
  return out;
}

Layer make_layer(const std::string& op, int dirs, uint32_t seed) {
  Layer l;
  l.op = op;
  l.dirs = dirs;
  l.direction = dirs == 2 ? "bidirectional" : "forward";
  const size_t gh = static_cast<size_t>(l.gates() * l.hidden);
  l.x = values(static_cast<size_t>(l.seq * l.batch * l.input), seed, 2.f);
  l.w = values(dirs * gh * l.input, seed + 1);
  l.r = values(dirs * gh * l.hidden, seed + 2);
  l.f = op == "RNN" ? std::vector<Fn>{kTanh} : op == "GRU" ? std::vector<Fn>{kSigmoid, kTanh}
                                                            : std::vector<Fn>{kSigmoid, kTanh, kTanh};
  return l;
}

struct Outputs {
  Values y, y_h, y_c;  // [seq, dirs, batch, hidden], [dirs, batch, hidden] x2
};

// ONNX's equations, one element at a time. Steps past a batch entry's length keep its
// state and write zeros to Y.
Outputs reference(const Layer& l) {
  const int H = l.hidden, G = l.gates(), I = l.input, B = l.batch;
  Outputs out;
  out.y.assign(static_cast<size_t>(l.seq * l.dirs * B * H), 0.0);
  const auto clip = [&](double v) { return l.clip ? std::clamp(v, -*l.clip, *l.clip) : v; };
  for (int d = 0; d < l.dirs; ++d) {
    const bool reverse = l.dirs == 2 ? d == 1 : l.direction == "reverse";
    const auto W = [&](int row, int i) { return double(l.w[static_cast<size_t>((d * G * H + row) * I + i)]); };
    const auto R = [&](int row, int k) { return double(l.r[static_cast<size_t>((d * G * H + row) * H + k)]); };
    const auto bias = [&](int half, int row) {
      return l.b.empty() ? 0.0 : double(l.b[static_cast<size_t>((d * 2 + half) * G * H + row)]);
    };
    const auto peep = [&](int g, int j) {
      return l.p.empty() ? 0.0 : double(l.p[static_cast<size_t>((d * 3 + g) * H + j)]);
    };
    std::vector<Values> h(static_cast<size_t>(B), Values(static_cast<size_t>(H), 0.0)), c = h;
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < H; ++j) {
        const size_t at = static_cast<size_t>((d * B + b) * H + j);
        if (!l.h0.empty()) h[b][j] = l.h0[at];
        if (!l.c0.empty()) c[b][j] = l.c0[at];
      }
    for (int step = 0; step < l.seq; ++step) {
      const int t = reverse ? l.seq - 1 - step : step;
      for (int b = 0; b < B; ++b) {
        if (!l.lens.empty() && t >= l.lens[static_cast<size_t>(b)]) continue;
        const auto xw = [&](int g, int j) {
          double s = bias(0, g * H + j);
          for (int i = 0; i < I; ++i) s += double(l.x[static_cast<size_t>((t * B + b) * I + i)]) * W(g * H + j, i);
          return s;
        };
        const auto hr = [&](const Values& hv, int g, int j) {
          double s = bias(1, g * H + j);
          for (int k = 0; k < H; ++k) s += hv[k] * R(g * H + j, k);
          return s;
        };
        Values hn(static_cast<size_t>(H)), cn(static_cast<size_t>(H));
        if (l.op == "RNN") {
          for (int j = 0; j < H; ++j) hn[j] = l.f[0](clip(xw(0, j) + hr(h[b], 0, j)));
        } else if (l.op == "GRU") {
          Values z(H), rg(H), rh(H);
          for (int j = 0; j < H; ++j) {
            z[j] = l.f[0](clip(xw(0, j) + hr(h[b], 0, j)));
            rg[j] = l.f[0](clip(xw(1, j) + hr(h[b], 1, j)));
            rh[j] = rg[j] * h[b][j];
          }
          for (int j = 0; j < H; ++j) {
            const double candidate = l.linear_before_reset ? xw(2, j) + rg[j] * hr(h[b], 2, j) : xw(2, j) + hr(rh, 2, j);
            const double hh = l.f[1](clip(candidate));
            hn[j] = (1 - z[j]) * hh + z[j] * h[b][j];
          }
        } else {
          for (int j = 0; j < H; ++j) {
            const double i = l.f[0](clip(xw(0, j) + hr(h[b], 0, j) + peep(0, j) * c[b][j]));
            const double f = l.f[0](clip(xw(2, j) + hr(h[b], 2, j) + peep(2, j) * c[b][j]));
            const double cc = l.f[1](clip(xw(3, j) + hr(h[b], 3, j)));
            cn[j] = f * c[b][j] + i * cc;
            const double o = l.f[0](clip(xw(1, j) + hr(h[b], 1, j) + peep(1, j) * cn[j]));
            hn[j] = o * l.f[2](cn[j]);
          }
          c[b] = cn;
        }
        h[b] = hn;
        for (int j = 0; j < H; ++j) out.y[static_cast<size_t>(((t * l.dirs + d) * B + b) * H + j)] = hn[j];
      }
    }
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < H; ++j) {
        out.y_h.push_back(h[b][j]);
        out.y_c.push_back(c[b][j]);
      }
  }
  return out;
}

// The layer as a one-node model: X a graph input, the rest initializers (or, with
// `runtime_weights`, W R B graph inputs too, fed by model_inputs).
Model make_model(const Layer& l, int opset = 13, bool runtime_weights = false) {
  Model m(opset);
  const int64_t gh = l.gates() * l.hidden;
  m.input("x", kF32, {l.seq, l.batch, l.input});
  const auto add = [&](const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v,
                       bool as_input) -> std::string {
    if (v.empty()) return "";
    if (as_input) {
      m.input(name, kF32, dims);
    } else {
      m.float_init(name, dims, v);
    }
    return name;
  };
  std::vector<std::string> in{"x", add("w", {l.dirs, gh, l.input}, l.w, runtime_weights),
                              add("r", {l.dirs, gh, l.hidden}, l.r, runtime_weights),
                              add("b", {l.dirs, 2 * gh}, l.b, runtime_weights), ""};
  if (!l.lens.empty()) {
    auto* t = m.g().add_initializer();
    t->set_name("lens");
    t->set_data_type(::onnx::TensorProto::INT32);
    t->add_dims(l.batch);
    for (int32_t v : l.lens) t->add_int32_data(v);
    in[4] = "lens";
  }
  in.push_back(add("h0", {l.dirs, l.batch, l.hidden}, l.h0, false));
  if (l.op == "LSTM") {
    in.push_back(add("c0", {l.dirs, l.batch, l.hidden}, l.c0, false));
    in.push_back(add("p", {l.dirs, 3 * l.hidden}, l.p, false));
  }
  while (!in.empty() && in.back().empty()) in.pop_back();
  m.node(l.op, in, l.op == "LSTM" ? 3 : 2);
  m.i("hidden_size", l.hidden).s("direction", l.direction);
  if (l.op == "GRU" && l.linear_before_reset) m.i("linear_before_reset", 1);
  if (l.clip) m.f("clip", static_cast<float>(*l.clip));
  return m;
}

std::vector<HostTensor> model_inputs(const Layer& l, bool runtime_weights = false) {
  using carve::ir::Shape;
  const int64_t gh = l.gates() * l.hidden;
  std::vector<HostTensor> in{HostTensor::from<float>(Shape{l.seq, l.batch, l.input}, l.x)};
  if (!runtime_weights) return in;
  in.push_back(HostTensor::from<float>(Shape{l.dirs, gh, l.input}, l.w));
  in.push_back(HostTensor::from<float>(Shape{l.dirs, gh, l.hidden}, l.r));
  if (!l.b.empty()) in.push_back(HostTensor::from<float>(Shape{l.dirs, 2 * gh}, l.b));
  return in;
}

// Y, Y_h (and Y_c) of `m` against the reference loop.
void check_layer(const Layer& l, Model m, const std::vector<HostTensor>& inputs) {
  const Outputs want = reference(l);
  const std::vector<const Values*> outputs{&want.y, &want.y_h, &want.y_c};
  for (size_t k = 0; k < (l.op == "LSTM" ? 3u : 2u); ++k) {
    INFO("output " << k);
    m.result = k;
    check_close(m, inputs, *outputs[k], 1e-5, 1e-6);
  }
}

void check_layer(const Layer& l) { check_layer(l, make_model(l), model_inputs(l)); }

}  // namespace

TEST_CASE("onnx/ops/rnn_by_hand") {
  // hidden 1, input 1: h1 = tanh(0.5 x1 + 0.3), h2 = tanh(0.5 x2 - h1 + 0.3) (bias 0.1 + 0.2).
  Layer l;
  l.op = "RNN";
  l.seq = 2, l.batch = 1, l.input = 1, l.hidden = 1;
  l.x = {1.f, -2.f};
  l.w = {0.5f};
  l.r = {-1.f};
  l.b = {0.1f, 0.2f};
  l.f = {kTanh};
  const double h1 = std::tanh(0.5 + 0.3), h2 = std::tanh(-1.0 - h1 + 0.3);
  Model m = make_model(l);
  check_close(m, model_inputs(l), {h1, h2});
  m.result = 1;
  check_close(m, model_inputs(l), {h2});
  const Values loop = reference(l).y;  // the loop the other cases trust agrees
  REQUIRE(loop.size() == 2);
  CHECK(loop[0] == doctest::Approx(h1).epsilon(1e-6));
  CHECK(loop[1] == doctest::Approx(h2).epsilon(1e-6));
}

TEST_CASE("onnx/ops/rnn") {
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    INFO(direction);
    Layer l = make_layer("RNN", std::string(direction) == "bidirectional" ? 2 : 1, 11);
    l.direction = direction;
    l.b = values(static_cast<size_t>(l.dirs * 2 * l.hidden), 12);
    l.h0 = values(static_cast<size_t>(l.dirs * l.batch * l.hidden), 13);
    check_layer(l);
  }
}

TEST_CASE("onnx/ops/gru_linear_before_reset") {
  for (bool lbr : {false, true}) {
    for (bool with_bias : {false, true}) {
      INFO("linear_before_reset " << lbr << ", bias " << with_bias);
      Layer l = make_layer("GRU", 2, 21);
      l.linear_before_reset = lbr;
      if (with_bias) l.b = values(static_cast<size_t>(2 * 2 * 3 * l.hidden), 22);
      l.h0 = values(static_cast<size_t>(2 * l.batch * l.hidden), 23);
      check_layer(l);
    }
  }
}

TEST_CASE("onnx/ops/lstm_bidirectional_peepholes") {
  Layer l = make_layer("LSTM", 2, 31);
  l.b = values(static_cast<size_t>(2 * 2 * 4 * l.hidden), 32);
  l.p = values(static_cast<size_t>(2 * 3 * l.hidden), 33);
  l.h0 = values(static_cast<size_t>(2 * l.batch * l.hidden), 34);
  l.c0 = values(static_cast<size_t>(2 * l.batch * l.hidden), 35);
  check_layer(l);
  SUBCASE("weights as graph inputs") { check_layer(l, make_model(l, 13, true), model_inputs(l, true)); }
  SUBCASE("clip") {
    l.clip = 0.5;
    check_layer(l);
  }
}

TEST_CASE("onnx/ops/recurrent_sequence_lens") {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    INFO(op);
    Layer l = make_layer(op, 2, 41);
    l.lens = {1, 3};
    l.h0 = values(static_cast<size_t>(2 * l.batch * l.hidden), 42);
    check_layer(l);
  }
}

TEST_CASE("onnx/ops/recurrent_unused_y") {
  // Only Y_h and Y_c read: nothing builds Y (no concat of the steps), the states still match.
  Layer l = make_layer("LSTM", 1, 81);
  l.lens = {2, 3};
  Model m = make_model(l);
  m.op->set_output(0, "");
  m.g().mutable_output()->DeleteSubrange(0, 1);
  auto model = carve::onnx_test::import(m);
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  for (const carve::ir::Node& node : model->graph.nodes) CHECK(node.op != carve::ir::OpKind::kConcat);
  const Outputs want = reference(l);
  check_close(m, model_inputs(l), want.y_h);
  m.result = 1;
  check_close(m, model_inputs(l), want.y_c);
}

TEST_CASE("onnx/ops/recurrent_layout_1") {
  // Opset 14, batch-major: X [batch, seq, input], Y [batch, seq, dirs, hidden],
  // Y_h / Y_c [batch, dirs, hidden]; the reference runs the seq-major layer.
  Layer l = make_layer("LSTM", 2, 51);
  l.h0 = values(static_cast<size_t>(2 * l.batch * l.hidden), 52);
  Model m(14);
  m.input("x", kF32, {l.batch, l.seq, l.input}).float_init("w", {2, 8, l.input}, l.w).float_init("r", {2, 8, l.hidden}, l.r);
  std::vector<float> h0_batch_major;  // [dirs, batch, hidden] -> [batch, dirs, hidden]
  for (int b = 0; b < l.batch; ++b)
    for (int d = 0; d < 2; ++d)
      for (int j = 0; j < l.hidden; ++j) h0_batch_major.push_back(l.h0[static_cast<size_t>((d * l.batch + b) * l.hidden + j)]);
  m.float_init("h0", {l.batch, 2, l.hidden}, h0_batch_major);
  m.node("LSTM", {"x", "w", "r", "", "", "h0"}, 3).i("hidden_size", l.hidden).s("direction", "bidirectional").i("layout", 1);
  std::vector<float> x_batch_major;
  for (int b = 0; b < l.batch; ++b)
    for (int t = 0; t < l.seq; ++t)
      for (int i = 0; i < l.input; ++i) x_batch_major.push_back(l.x[static_cast<size_t>((t * l.batch + b) * l.input + i)]);
  const std::vector<HostTensor> in{HostTensor::from<float>(carve::ir::Shape{l.batch, l.seq, l.input}, x_batch_major)};
  const Outputs want = reference(l);
  Values y, y_h, y_c;
  for (int b = 0; b < l.batch; ++b) {
    for (int t = 0; t < l.seq; ++t)
      for (int d = 0; d < 2; ++d)
        for (int j = 0; j < l.hidden; ++j) y.push_back(want.y[static_cast<size_t>(((t * 2 + d) * l.batch + b) * l.hidden + j)]);
    for (int d = 0; d < 2; ++d)
      for (int j = 0; j < l.hidden; ++j) {
        y_h.push_back(want.y_h[static_cast<size_t>((d * l.batch + b) * l.hidden + j)]);
        y_c.push_back(want.y_c[static_cast<size_t>((d * l.batch + b) * l.hidden + j)]);
      }
  }
  check_close(m, in, y);
  m.result = 1;
  check_close(m, in, y_h);
  m.result = 2;
  check_close(m, in, y_c);
}

TEST_CASE("onnx/ops/recurrent_activations") {
  // The optional activations with their alpha/beta, taken in order by the functions
  // that use them: HardSigmoid (0.25, 0.4), LeakyRelu (0.3), ScaledTanh (1.5, 0.7).
  Layer l = make_layer("LSTM", 1, 61);
  l.f = {[](double x) { return std::clamp(0.25 * x + 0.4, 0.0, 1.0); },
         [](double x) { return x >= 0 ? x : 0.3 * x; },
         [](double x) { return 1.5 * std::tanh(0.7 * x); }};
  Model m = make_model(l);
  auto* names = m.attr("activations", ::onnx::AttributeProto::STRINGS);
  for (const char* name : {"HardSigmoid", "LeakyRelu", "ScaledTanh"}) names->add_strings(name);
  auto* alpha = m.attr("activation_alpha", ::onnx::AttributeProto::FLOATS);
  for (float v : {0.25f, 0.3f, 1.5f}) alpha->add_floats(v);
  auto* beta = m.attr("activation_beta", ::onnx::AttributeProto::FLOATS);
  for (float v : {0.4f, 0.7f}) beta->add_floats(v);
  check_layer(l, m, model_inputs(l));

  // The rest on an RNN, one at a time.
  struct Case {
    const char* name;
    std::vector<float> alpha, beta;
    Fn f;
  };
  const std::vector<Case> cases{
      {"Relu", {}, {}, [](double x) { return std::max(x, 0.0); }},
      {"Affine", {2.f}, {-0.5f}, [](double x) { return 2 * x - 0.5; }},
      {"ThresholdedRelu", {0.25f}, {}, [](double x) { return x >= 0.25 ? x : 0.0; }},
      {"Elu", {}, {}, [](double x) { return x >= 0 ? x : std::exp(x) - 1; }},
      {"Softsign", {}, {}, [](double x) { return x / (1 + std::abs(x)); }},
      {"Softplus", {}, {}, [](double x) { return std::log1p(std::exp(x)); }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Layer rnn = make_layer("RNN", 1, 62);
    rnn.f = {c.f};
    Model mr = make_model(rnn);
    mr.attr("activations", ::onnx::AttributeProto::STRINGS)->add_strings(c.name);
    for (float v : c.alpha) mr.attr("activation_alpha", ::onnx::AttributeProto::FLOATS)->add_floats(v);
    for (float v : c.beta) mr.attr("activation_beta", ::onnx::AttributeProto::FLOATS)->add_floats(v);
    check_layer(rnn, mr, model_inputs(rnn));
  }
}

TEST_CASE("onnx/ops/recurrent_errors") {
  const Layer lstm = make_layer("LSTM", 1, 71);
  SUBCASE("input_forget") {
    Model m = make_model(lstm);
    m.i("input_forget", 1);
    check_fails(m, ErrorCode::kUnsupported, "input_forget 1");
  }
  SUBCASE("an unknown activation") {
    Model m = make_model(lstm);
    auto* names = m.attr("activations", ::onnx::AttributeProto::STRINGS);
    for (const char* name : {"Sigmoid", "Tanh", "Swish"}) names->add_strings(name);
    check_fails(m, ErrorCode::kUnsupported, "activation 'Swish'");
  }
  SUBCASE("activation values no function uses") {
    Model m = make_model(lstm);
    m.attr("activation_alpha", ::onnx::AttributeProto::FLOATS)->add_floats(0.5f);
    check_fails(m, ErrorCode::kInvalidArgument, "activation_alpha/activation_beta hold 1/0 values, the activations use 0/0");
  }
  SUBCASE("a sequence length of 0") {
    Layer l = lstm;
    l.lens = {0, 3};
    check_fails(make_model(l), ErrorCode::kUnsupported, "sequence_lens value 0");
  }
  SUBCASE("a sequence length past X's steps") {
    Layer l = lstm;
    l.lens = {4, 3};
    check_fails(make_model(l), ErrorCode::kInvalidArgument, "sequence_lens value 4 (X has 3 steps)");
  }
  SUBCASE("sequence_lens computed at run time") {
    Layer l = lstm;
    l.lens = {3, 3};
    Model m = make_model(l);
    m.g().mutable_initializer(2)->set_name("unused");  // w, r, lens: lens becomes a graph input
    m.input("lens", kI32, {lstm.batch});
    check_fails(m, ErrorCode::kUnsupported, "sequence_lens");
  }
  SUBCASE("a bias of the wrong shape") {
    Layer l = lstm;
    l.b = values(5, 72);
    Model m = make_model(l);
    m.g().mutable_initializer(2)->set_dims(1, 5);
    check_fails(m, ErrorCode::kInvalidArgument, "B f32[1,5] (needs f32[1,16])");
  }
  SUBCASE("layout before opset 14") {
    Model m = make_model(lstm);
    m.i("layout", 1);
    check_fails(m, ErrorCode::kInvalidArgument, "layout needs opset 14");
  }
  SUBCASE("hidden_size disagreeing with W") {
    Model m = make_model(lstm);
    m.op->mutable_attribute(0)->set_i(3);
    check_fails(m, ErrorCode::kInvalidArgument, "hidden_size 3");
  }
}
