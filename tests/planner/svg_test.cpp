// SVG rendering of plans.
#include <doctest/doctest.h>

#include <string>

#include "carve/planner/strategy.h"
#include "carve/planner/svg.h"
#include "carve/planner/synthetic.h"
#include "planner_test_util.h"

using namespace carve::planner;

namespace {

size_t count(const std::string& s, std::string_view what) {
  size_t n = 0;
  for (size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("planner/svg/small_plan_has_rects_labels_and_lines") {
  Problem p = testing::paper_example();
  p.buffers[0].id = "a<&>\"b";
  p.buffers.push_back(testing::buf("zero", 0, 3, 0));
  auto r = (*make_strategy("greedy-size"))->plan(p, {});
  REQUIRE(r.ok());
  const std::string svg = plan_to_svg(p, r->plan, lower_bound_bytes(p));
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(count(svg, "fill=\"hsl(") == 8);  // one per non-empty buffer
  CHECK(svg.find("arena 124 B") != std::string::npos);
  CHECK(svg.find("lower bound 124 B") != std::string::npos);
  CHECK(svg.find("a&lt;&amp;&gt;&quot;b") != std::string::npos);
  CHECK(svg.find("a<&>") == std::string::npos);
  CHECK(svg.find(">t1</text>") != std::string::npos);  // per-buffer labels for small plans
  CHECK(svg.find("<title>") != std::string::npos);
}

TEST_CASE("planner/svg/large_plan_stays_compact") {
  const Problem p = make_model_like_problem(60000, 5);
  auto r = (*make_strategy("online"))->plan(p, {});  // any valid plan; online is the cheapest
  REQUIRE(r.ok());
  const std::string svg = plan_to_svg(p, r->plan, lower_bound_bytes(p));
  CHECK(count(svg, "<rect ") == 60000 + 2);  // buffers + background + frame
  CHECK(svg.find("<title>") == std::string::npos);
  CHECK(count(svg, "<text") < 10);
  CHECK(svg.find("stroke-width=\"0.5\"") == std::string::npos);
  CHECK(svg.size() < 60000 * 120);
}

TEST_CASE("planner/svg/degenerate_inputs") {
  const std::string empty = plan_to_svg(Problem{}, MemoryPlan{}, 0);
  CHECK(empty.find("</svg>") != std::string::npos);
  CHECK(empty.find("nan") == std::string::npos);
  // Fewer offsets than buffers: the extra buffers are skipped, not read out of bounds.
  Problem p{{testing::buf("a", 0, 2, 4), testing::buf("b", 1, 3, 4)}};
  const std::string partial = plan_to_svg(p, MemoryPlan{4, {0}}, 8);
  CHECK(count(partial, "fill=\"hsl(") == 1);
}
