// TfIdfVectorizer over integer tokens, composed from carve ops. The pool is an attribute,
// so each n-gram length and skip distance becomes a broadcast comparison of shifted slices
// of X against the pool's n-grams of that length, counted by a sum over start positions;
// a gather then puts each pool n-gram's count at its output index.
#include <onnx/onnx_pb.h>

#include <algorithm>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

// The pool's n-grams of one length: values[k][j] is token k of n-gram j, which is pool
// entry first_entry + j (its output index is ngram_indexes[first_entry + j]).
struct PoolLevel {
  int64_t length = 0;
  int64_t first_entry = 0;
  std::vector<std::vector<int64_t>> values;
};

// Splits pool_int64s into levels by ngram_counts (the pool offset of each length's
// n-grams, lengths 1, 2, ...), checking the attributes agree with each other.
Result<std::vector<PoolLevel>> pool_levels(const NodeContext& n, const std::vector<int64_t>& pool,
                                           const std::vector<int64_t>& counts, size_t num_indexes) {
  std::vector<PoolLevel> levels;
  int64_t entries = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t begin = counts[i];
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
    const auto length = static_cast<int64_t>(i + 1);
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % length != 0)
      return n.invalid(fmt::format("ngram_counts {} does not split the {} pool values into whole {}-grams",
                                   fmt::join(counts, ","), pool.size(), length));
    PoolLevel level{length, entries, std::vector<std::vector<int64_t>>(static_cast<size_t>(length))};
    for (int64_t at = begin; at < end; at += length)
      for (int64_t k = 0; k < length; ++k) level.values[static_cast<size_t>(k)].push_back(pool[static_cast<size_t>(at + k)]);
    entries += (end - begin) / length;
    levels.push_back(std::move(level));
  }
  if (static_cast<size_t>(entries) != num_indexes)
    return n.invalid(fmt::format("{} ngram_indexes for {} n-grams in the pool", num_indexes, entries));
  return levels;
}

// Counts [batch, level n-grams] of the level's n-grams in x [batch, length] at token
// distance `distance` (skip + 1); nullopt when no such n-gram fits in a row.
Result<std::optional<Tensor>> count_level(NodeContext& n, const Tensor& x, const PoolLevel& level, int64_t distance) {
  const int64_t row = x.type.shape[1];
  const int64_t starts = row - (level.length - 1) * distance;
  if (starts <= 0) return std::optional<Tensor>();
  const auto entries = static_cast<int64_t>(level.values[0].size());
  std::optional<Tensor> match;  // [batch, starts, entries], 1 where all tokens so far match
  for (int64_t k = 0; k < level.length; ++k) {
    CARVE_ASSIGN_OR_RETURN(Tensor tokens, n.op(OpKind::kSlice, {x}, {{"starts", std::vector<int64_t>{k * distance}},
                                                                      {"ends", std::vector<int64_t>{k * distance + starts}},
                                                                      {"axes", std::vector<int64_t>{1}}}));
    CARVE_ASSIGN_OR_RETURN(tokens, n.op(OpKind::kUnsqueeze, {tokens}, {{"axes", std::vector<int64_t>{2}}}));
    Tensor wanted = n.constant_ints(ir::DType::kI64, ir::Shape{entries}, level.values[static_cast<size_t>(k)]);
    CARVE_ASSIGN_OR_RETURN(Tensor equal, n.op(OpKind::kEqual, {tokens, wanted}));
    CARVE_ASSIGN_OR_RETURN(Tensor hit, n.op(OpKind::kCast, {equal}, {{"to", ir::dtype_name(ir::DType::kF32)}}));
    if (match) {
      CARVE_ASSIGN_OR_RETURN(hit, n.op(OpKind::kMul, {*match, hit}));
    }
    match = hit;
  }
  CARVE_ASSIGN_OR_RETURN(Tensor counts, n.op(OpKind::kReduceSum, {*match}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}));
  return std::optional<Tensor>(counts);
}

// Y [batch, outputs] (or [outputs] for 1-D X): per row, how often each pool n-gram of
// length min_gram_length..max_gram_length occurs, its tokens max_skip_count + 1 or fewer
// apart (unigrams counted once), at the n-gram's output index; then weighted by mode.
// weights are indexed by output position, as in ONNX's reference and ONNX Runtime.
Status lower_tfidf_vectorizer(NodeContext& n) {
  if (n.has_attr("pool_strings")) return n.unsupported("string type not supported (pool_strings)");
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  if (x.type.dtype != ir::DType::kI32 && x.type.dtype != ir::DType::kI64)
    return n.unsupported(fmt::format("{} input (int32 and int64 tokens are supported; string type not supported)",
                                     ir::dtype_name(x.type.dtype)));
  const int64_t rank = x.type.shape.rank();
  if (rank != 1 && rank != 2) return n.invalid(fmt::format("input of rank {} (needs 1 or 2)", rank));
  CARVE_ASSIGN_OR_RETURN(std::string mode, n.attr_string("mode"));
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") return n.invalid(fmt::format("mode '{}' (TF, IDF or TFIDF)", mode));
  CARVE_ASSIGN_OR_RETURN(int64_t min_length, n.attr_int("min_gram_length"));
  CARVE_ASSIGN_OR_RETURN(int64_t max_length, n.attr_int("max_gram_length"));
  CARVE_ASSIGN_OR_RETURN(int64_t max_skip, n.attr_int("max_skip_count"));
  if (min_length < 1 || max_length < min_length || max_skip < 0)
    return n.invalid(fmt::format("min_gram_length {}, max_gram_length {}, max_skip_count {} (needs 1 <= min <= max, "
                                 "skip >= 0)", min_length, max_length, max_skip));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> pool, n.attr_ints("pool_int64s"));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> ngram_counts, n.attr_ints("ngram_counts"));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> ngram_indexes, n.attr_ints("ngram_indexes"));
  CARVE_ASSIGN_OR_RETURN(std::vector<PoolLevel> levels, pool_levels(n, pool, ngram_counts, ngram_indexes.size()));
  if (ngram_indexes.empty()) return n.invalid("ngram_indexes is empty");
  const int64_t max_index = *std::max_element(ngram_indexes.begin(), ngram_indexes.end());
  if (*std::min_element(ngram_indexes.begin(), ngram_indexes.end()) < 0)
    return n.invalid("ngram_indexes has a negative index");
  if (max_index >= (int64_t{1} << 40)) return n.invalid(fmt::format("ngram_indexes up to {} (too many outputs)", max_index));
  const int64_t outputs = max_index + 1;
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{ir::DType::kI64, ir::Shape{outputs}}));
  std::vector<int64_t> sorted_indexes = ngram_indexes;
  std::sort(sorted_indexes.begin(), sorted_indexes.end());
  if (std::adjacent_find(sorted_indexes.begin(), sorted_indexes.end()) != sorted_indexes.end())
    return n.invalid("ngram_indexes names an output index twice");
  std::vector<double> weights;
  if (n.has_attr("weights")) {
    CARVE_ASSIGN_OR_RETURN(weights, n.attr_floats("weights"));
    if (static_cast<int64_t>(weights.size()) != outputs)
      return n.invalid(fmt::format("{} weights for {} outputs", weights.size(), outputs));
  }

  // Tokens as [batch, length] int64, so pool values past int32 compare exactly.
  if (rank == 1) {
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kUnsqueeze, {x}, {{"axes", std::vector<int64_t>{0}}}));
  }
  if (x.type.dtype != ir::DType::kI64) {
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kCast, {x}, {{"to", ir::dtype_name(ir::DType::kI64)}}));
  }
  const int64_t batch = x.type.shape[0];
  if (x.type.shape[1] >= (int64_t{1} << 24))  // counts are summed in f32, exact below 2^24
    return n.unsupported(fmt::format("rows of {} tokens (at most 2^24 - 1)", x.type.shape[1]));

  // Per level, counts [batch, level entries] summed over the distances; their columns side
  // by side, then a zero column for the outputs no counted n-gram maps to.
  std::vector<Tensor> columns;
  std::vector<int64_t> column_of_output(static_cast<size_t>(outputs), -1);
  int64_t next_column = 0;
  for (const PoolLevel& level : levels) {
    if (level.length < min_length || level.length > max_length || level.values[0].empty()) continue;
    std::optional<Tensor> level_counts;
    // Clamped to the row length, past which no n-gram fits: skip + 1 cannot overflow.
    const int64_t distances = level.length == 1 ? 1 : std::min(max_skip, x.type.shape[1]) + 1;
    for (int64_t distance = 1; distance <= distances; ++distance) {
      CARVE_ASSIGN_OR_RETURN(std::optional<Tensor> counts, count_level(n, x, level, distance));
      if (!counts) break;  // longer distances fit even less
      if (level_counts) {
        CARVE_ASSIGN_OR_RETURN(counts, n.op(OpKind::kAdd, {*level_counts, *counts}));
      }
      level_counts = counts;
    }
    if (!level_counts) continue;
    columns.push_back(*level_counts);
    const auto entries = static_cast<int64_t>(level.values[0].size());
    for (int64_t j = 0; j < entries; ++j)
      column_of_output[static_cast<size_t>(ngram_indexes[static_cast<size_t>(level.first_entry + j)])] = next_column + j;
    next_column += entries;
  }
  columns.push_back(n.constant_doubles(ir::DType::kF32, ir::Shape{batch, 1}, std::vector<double>(static_cast<size_t>(batch), 0.0)));
  for (int64_t& c : column_of_output)
    if (c < 0) c = next_column;
  std::optional<Tensor> y = columns[0];
  if (columns.size() > 1) {
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kConcat, columns, {{"axis", int64_t{1}}}));
  }
  CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kGather, {*y, n.constant_ints(ir::DType::kI64, ir::Shape{outputs}, column_of_output)},
                                 {{"axis", int64_t{1}}}));

  if (mode == "IDF") {
    CARVE_ASSIGN_OR_RETURN(Tensor seen, n.op(OpKind::kGreater, {*y, n.constant_doubles(ir::DType::kF32, {}, {0.0})}));
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kCast, {seen}, {{"to", ir::dtype_name(ir::DType::kF32)}}));
  }
  if (mode != "TF" && !weights.empty()) {
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kMul, {*y, n.constant_doubles(ir::DType::kF32, ir::Shape{outputs}, weights)}));
  }
  if (rank == 1) {
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kReshape, {*y}, {{"shape", std::vector<int64_t>{outputs}}}));
  }
  return n.set_output(0, *y);
}

}  // namespace

void register_text_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["TfIdfVectorizer"] = {lower_tfidf_vectorizer,
                          {"mode", "min_gram_length", "max_gram_length", "max_skip_count", "ngram_counts",
                           "ngram_indexes", "pool_int64s", "pool_strings", "weights"}};
}

}  // namespace carve::onnx::detail
