// MelWeightMatrix (opset 17): the triangular filters that map the bins of a one-sided
// spectrum ([dft_length / 2 + 1]) to num_mel_bins mel bands, as ONNX defines them: band
// edges equally spaced on the mel scale (2595 log10(1 + f / 700)) between the two edge
// frequencies, each mapped to the spectrum bin floor((dft_length + 1) f / sample_rate);
// band i rises from edge i to edge i + 1 and falls to edge i + 2. The shape function, the
// CPU kernel and (separately) the reference use it.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "strider/status.h"

namespace strider::mel {

// Row-major [dft_length / 2 + 1, num_mel_bins] weights, or an error when the bands do not
// fit the spectrum (an edge beyond the Nyquist bin, or below 0).
inline Result<std::vector<double>> weight_matrix(int64_t num_mel_bins, int64_t dft_length, int64_t sample_rate,
                                                 double low_hertz, double high_hertz) {
  if (num_mel_bins < 1 || dft_length < 1 || sample_rate < 1 || num_mel_bins > (int64_t(1) << 20) ||
      dft_length > (int64_t(1) << 30))
    return invalid_argument(fmt::format("MelWeightMatrix of {} bins, DFT length {} at sample rate {}", num_mel_bins,
                                        dft_length, sample_rate));
  const int64_t spectrum = dft_length / 2 + 1;
  const double low_mel = 2595 * std::log10(1 + low_hertz / 700), high_mel = 2595 * std::log10(1 + high_hertz / 700);
  const double step = (high_mel - low_mel) / double(num_mel_bins + 2);
  std::vector<int64_t> edge(size_t(num_mel_bins + 2));
  for (int64_t k = 0; k < num_mel_bins + 2; ++k) {
    const double hertz = 700 * (std::pow(10.0, (double(k) * step + low_mel) / 2595) - 1);
    const double bin = std::floor(double(dft_length + 1) * hertz / double(sample_rate));
    if (!(bin >= 0) || bin >= double(spectrum))
      return invalid_argument(fmt::format("MelWeightMatrix: band edge {} Hz falls outside the {} spectrum bins", hertz, spectrum));
    edge[size_t(k)] = int64_t(bin);
  }
  std::vector<double> w(size_t(spectrum * num_mel_bins), 0.0);
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t left = edge[size_t(i)], centre = edge[size_t(i + 1)], right = edge[size_t(i + 2)];
    if (centre == left) w[size_t(centre * num_mel_bins + i)] = 1;
    else
      for (int64_t j = left; j <= centre; ++j) w[size_t(j * num_mel_bins + i)] = double(j - left) / double(centre - left);
    for (int64_t j = centre; j < right; ++j) w[size_t(j * num_mel_bins + i)] = double(right - j) / double(right - centre);
  }
  return w;
}

}  // namespace strider::mel
