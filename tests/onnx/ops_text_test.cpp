// TfIdfVectorizer (ops_text.cpp): counts of pool n-grams with skips, the modes and their
// weights, the output routing by ngram_indexes, and the attribute checks.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <limits>
#include <string>
#include <vector>

#include "carve/reference/reference.h"
#include "one_node_model.h"

using carve::ErrorCode;
using carve::reference::HostTensor;
using carve::onnx_test::check_close;
using carve::onnx_test::check_fails;
using carve::onnx_test::kF32;
using carve::onnx_test::kI32;
using carve::onnx_test::Model;

namespace {

const std::vector<int32_t> kTokens{1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};

// Pool: unigrams 2 3 5 4 (entries 0-3), bigrams (5,6) (7,8) (6,7) (entries 4-6).
Model tfidf(const std::string& mode, int64_t min_length, int64_t max_length, int64_t skip,
            const std::vector<int64_t>& indexes = {0, 1, 2, 3, 4, 5, 6}, int64_t row = 12) {
  Model m(9);
  m.input("x", kI32, {row}).node("TfIdfVectorizer", {"x"});
  m.s("mode", mode).i("min_gram_length", min_length).i("max_gram_length", max_length).i("max_skip_count", skip);
  m.ints("ngram_counts", {0, 4}).ints("ngram_indexes", indexes).ints("pool_int64s", {2, 3, 5, 4, 5, 6, 7, 8, 6, 7});
  return m;
}

HostTensor tokens() { return HostTensor::from<int32_t>(carve::ir::Shape{12}, kTokens); }

void set_weights(Model& m, const std::vector<float>& weights) {
  auto* a = m.attr("weights", ::onnx::AttributeProto::FLOATS);
  for (float w : weights) a->add_floats(w);
}

}  // namespace

TEST_CASE("onnx/ops/tfidf_vectorizer") {
  SUBCASE("skip counts") {
    // Bigrams only. Skip 0: adjacent pairs (5,6) (7,8) (6,7) once each.
    check_close(tfidf("TF", 2, 2, 0), {tokens()}, {0, 0, 0, 0, 1, 1, 1}, 0, 0);
    // Skip 2 (distances 1-3): (7,8) also at positions 8-11 (distance 3).
    check_close(tfidf("TF", 2, 2, 2), {tokens()}, {0, 0, 0, 0, 1, 2, 1}, 0, 0);
    // Skip 5 (distances 1-6): (7,8) also at 5-11 (distance 6).
    check_close(tfidf("TF", 2, 2, 5), {tokens()}, {0, 0, 0, 0, 1, 3, 1}, 0, 0);
    // Skips past the row add nothing (and skip + 1 must not overflow).
    check_close(tfidf("TF", 2, 2, std::numeric_limits<int64_t>::max()), {tokens()}, {0, 0, 0, 0, 1, 3, 1}, 0, 0);
    // Unigrams count once, whatever the skip.
    check_close(tfidf("TF", 1, 2, 5), {tokens()}, {0, 3, 1, 0, 1, 3, 1}, 0, 0);
    check_close(tfidf("TF", 1, 1, 5), {tokens()}, {0, 3, 1, 0, 0, 0, 0}, 0, 0);
  }
  SUBCASE("batch rows are counted apart") {
    Model m = tfidf("TF", 2, 2, 5);
    m.g().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(2);
    m.g().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(6);
    check_close(m, {HostTensor::from<int32_t>(carve::ir::Shape{2, 6}, kTokens)},
                {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, 0, 0);
  }
  SUBCASE("rows shorter than an n-gram") {
    // Two tokens: no bigram at distance 2 or more fits; (3,7) is not in the pool.
    check_close(tfidf("TF", 1, 2, 3, {0, 1, 2, 3, 4, 5, 6}, 2), {HostTensor::from<int32_t>(carve::ir::Shape{2}, {3, 7})},
                {0, 1, 0, 0, 0, 0, 0}, 0, 0);
  }
  SUBCASE("ngram_indexes route the counts") {
    // Entry e goes to output indexes[e]; output 7 has no entry and stays 0.
    check_close(tfidf("TF", 1, 2, 5, {6, 5, 4, 3, 2, 1, 7}), {tokens()}, {0, 3, 1, 0, 1, 3, 0, 1}, 0, 0);
  }
  SUBCASE("IDF and TFIDF weights") {
    Model idf = tfidf("IDF", 1, 2, 5);
    check_close(idf, {tokens()}, {0, 1, 1, 0, 1, 1, 1}, 0, 0);
    set_weights(idf, {1, 2, 3, 4, 5, 6, 7});
    check_close(idf, {tokens()}, {0, 2, 3, 0, 5, 6, 7}, 0, 0);
    Model both = tfidf("TFIDF", 1, 2, 5);
    set_weights(both, {1, 2, 3, 4, 5, 6, 7});
    check_close(both, {tokens()}, {0, 6, 3, 0, 5, 18, 7}, 0, 0);
  }
  SUBCASE("int64 pool values do not wrap onto int32 tokens") {
    Model m(9);
    m.input("x", kI32, {3}).node("TfIdfVectorizer", {"x"});
    m.s("mode", "TF").i("min_gram_length", 1).i("max_gram_length", 1).i("max_skip_count", 0);
    m.ints("ngram_counts", {0}).ints("ngram_indexes", {0, 1}).ints("pool_int64s", {(int64_t{1} << 32) + 5, 5});
    check_close(m, {HostTensor::from<int32_t>(carve::ir::Shape{3}, {5, 1, 5})}, {0, 2}, 0, 0);
  }
  SUBCASE("bad attributes and inputs") {
    check_fails(tfidf("BM25", 1, 2, 0), ErrorCode::kInvalidArgument, "mode 'BM25'");
    check_fails(tfidf("TF", 2, 1, 0), ErrorCode::kInvalidArgument, "min_gram_length");
    check_fails(tfidf("TF", 1, 2, -1), ErrorCode::kInvalidArgument, "max_skip_count");
    check_fails(tfidf("TF", 1, 2, 0, {0, 1, 2, 3, 4, 5}), ErrorCode::kInvalidArgument, "6 ngram_indexes for 7");
    check_fails(tfidf("TF", 1, 2, 0, {0, 1, 2, 3, 4, 5, 5}), ErrorCode::kInvalidArgument, "twice");
    check_fails(tfidf("TF", 1, 2, 0, {0, 1, 2, 3, 4, 5, -1}), ErrorCode::kInvalidArgument, "negative");
    check_fails(tfidf("TF", 1, 2, 0, {0, 1, 2, 3, 4, 5, std::numeric_limits<int64_t>::max()}),
                ErrorCode::kInvalidArgument, "too many outputs");
    Model odd = tfidf("TF", 1, 2, 0);
    odd.op->mutable_attribute(4)->set_ints(1, 5);  // ngram_counts {0, 5}: 5 values left for bigrams
    check_fails(odd, ErrorCode::kInvalidArgument, "whole 2-grams");
    Model weights = tfidf("TFIDF", 1, 2, 0);
    set_weights(weights, {1, 2});
    check_fails(weights, ErrorCode::kInvalidArgument, "2 weights for 7 outputs");
    Model strings = tfidf("TF", 1, 2, 0);
    strings.attr("pool_strings", ::onnx::AttributeProto::STRINGS)->add_strings("a");
    check_fails(strings, ErrorCode::kUnsupported, "string type not supported");
    Model floats(9);
    floats.input("x", kF32, {4}).node("TfIdfVectorizer", {"x"});
    floats.s("mode", "TF").i("min_gram_length", 1).i("max_gram_length", 1).i("max_skip_count", 0);
    floats.ints("ngram_counts", {0}).ints("ngram_indexes", {0}).ints("pool_int64s", {1});
    check_fails(floats, ErrorCode::kUnsupported, "f32 input");
  }
}
