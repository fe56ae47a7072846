// Property: random builder graphs verify, and parse(print(g)) == g.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "carve/ir/order.h"
#include "carve/ir/text.h"
#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;

namespace {

using Ints = std::vector<int64_t>;

int pick_int(int lo, int hi) { return *rc::gen::inRange(lo, hi + 1); }  // inclusive
bool coin() { return *rc::gen::arbitrary<bool>(); }

double any_double() {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (coin()) {
    return *rc::gen::element(0.0, -0.0, 0.1, 1.0 / 3.0, 1e-300, -1e300, inf, -inf,
                             std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::max(), 6.0);
  }
  return *rc::gen::suchThat(rc::gen::arbitrary<double>(), [](double d) { return !std::isnan(d); });
}

std::string any_name() {
  std::string s = *rc::gen::container<std::string>(
      rc::gen::element('a', 'Z', '_', '.', '0', '9', ' ', '"', '\\', '\n', '\t', '/', ':', '-',
                       '\x01', '\x7f', '\xc3', '\xa9', '#', '{'));
  return s.empty() ? std::string("input") : s;  // keywords must round-trip too
}

// Builds one random graph through GraphBuilder, choosing a random op each step and
// inputs that make it valid.
class RandomGraph {
 public:
  GraphBuilder b{coin() ? "main" : any_name()};

  void run() {
    for (int i = pick_int(1, 3); i > 0; --i) leaf(DType::kF32, random_shape(0, 4));
    // Stop at the first builder error: build() reports it (a generator or inference bug).
    for (int steps = pick_int(1, 20); steps > 0 && b.status().ok(); --steps) step();
    if (!b.status().ok()) return;
    rename_some();
    pick_outputs();
  }

 private:
  std::vector<ValueId> pool_;  // every value made so far
  int counter_ = 0;

  const TensorType& type(ValueId v) const { return b.graph().value(v).type; }
  std::string fresh(std::string_view prefix) { return fmt::format("{}{}", prefix, counter_++); }

  Shape random_shape(int min_rank, int max_rank) {
    std::vector<int64_t> dims(static_cast<size_t>(pick_int(min_rank, max_rank)));
    for (int64_t& d : dims) d = pick_int(1, 4);
    return Shape(std::move(dims));
  }

  ValueId leaf(DType dtype, Shape shape) {
    ValueId v;
    if (coin()) {
      v = b.input(fresh("in"), dtype, std::move(shape));
    } else {
      std::optional<std::vector<uint8_t>> data;
      int64_t bytes = *byte_size(dtype, shape);
      if (coin()) {
        data = *rc::gen::container<std::vector<uint8_t>>(static_cast<size_t>(bytes),
                                                         rc::gen::arbitrary<uint8_t>());
      }
      v = b.constant(fresh("w"), dtype, std::move(shape), std::move(data));
    }
    pool_.push_back(v);
    return v;
  }

  // An f32 value from the pool with rank in [lo, hi] (and no 0 dim when `nonempty`), else a
  // new leaf.
  ValueId pick(int lo, int hi, bool nonempty = false) {
    std::vector<ValueId> fits;
    for (ValueId v : pool_) {
      const TensorType& t = type(v);
      if (t.dtype == DType::kF32 && t.shape.rank() >= lo && t.shape.rank() <= hi &&
          (!nonempty || *t.shape.num_elements() > 0)) {
        fits.push_back(v);
      }
    }
    if (fits.empty() || !pick_int(0, 3)) return leaf(DType::kF32, random_shape(lo, hi));
    return *rc::gen::elementOf(fits);
  }

  // A shape that broadcasts against `s`: leading dims dropped (or one added when `grow`),
  // some dims set to 1. Two partners of one shape broadcast together only without `grow`.
  Shape partner(const Shape& s, bool grow = true) {
    int drop = pick_int(0, s.rank());
    std::vector<int64_t> dims(s.dims().begin() + drop, s.dims().end());
    for (int64_t& d : dims) {
      if (!pick_int(0, 2)) d = 1;
    }
    if (grow && drop == 0 && dims.size() < 5 && !pick_int(0, 3))
      dims.insert(dims.begin(), pick_int(1, 3));
    return Shape(std::move(dims));
  }

  int axis_of(int rank) { return pick_int(-rank, rank - 1); }

  void add(ValueId v) {
    if (v != kNoValue) pool_.push_back(v);
  }

  void step() {
    OpKind op = *rc::gen::elementOf(all_ops());
    switch (op) {
      case OpKind::kHardSigmoid:
        add(b.hard_sigmoid(pick(0, 4), any_double(), any_double()));
        return;
      case OpKind::kClip: {
        double lo = any_double(), hi = any_double();
        add(b.clip(pick(0, 4), std::min(lo, hi), std::max(lo, hi)));
        return;
      }
      case OpKind::kWhere: {
        ValueId x = pick(0, 4);
        ValueId c = leaf(DType::kBool, partner(type(x).shape, false));
        ValueId y = leaf(DType::kF32, partner(type(x).shape, false));
        add(coin() ? b.where(c, x, y) : b.where(c, y, x));
        return;
      }
      case OpKind::kCast:
        add(b.cast(pick(0, 4), *rc::gen::elementOf(all_dtypes())));
        return;
      case OpKind::kBitShiftLeft:
      case OpKind::kBitShiftRight: {  // unsigned integers only
        ValueId x = leaf(DType::kU32, Shape{pick_int(1, 4)});
        add(b.op1(op, {x, leaf(DType::kU32, partner(type(x).shape))}));
        return;
      }
      case OpKind::kReduceSum:
      case OpKind::kReduceMean:
      case OpKind::kReduceMax:
      case OpKind::kReduceProd: {
        ValueId x = pick(0, 4);
        int rank = type(x).shape.rank();
        Ints axes;
        for (int a = 0; a < rank; ++a) {
          if (coin()) axes.push_back(coin() ? a : a - rank);
        }
        Attrs attrs{{"keepdims", coin()}};
        if (!axes.empty() || coin()) attrs["axes"] = axes;
        add(b.op1(op, {x}, std::move(attrs)));
        return;
      }
      case OpKind::kArgMax:
      case OpKind::kArgMin: {
        ValueId x = pick(1, 4, true);  // an empty axis has no index
        add(b.op1(op, {x}, {{"axis", axis_of(type(x).shape.rank())}, {"keepdims", coin()},
                            {"select_last_index", coin()}}));
        return;
      }
      case OpKind::kSoftmax: {
        ValueId x = pick(1, 4);
        add(b.softmax(x, axis_of(type(x).shape.rank())));
        return;
      }
      case OpKind::kLayerNorm: {
        ValueId x = pick(1, 4);
        const Shape& s = type(x).shape;
        int axis = axis_of(s.rank());
        int a = axis < 0 ? axis + s.rank() : axis;
        Shape norm(std::vector<int64_t>(s.dims().begin() + a, s.dims().end()));
        ValueId scale = leaf(DType::kF32, norm);
        std::optional<ValueId> bias;
        if (coin()) bias = leaf(DType::kF32, norm);
        add(b.layer_norm(x, scale, bias, axis, std::abs(any_double())));
        return;
      }
      case OpKind::kMatmul: {
        ValueId x = pick(1, 4);
        const Shape& s = type(x).shape;
        int64_t k = s.dim(s.rank() - 1);
        Shape other;
        if (coin()) {
          other = Shape{k};
        } else {
          std::vector<int64_t> batch(s.dims().begin(), s.dims().end() - std::min(s.rank(), 2));
          std::vector<int64_t> dims = partner(Shape(batch)).dims();
          dims.push_back(k);
          dims.push_back(pick_int(1, 4));
          other = Shape(std::move(dims));
        }
        add(b.matmul(x, leaf(DType::kF32, other)));
        return;
      }
      case OpKind::kGemm: {
        ValueId a = pick(2, 2);
        bool ta = coin(), tb = coin();
        int64_t m = type(a).shape[ta ? 1 : 0], k = type(a).shape[ta ? 0 : 1], n = pick_int(1, 4);
        ValueId w = leaf(DType::kF32, tb ? Shape{n, k} : Shape{k, n});
        std::optional<ValueId> c;
        if (coin()) {
          Shape cs = partner(Shape{m, n});
          if (cs.rank() > 2) cs = Shape{n};
          c = leaf(DType::kF32, cs);
        }
        add(b.gemm(a, w, c, ta, tb, any_double(), any_double()));
        return;
      }
      case OpKind::kConv2d: {
        ValueId x = pick(4, 4, true);
        const Shape& s = type(x).shape;
        int64_t ch = s[1];
        int64_t groups = coin() ? 1 : ch;
        Conv2dOptions o;
        o.groups = groups;
        int64_t kh = pick_int(1, 3), kw = pick_int(1, 3);
        for (int i = 0; i < 4; ++i) o.pads[static_cast<size_t>(i)] = pick_int(0, 1);
        o.strides = {pick_int(1, 2), pick_int(1, 2)};
        o.dilations = {pick_int(1, 2), pick_int(1, 2)};
        // Shrink the window until it fits the padded input.
        auto fits = [&](int64_t in, int64_t p0, int64_t p1, int64_t k, int64_t d) {
          return in + p0 + p1 >= d * (k - 1) + 1;
        };
        while (!fits(s[2], o.pads[0], o.pads[2], kh, o.dilations[0])) {
          if (o.dilations[0] > 1)
            o.dilations[0] = 1;
          else
            --kh;
        }
        while (!fits(s[3], o.pads[1], o.pads[3], kw, o.dilations[1])) {
          if (o.dilations[1] > 1)
            o.dilations[1] = 1;
          else
            --kw;
        }
        int64_t out_ch = groups * pick_int(1, 2);
        ValueId w = leaf(DType::kF32, Shape{out_ch, ch / groups, kh, kw});
        std::optional<ValueId> bias;
        if (coin()) bias = leaf(DType::kF32, Shape{out_ch});
        add(b.conv2d(x, w, bias, o));
        return;
      }
      case OpKind::kMaxPool:
      case OpKind::kAvgPool: {
        ValueId x = pick(4, 4, true);
        const Shape& s = type(x).shape;
        PoolOptions o;
        o.kernel = {pick_int(1, static_cast<int>(std::min<int64_t>(3, s[2]))),
                    pick_int(1, static_cast<int>(std::min<int64_t>(3, s[3])))};
        for (size_t i = 0; i < 4; ++i)
          o.pads[i] = pick_int(0, static_cast<int>(o.kernel[i % 2]) - 1);
        o.strides = {pick_int(1, 2), pick_int(1, 2)};
        o.ceil_mode = coin();
        o.count_include_pad = coin();
        add(op == OpKind::kMaxPool ? b.max_pool(x, o) : b.avg_pool(x, o));
        return;
      }
      case OpKind::kGlobalAvgPool:
        add(b.global_avg_pool(pick(3, 5)));
        return;
      case OpKind::kBatchNorm: {
        ValueId x = pick(2, 4);
        Shape c{type(x).shape[1]};
        add(b.batch_norm(x, leaf(DType::kF32, c), leaf(DType::kF32, c), leaf(DType::kF32, c),
                         leaf(DType::kF32, c), std::abs(any_double())));
        return;
      }
      case OpKind::kConcat: {
        ValueId x = pick(1, 4);
        int axis = axis_of(type(x).shape.rank());
        std::vector<ValueId> parts = {x};
        for (int i = pick_int(0, 2); i > 0; --i) {
          std::vector<int64_t> dims = type(x).shape.dims();
          dims[static_cast<size_t>(axis < 0 ? axis + type(x).shape.rank() : axis)] = pick_int(1, 3);
          parts.push_back(coin() ? x : leaf(DType::kF32, Shape(std::move(dims))));
        }
        add(b.concat(parts, axis));
        return;
      }
      case OpKind::kSplit: {
        ValueId x = pick(1, 4);
        int axis = axis_of(type(x).shape.rank());
        int64_t left = type(x).shape[axis < 0 ? axis + type(x).shape.rank() : axis];
        // Random cut points; no loop on random draws (shrinking may repeat one value).
        Ints sizes;
        for (int i = pick_int(0, 2); i > 0; --i) {
          int64_t s = pick_int(0, static_cast<int>(left));
          sizes.push_back(s);
          left -= s;
        }
        sizes.push_back(left);
        for (ValueId v : b.split(x, axis, sizes)) add(v);
        return;
      }
      case OpKind::kSlice: {
        ValueId x = pick(1, 4);
        int rank = type(x).shape.rank();
        Ints starts, ends, axes, steps;
        for (int a = 0; a < rank; ++a) {
          if (!coin()) continue;
          starts.push_back(pick_int(-6, 6));
          ends.push_back(pick_int(-6, 6));
          axes.push_back(coin() ? a : a - rank);
          int64_t step = pick_int(1, 3);
          steps.push_back(coin() ? step : -step);
        }
        add(b.slice(x, starts, ends, axes, steps));
        return;
      }
      case OpKind::kTranspose: {
        ValueId x = pick(0, 4);
        Ints perm(static_cast<size_t>(type(x).shape.rank()));
        std::iota(perm.begin(), perm.end(), 0);
        perm = *rc::gen::just(perm);
        for (size_t i = perm.size(); i > 1; --i) {
          std::swap(perm[i - 1], perm[static_cast<size_t>(pick_int(0, static_cast<int>(i) - 1))]);
        }
        add(b.transpose(x, perm));
        return;
      }
      case OpKind::kPad: {
        ValueId x = pick(0, 4);
        Ints pads(static_cast<size_t>(2 * type(x).shape.rank()));
        for (int64_t& p : pads) p = pick_int(0, 2);
        add(b.pad(x, pads, any_double()));
        return;
      }
      case OpKind::kGather: {
        ValueId x = pick(1, 3);
        ValueId idx = leaf(coin() ? DType::kI32 : DType::kI64, random_shape(0, 2));
        add(b.gather(x, idx, axis_of(type(x).shape.rank())));
        return;
      }
      case OpKind::kGatherElements: {
        ValueId x = pick(1, 3);
        int axis = axis_of(type(x).shape.rank());
        Ints dims = type(x).shape.dims();  // no larger than x off the axis
        for (size_t i = 0; i < dims.size(); ++i) {
          dims[i] = static_cast<int>(i) == (axis + type(x).shape.rank()) % type(x).shape.rank() ? pick_int(0, 3)
                                                                                              : pick_int(0, static_cast<int>(dims[i]));
        }
        add(b.gather_elements(x, leaf(coin() ? DType::kI32 : DType::kI64, Shape(dims)), axis));
        return;
      }
      case OpKind::kGatherNd: {
        ValueId x = pick(1, 3);
        const int rank = type(x).shape.rank();
        const int batch = pick_int(0, rank - 1);
        Ints dims(type(x).shape.dims().begin(), type(x).shape.dims().begin() + batch);
        dims.push_back(pick_int(0, 2));
        dims.push_back(pick_int(1, rank - batch));
        add(b.gather_nd(x, leaf(coin() ? DType::kI32 : DType::kI64, Shape(dims)), batch));
        return;
      }
      case OpKind::kScatterNd: {
        ValueId x = pick(1, 3);
        const int rank = type(x).shape.rank();
        const int k = pick_int(1, rank);
        Ints idx = {pick_int(0, 3), k};
        Ints upd = {idx[0]};
        for (int d = k; d < rank; ++d) upd.push_back(type(x).shape[d]);
        const char* reductions[] = {"none", "add", "mul", "max", "min"};
        add(b.scatter_nd(x, leaf(DType::kI64, Shape(idx)), leaf(DType::kF32, Shape(upd)), reductions[pick_int(0, 4)]));
        return;
      }
      case OpKind::kTopK: {
        ValueId x = pick(1, 3);
        const int axis = axis_of(type(x).shape.rank());
        const int64_t extent = type(x).shape[axis < 0 ? axis + type(x).shape.rank() : axis];
        for (ValueId v : b.top_k(x, pick_int(0, static_cast<int>(extent)), axis, coin())) add(v);
        return;
      }
      case OpKind::kNonZero:
        for (ValueId v : b.op(op, {pick(0, 4)})) add(v);
        return;
      case OpKind::kUnique: {
        ValueId x = pick(1, 4);
        Attrs attrs{{"sorted", coin()}};
        if (coin()) attrs["axis"] = int64_t{axis_of(type(x).shape.rank())};
        for (ValueId v : b.op(op, {x}, std::move(attrs))) add(v);
        return;
      }
      case OpKind::kNonMaxSuppression: {
        const int64_t batches = pick_int(1, 2), boxes = pick_int(0, 3);
        std::vector<ValueId> in = {leaf(DType::kF32, Shape{batches, boxes, 4}),
                                   leaf(DType::kF32, Shape{batches, pick_int(1, 2), boxes}),
                                   leaf(DType::kI64, Shape{1}), leaf(DType::kF32, Shape{})};
        if (coin()) in.push_back(leaf(DType::kF32, Shape{1}));
        for (ValueId v : b.op(op, in, {{"center_point_box", coin()}})) add(v);
        return;
      }
      case OpKind::kReshape: {
        ValueId x = pick(0, 4);
        Ints target = type(x).shape.dims();
        std::reverse(target.begin(), target.end());
        if (!target.empty() && coin())
          target[static_cast<size_t>(pick_int(0, static_cast<int>(target.size()) - 1))] = -1;
        if (coin()) target = coin() ? Ints{-1} : Ints{1, -1};
        // A 0 in the target copies the input dim, so a zero-size input keeps its own dims.
        if (*type(x).shape.num_elements() == 0) target = type(x).shape.dims();
        add(b.reshape(x, target));
        return;
      }
      case OpKind::kFlatten: {
        ValueId x = pick(0, 4);
        int rank = type(x).shape.rank();
        add(b.flatten(x, pick_int(-rank, rank)));
        return;
      }
      case OpKind::kSqueeze: {
        ValueId x = pick(0, 4);
        Ints axes;
        for (int a = 0; a < type(x).shape.rank(); ++a) {
          if (type(x).shape[a] == 1 && coin()) axes.push_back(a);
        }
        add(b.squeeze(x, axes));
        return;
      }
      case OpKind::kUnsqueeze: {
        ValueId x = pick(0, 5);
        int n = pick_int(1, 2);
        int out_rank = type(x).shape.rank() + n;
        Ints axes;
        for (int k = 0; k < n; ++k) {  // distinct positions in the output
          int64_t a = pick_int(0, out_rank - 1);
          while (std::find(axes.begin(), axes.end(), a) != axes.end() ||
                 std::find(axes.begin(), axes.end(), a - out_rank) != axes.end()) {
            a = (a + 1) % out_rank;
          }
          axes.push_back(coin() ? a : a - out_rank);
        }
        add(b.unsqueeze(x, axes));
        return;
      }
      case OpKind::kReadHandle: {
        std::string h = fresh("h");
        b.handle(h, DType::kF32, random_shape(0, 3));
        add(b.read_handle(h));
        return;
      }
      case OpKind::kWriteHandle: {
        ValueId x = pick(0, 4);
        std::string h = fresh("h");
        b.handle(h, DType::kF32, type(x).shape);
        b.write_handle(h, x);
        return;
      }
      case OpKind::kWriteHandleAt: {
        ValueId x = pick(1, 4);
        int axis = axis_of(type(x).shape.rank());
        std::vector<int64_t> dims = type(x).shape.dims();
        dims[static_cast<size_t>(axis < 0 ? axis + type(x).shape.rank() : axis)] += pick_int(0, 3);
        std::string h = fresh("h");
        b.handle(h, DType::kF32, Shape(std::move(dims)));
        b.write_handle_at(h, x, leaf(DType::kI64, Shape{}), axis);
        return;
      }
      default:
        break;
    }
    if (is_unary_elementwise(op) || op == OpKind::kIdentity) {
      add(b.op1(op, {pick(0, 4)}));
      return;
    }
    if (is_binary_elementwise(op)) {
      ValueId x = pick(0, 4);
      ValueId y = coin() ? x : leaf(DType::kF32, partner(type(x).shape));
      add(coin() ? b.op1(op, {x, y}) : b.op1(op, {y, x}));
      return;
    }
    RC_FAIL(fmt::format("generator has no case for {}", op_name(op)));
  }

  void rename_some() {
    for (ValueId v : pool_) {
      if (!pick_int(0, 7)) b.rename(v, fmt::format("{}#{}", any_name(), v));
    }
  }

  void pick_outputs() {
    std::vector<ValueId> outs;
    for (ValueId v : pool_) {
      if (coin() && b.graph().has_value(v)) outs.push_back(v);
    }
    if (outs.empty()) outs.push_back(pool_.back());
    for (ValueId v : outs) b.output(v);
  }
};

}  // namespace

TEST_CASE("ir/text/property random graphs verify and round trip") {
  CHECK(rc::check("parse(print(g)) == g for random graphs", [] {
    RandomGraph rg;
    rg.run();
    Result<Graph> built = rg.b.build();
    if (!built.ok()) RC_FAIL("build failed: " + built.status().to_string());
    const Graph& g = *built;
    RC_ASSERT(verify(g).ok());
    std::string text = print(g);
    Result<Graph> back = parse(text);
    if (!back.ok()) RC_FAIL(back.status().to_string() + "\n" + text);
    RC_ASSERT(*back == g);
    RC_ASSERT(print(*back) == text);

    // Builder graphs are topological in id order, so execution order is insertion order.
    Result<std::vector<NodeId>> order = execution_order(g);
    RC_ASSERT(order.ok());
    std::vector<NodeId> ids(g.nodes.size());
    std::iota(ids.begin(), ids.end(), 0);
    RC_ASSERT(*order == ids);
    Result<std::vector<Lifetime>> life = lifetimes(g, *order);
    RC_ASSERT(life.ok());
    for (ValueId v = 0; v < g.num_values(); ++v) {
      const Lifetime& l = (*life)[static_cast<size_t>(v)];
      RC_ASSERT(l.first <= l.last);
      RC_ASSERT((l.first == kBeforeFirstStep) == (g.value(v).kind != ValueKind::kIntermediate));
      if (g.is_output(v)) RC_ASSERT(l.last == static_cast<int64_t>(g.nodes.size()) - 1);
    }
  }));
}

TEST_CASE("ir/text/property printed floats and strings read back exactly") {
  CHECK(rc::check("float and string attributes survive print and parse", [] {
    Graph g;
    g.name = any_name();
    g.values.push_back(Value{0, any_name(), TensorType{DType::kF32, Shape{1}}, ValueKind::kConstant,
                             kNoNode, std::nullopt});
    g.values.push_back(Value{1, any_name() + "!", TensorType{DType::kF32, Shape{1}},
                             ValueKind::kIntermediate, 0, std::nullopt});
    std::vector<double> floats;
    for (int i = pick_int(0, 4); i > 0; --i) floats.push_back(any_double());
    g.nodes.push_back(Node{0,
                           any_name(),
                           OpKind::kIdentity,
                           {0},
                           {1},
                           Attrs{{"f", any_double()},
                                 {"fs", floats},
                                 {"s", any_name()},
                                 {"i", *rc::gen::arbitrary<int64_t>()}}});
    g.outputs = {1};
    Result<Graph> back = parse(print(g));
    if (!back.ok()) RC_FAIL(back.status().to_string() + "\n" + print(g));
    RC_ASSERT(*back == g);
  }));
}

TEST_CASE("ir/text/property mutated text parses or fails cleanly") {
  CHECK(rc::check("parse never crashes and only fails with kParseError", [] {
    RandomGraph rg;
    rg.run();
    Result<Graph> built = rg.b.build();
    RC_PRE(built.ok());
    std::string text = print(*built);
    for (int i = pick_int(1, 4); i > 0; --i) {
      size_t at = static_cast<size_t>(pick_int(0, static_cast<int>(text.size()) - 1));
      switch (pick_int(0, 2)) {
        case 0:
          text.erase(at, static_cast<size_t>(pick_int(1, 8)));
          break;
        case 1:
          text.insert(at, 1,
                      *rc::gen::element('(', ')', '{', '}', '[', ']', ',', '"', '\\', '=', '-', '>',
                                        ':', '#', '\n', 'x', '9', '.'));
          break;
        default:
          text[at] = static_cast<char>(*rc::gen::arbitrary<uint8_t>());
          break;
      }
    }
    Result<Graph> g = parse(text);
    if (!g.ok()) {
      RC_ASSERT(g.status().code() == ErrorCode::kParseError);
      return;
    }
    // Whatever parsed must print, and the verifier must not crash on it.
    (void)verify(*g);
    (void)print(*g);
    (void)execution_order(*g);
  }));
}

TEST_CASE("ir/verify/property mutated graphs never crash the verifier") {
  CHECK(rc::check("verify, print and order survive random corruption", [] {
    RandomGraph rg;
    rg.run();
    Result<Graph> built = rg.b.build();
    RC_PRE(built.ok());
    Graph g = std::move(built).value();
    RC_PRE(!g.nodes.empty());
    auto any_id = [&](int32_t n) { return pick_int(-2, n + 1); };
    for (int i = pick_int(1, 3); i > 0; --i) {
      Node& node = g.node(pick_int(0, g.num_nodes() - 1));
      switch (pick_int(0, 6)) {
        case 0:
          if (!node.inputs.empty()) node.inputs[0] = any_id(g.num_values());
          break;
        case 1:
          if (!node.outputs.empty()) node.outputs[0] = any_id(g.num_values());
          break;
        case 2:
          node.op = static_cast<OpKind>(pick_int(0, kNumOps + 2));
          break;
        case 3:
          node.attrs.clear();
          break;
        case 4:
          g.value(pick_int(0, g.num_values() - 1)).type.shape = Shape{pick_int(-1, 3)};
          break;
        case 5:
          g.outputs.push_back(any_id(g.num_values()));
          break;
        default:
          node.inputs.push_back(any_id(g.num_values()));
          break;
      }
    }
    Status s = verify(g);
    (void)print(g);
    Result<std::vector<NodeId>> order = execution_order(g);
    if (s.ok()) {
      RC_ASSERT(order.ok());
      RC_ASSERT(lifetimes(g, *order).ok());
    }
  }));
}
