// Signal-processing ONNX operators whose outputs depend only on scalar inputs and
// attributes: HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix (opset 17).
// Each is folded to a constant at import: the scalars must be import-known (initializers,
// Constants, or graph inputs whose values onnx::Model supplies), and the whole output is a
// function of them, so nothing is left to compute at run time.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <numbers>

#include "context.h"

namespace carve::onnx::detail {
namespace {

// output_datatype (default float), any dtype carve has.
Result<ir::DType> output_datatype(const NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(int64_t onnx_dtype, n.attr_int("output_datatype", ::onnx::TensorProto::FLOAT));
  Result<ir::DType> dtype = dtype_from_onnx(static_cast<int32_t>(onnx_dtype));
  if (!dtype.ok()) return n.unsupported(dtype.status().message());
  if (*dtype == ir::DType::kBool) return n.invalid("output_datatype bool (the spec allows numeric types only)");
  return *dtype;
}

// A scalar integer input (size, num_mel_bins, ...), at least `min`.
Result<int64_t> int_scalar(const NodeContext& n, int i, std::string_view what, int64_t min) {
  CARVE_ASSIGN_OR_RETURN(Tensor t, n.known_input(i, what));
  if (!ir::is_integer(t.type.dtype))
    return n.invalid(fmt::format("input {} ({}) is {}, needs an integer type", i, what, ir::dtype_name(t.type.dtype)));
  const std::vector<int64_t> v = to_int64s(t);
  if (v.size() != 1) return n.invalid(fmt::format("input {} ({}) must hold one element, has {}", i, what, v.size()));
  if (v[0] < min) return n.invalid(fmt::format("input {} ({}) is {}, needs at least {}", i, what, v[0], min));
  return v[0];
}

// The generalized cosine window sum_k (-1)^k a_k cos(2 pi k i / N), N = size (periodic)
// or size - 1 (symmetric). A symmetric window of size 1 divides by N = 0: ONNX's function
// body and ONNX Runtime give NaN there, and so does this (0 / 0 in the angle).
Status lower_cosine_window(NodeContext& n, std::span<const double> coefficients) {
  CARVE_ASSIGN_OR_RETURN(int64_t size, int_scalar(n, 0, "size", 1));
  CARVE_ASSIGN_OR_RETURN(int64_t periodic, n.attr_int("periodic", 1));
  if (periodic != 0 && periodic != 1) return n.invalid(fmt::format("periodic={} (0 or 1)", periodic));
  CARVE_ASSIGN_OR_RETURN(ir::DType dtype, output_datatype(n));
  const ir::TensorType type{dtype, ir::Shape{size}};
  CARVE_RETURN_IF_ERROR(n.check_folded(type, sizeof(double)));
  const double period = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> window(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    const double angle = 2 * std::numbers::pi * static_cast<double>(i) / period;
    double w = 0, sign = 1;
    for (size_t k = 0; k < coefficients.size(); ++k, sign = -sign)
      w += sign * coefficients[k] * std::cos(static_cast<double>(k) * angle);
    window[static_cast<size_t>(i)] = w;
  }
  return n.set_output(0, n.constant_doubles(dtype, type.shape, window));
}

Status lower_hann_window(NodeContext& n) {
  const double a[] = {0.5, 0.5};
  return lower_cosine_window(n, a);
}

Status lower_hamming_window(NodeContext& n) {
  const double a[] = {25.0 / 46.0, 21.0 / 46.0};
  return lower_cosine_window(n, a);
}

Status lower_blackman_window(NodeContext& n) {
  const double a[] = {0.42, 0.5, 0.08};
  return lower_cosine_window(n, a);
}

// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangular filters between
// num_mel_bins + 2 points spaced evenly on the mel scale (mel = 2595 log10(1 + hz / 700))
// from lower_edge_hertz to upper_edge_hertz, each point mapped to the spectrogram bin
// floor((dft_length + 1) hz / sample_rate). The mel step divides the range by
// num_mel_bins + 2 points, as ONNX's reference and ONNX Runtime do.
Status lower_mel_weight_matrix(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(int64_t mel_bins, int_scalar(n, 0, "num_mel_bins", 1));
  CARVE_ASSIGN_OR_RETURN(int64_t dft_length, int_scalar(n, 1, "dft_length", 1));
  CARVE_ASSIGN_OR_RETURN(int64_t sample_rate, int_scalar(n, 2, "sample_rate", 1));
  CARVE_ASSIGN_OR_RETURN(double lower_hz, n.const_scalar(3, "lower_edge_hertz"));
  CARVE_ASSIGN_OR_RETURN(double upper_hz, n.const_scalar(4, "upper_edge_hertz"));
  if (!(lower_hz >= 0 && lower_hz <= upper_hz && std::isfinite(upper_hz)))
    return n.invalid(fmt::format("edges {} Hz to {} Hz (needs 0 <= lower <= upper, finite)", lower_hz, upper_hz));
  CARVE_ASSIGN_OR_RETURN(ir::DType dtype, output_datatype(n));
  const int64_t spectrogram_bins = dft_length / 2 + 1;
  const ir::TensorType type{dtype, ir::Shape{spectrogram_bins, mel_bins}};
  CARVE_RETURN_IF_ERROR(n.check_folded(type, sizeof(double)));

  const auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low_mel = to_mel(lower_hz);
  const double mel_step = (to_mel(upper_hz) - low_mel) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> bins(static_cast<size_t>(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595) - 1);
    const double bin = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    if (!(bin >= 0 && bin < static_cast<double>(spectrogram_bins)))
      return n.invalid(fmt::format("upper_edge_hertz {} maps past the {} spectrogram bins of dft_length {} at "
                                   "sample_rate {}", upper_hz, spectrogram_bins, dft_length, sample_rate));
    bins[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  std::vector<double> weights(static_cast<size_t>(spectrogram_bins * mel_bins), 0.0);
  const auto at = [&](int64_t bin, int64_t mel) -> double& {
    return weights[static_cast<size_t>(bin * mel_bins + mel)];
  };
  for (int64_t m = 0; m < mel_bins; ++m) {
    const int64_t left = bins[static_cast<size_t>(m)], center = bins[static_cast<size_t>(m + 1)],
                  right = bins[static_cast<size_t>(m + 2)];
    if (center == left) at(center, m) = 1;
    for (int64_t j = left; center > left && j <= center; ++j)
      at(j, m) = static_cast<double>(j - left) / static_cast<double>(center - left);
    for (int64_t j = center; j < right; ++j)
      at(j, m) = static_cast<double>(right - j) / static_cast<double>(right - center);
  }
  return n.set_output(0, n.constant_doubles(dtype, type.shape, weights));
}

}  // namespace

void register_signal_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["HannWindow"] = {lower_hann_window, {"output_datatype", "periodic"}};
  t["HammingWindow"] = {lower_hamming_window, {"output_datatype", "periodic"}};
  t["BlackmanWindow"] = {lower_blackman_window, {"output_datatype", "periodic"}};
  t["MelWeightMatrix"] = {lower_mel_weight_matrix, {"output_datatype"}};
}

}  // namespace carve::onnx::detail
