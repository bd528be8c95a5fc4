// The chart of `loco fit` (declared in fit_report.h): one gnuplot script with the data inline.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "loco/sim/fit_report.h"
#include "loco/sim/gnuplot.h"
#include "loco/util/error.h"

namespace loco::sim {

namespace {

// `count` sizes spaced evenly in log scale over [low, high].
std::vector<double> sizes(double low, double high, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(low * std::pow(high / low, i / (count - 1.0)));
  return out;
}

}  // namespace

void write_fit_chart(const FitReport& r, const std::filesystem::path& png) {
  double low = INFINITY, high = 0;
  for (const auto& p : r.data) {
    low = std::min(low, p.params);
    high = std::max(high, p.params);
  }
  for (const auto& p : r.predictions) high = std::max(high, p.request.params);
  const auto grid = sizes(low / 1.3, high * 1.3, 60);

  std::string blocks, plots;
  auto add_plot = [&plots](const std::string& spec) { plots += (plots.empty() ? "plot " : ", \\\n     ") + spec; };
  int colour = 0;
  for (const auto& g : r.groups) {
    ++colour;
    const std::string label = group_label(g.algorithm, g.replicas);
    blocks += fmt::format("$data{} << EOD\n", colour);
    for (const auto& p : r.cells) {
      bool member = p.algorithm == g.algorithm && (g.algorithm == "dp" || p.replicas == g.replicas);
      if (member) blocks += fmt::format("{:.8g} {:.8g}\n", p.params, p.loss);
    }
    blocks += "EOD\n";
    add_plot(fmt::format("$data{} using 1:2 with points pointtype 7 linecolor {} title {}", colour, colour,
                         gnuplot_quote(label)));
    if (g.form.law) {
      blocks += fmt::format("$power{} << EOD\n", colour);
      for (double n : grid) blocks += fmt::format("{:.8g} {:.8g}\n", n, (*g.form.law)(n));
      blocks += "EOD\n";
      add_plot(fmt::format("$power{} using 1:2 with lines dashtype 2 linecolor {} title {}", colour, colour,
                           gnuplot_quote(label + ": A·N^{α}")));
    }
    if (r.additive.law && g.algorithm == r.joint_algorithm) {
      blocks += fmt::format("$additive{} << EOD\n", colour);
      for (double n : grid) blocks += fmt::format("{:.8g} {:.8g}\n", n, r.additive.law->law(n, g.replicas));
      blocks += "EOD\n";
      add_plot(fmt::format("$additive{} using 1:2 with lines linewidth 2 linecolor {} title {}", colour, colour,
                           gnuplot_quote(label + ": A·N^{α+βM}+C")));
    }
  }
  if (!r.predictions.empty()) {
    blocks += "$predicted << EOD\n";
    for (const auto& p : r.predictions) {
      auto value = p.additive ? p.additive : p.joint ? p.joint : p.per_group;
      if (value) blocks += fmt::format("{:.8g} {:.8g}\n", p.request.params, *value);
    }
    blocks += "EOD\n";
    add_plot("$predicted using 1:2 with points pointtype 6 pointsize 2 linecolor rgb \"black\" title \"predictions\"");
  }
  std::string script = fmt::format(
      "set terminal pngcairo size 1100,720 enhanced\nset output output\n"
      "set title \"loco fit: final evaluation loss against model size\"\n"
      "set xlabel \"parameters N\"\nset ylabel \"evaluation loss\"\nset logscale x\nset grid\n"
      "set autoscale yfix\nset offsets 0, 0, graph 0.05, graph 0.05\n"
      "set key outside right top\nset format x \"%.0e\"\n{}{}\n",
      blocks, plots);
  draw_chart(script, png);
}

}  // namespace loco::sim
