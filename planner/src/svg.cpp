// SVG rendering of a memory plan (see svg.h).
#include "carve/planner/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

namespace carve::planner {

namespace {

constexpr double kPlotW = 1200.0, kPlotH = 700.0;
constexpr double kLeft = 90.0, kRight = 190.0, kTop = 40.0, kBottom = 50.0;
constexpr size_t kMaxLabels = 40;
constexpr size_t kMaxOutlined = 2000;

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += '?';
        else out += c;
    }
  }
  return out;
}

}  // namespace

std::string plan_to_svg(const Problem& problem, const MemoryPlan& plan, int64_t lower_bound) {
  const auto& bufs = problem.buffers;
  const size_t n = std::min(bufs.size(), plan.offsets.size());
  int64_t t_min = std::numeric_limits<int64_t>::max(), t_max = std::numeric_limits<int64_t>::min();
  double top = static_cast<double>(std::max<int64_t>({plan.arena_bytes, lower_bound, 1}));
  size_t drawn = 0;
  for (size_t i = 0; i < n; ++i) {
    t_min = std::min(t_min, bufs[i].start);
    t_max = std::max(t_max, bufs[i].end);
    top = std::max(top, static_cast<double>(plan.offsets[i]) + static_cast<double>(bufs[i].size));
    if (bufs[i].size > 0) ++drawn;
  }
  if (t_min >= t_max) {
    t_min = 0;
    t_max = 1;
  }
  const double y_max = top * 1.05;
  const double t_span = static_cast<double>(t_max) - static_cast<double>(t_min);
  auto sx = [&](int64_t t) { return kLeft + (static_cast<double>(t) - t_min) / t_span * kPlotW; };
  auto sy = [&](double bytes) { return kTop + kPlotH - bytes / y_max * kPlotH; };

  const double width = kLeft + kPlotW + kRight, height = kTop + kPlotH + kBottom;
  std::string out;
  out.reserve(600 + drawn * 90);
  auto it = std::back_inserter(out);
  fmt::format_to(it,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
                 "viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n",
                 width, height, width, height);
  fmt::format_to(it, "<rect x=\"0\" y=\"0\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"white\"/>\n",
                 width, height);
  const double ratio = lower_bound > 0 ? static_cast<double>(plan.arena_bytes) / lower_bound : 0.0;
  fmt::format_to(it,
                 "<text x=\"{:.0f}\" y=\"24\" font-size=\"15\">{} buffers, arena {} B, lower bound "
                 "{} B{}</text>\n",
                 kLeft, n, plan.arena_bytes, lower_bound,
                 lower_bound > 0 ? fmt::format(" (arena/LB {:.4f})", ratio) : std::string());

  const bool outlined = drawn <= kMaxOutlined;
  fmt::format_to(it, "<g{}>\n",
                 outlined ? " stroke=\"#333\" stroke-width=\"0.5\"" : " shape-rendering=\"crispEdges\"");
  for (size_t i = 0; i < n; ++i) {
    const BufferRequest& b = bufs[i];
    if (b.size == 0) continue;
    double x = sx(b.start), w = sx(b.end) - x;
    const double lo = static_cast<double>(plan.offsets[i]);
    const double hi = lo + static_cast<double>(b.size);
    double y = sy(hi);
    double h = sy(lo) - y;
    w = std::max(w, 0.5);
    h = std::max(h, 0.5);
    const double hue = std::fmod(static_cast<double>(i) * 137.508, 360.0);
    fmt::format_to(it, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
                       "fill=\"hsl({:.0f},60%,65%)\"",
                   x, y, w, h, hue);
    if (outlined) {
      fmt::format_to(it, "><title>{} [{},{}) offset {} size {}</title></rect>\n", xml_escape(b.id),
                     b.start, b.end, plan.offsets[i], b.size);
    } else {
      out += "/>\n";
    }
  }
  out += "</g>\n";
  if (drawn <= kMaxLabels) {
    for (size_t i = 0; i < n; ++i) {
      const BufferRequest& b = bufs[i];
      if (b.size == 0) continue;
      const double cx = (sx(b.start) + sx(b.end)) / 2;
      const double lo = static_cast<double>(plan.offsets[i]);
      const double cy = (sy(lo) + sy(lo + static_cast<double>(b.size))) / 2;
      fmt::format_to(it,
                     "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" "
                     "dominant-baseline=\"middle\" font-size=\"10\">{}</text>\n",
                     cx, cy, xml_escape(b.id));
    }
  }

  // Frame, axes labels.
  fmt::format_to(it,
                 "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"none\" "
                 "stroke=\"black\" stroke-width=\"1\"/>\n",
                 kLeft, kTop, kPlotW, kPlotH);
  const double base = kTop + kPlotH;
  fmt::format_to(it, "<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"start\">{}</text>\n", kLeft,
                 base + 16, t_min);
  fmt::format_to(it, "<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"end\">{}</text>\n",
                 kLeft + kPlotW, base + 16, t_max);
  fmt::format_to(it, "<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">time (step)</text>\n",
                 kLeft + kPlotW / 2, base + 36);
  fmt::format_to(it, "<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"end\">0</text>\n", kLeft - 6,
                 base);
  fmt::format_to(it,
                 "<text x=\"20\" y=\"{:.0f}\" text-anchor=\"middle\" transform=\"rotate(-90 20 "
                 "{:.0f})\">offset (bytes)</text>\n",
                 kTop + kPlotH / 2, kTop + kPlotH / 2);

  // Lower bound and arena lines; labels kept apart when the lines nearly coincide.
  const double y_arena = sy(static_cast<double>(plan.arena_bytes));
  const double y_lb = sy(static_cast<double>(lower_bound));
  double label_arena = y_arena - 4, label_lb = y_lb + 12;
  if (label_lb - label_arena < 14) label_lb = label_arena + 14;
  fmt::format_to(it,
                 "<line x1=\"{:.0f}\" y1=\"{:.2f}\" x2=\"{:.0f}\" y2=\"{:.2f}\" stroke=\"black\" "
                 "stroke-width=\"1.5\"/>\n",
                 kLeft, y_arena, kLeft + kPlotW, y_arena);
  fmt::format_to(it, "<text x=\"{:.0f}\" y=\"{:.2f}\">arena {} B</text>\n", kLeft + kPlotW + 6,
                 label_arena, plan.arena_bytes);
  fmt::format_to(it,
                 "<line x1=\"{:.0f}\" y1=\"{:.2f}\" x2=\"{:.0f}\" y2=\"{:.2f}\" stroke=\"#d00\" "
                 "stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n",
                 kLeft, y_lb, kLeft + kPlotW, y_lb);
  fmt::format_to(it, "<text x=\"{:.0f}\" y=\"{:.2f}\" fill=\"#d00\">lower bound {} B</text>\n",
                 kLeft + kPlotW + 6, label_lb, lower_bound);
  out += "</svg>\n";
  return out;
}

}  // namespace carve::planner
