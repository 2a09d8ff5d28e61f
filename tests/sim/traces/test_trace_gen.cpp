// `kvsim gen`'s generator: determinism, distribution sanity, shared prefixes, and the
// write -> read round trip (plain and gzip).
#include <gtest/gtest.h>

#include <fmt/core.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include <unistd.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_gen.h"
#include "kvsim/sim/traces/trace_writer.h"

namespace kvsim {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kvsim_test_trace_gen_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

double mean(const std::vector<TraceRequest>& reqs, bool input) {
  double s = 0;
  for (const auto& r : reqs) s += input ? r.input_tokens : r.output_tokens;
  return s / static_cast<double>(reqs.size());
}

TEST(TraceGen, ParsesLengthSpecs) {
  EXPECT_EQ(parse_length_dist("fixed:512").kind, LengthDist::Kind::FIXED);
  const LengthDist u = parse_length_dist("uniform:10,20");
  EXPECT_EQ(u.kind, LengthDist::Kind::UNIFORM);
  EXPECT_EQ(u.a, 10);
  EXPECT_EQ(u.b, 20);
  EXPECT_EQ(parse_length_dist("lognormal:6.5,0.8").kind, LengthDist::Kind::LOGNORMAL);
  EXPECT_EQ(parse_length_dist("empirical:/x/y.csv").path, "/x/y.csv");
  for (const char* bad :
       {"fixed", "fixed:0", "fixed:1.5", "uniform:5", "uniform:20,10", "normal:1,-1", "zipf:0,100",
        "zipf:1.1,0", "poisson:3", "fixed:abc", "empirical:"}) {
    EXPECT_THROW(parse_length_dist(bad), std::invalid_argument) << bad;
  }
  EXPECT_THROW(parse_gen_arrival("sometimes"), std::invalid_argument);
}

TEST(TraceGen, SameSeedSameBytesDifferentSeedDifferentBytes) {
  TraceGenOptions o;
  o.num_requests = 2000;
  o.seed = 42;
  o.arrival = GenArrival::GAMMA;
  o.rate = 10;
  o.cv = 3;
  o.input = parse_length_dist("lognormal:6.5,0.8");
  o.output = parse_length_dist("zipf:1.2,2000");
  o.prefix_groups = 4;
  o.prefix_tokens = 100;
  o.priority_levels = 3;
  const std::string a = temp_path("a.jsonl");
  const std::string b = temp_path("b.jsonl");
  const std::string c = temp_path("c.jsonl");
  write_kvsim_jsonl(a, generate_trace(o));
  write_kvsim_jsonl(b, generate_trace(o));
  o.seed = 43;
  write_kvsim_jsonl(c, generate_trace(o));
  const std::string ta = read_text_file(a);
  EXPECT_GT(ta.size(), 100'000u);
  EXPECT_EQ(ta, read_text_file(b));
  EXPECT_NE(ta, read_text_file(c));
  // gzip output is reproducible too (zlib writes mtime 0 and no name).
  const std::string ga = temp_path("a.jsonl.gz");
  const std::string gb = temp_path("b.jsonl.gz");
  o.seed = 42;
  write_kvsim_jsonl(ga, generate_trace(o));
  write_kvsim_jsonl(gb, generate_trace(o));
  FILE* fa = std::fopen(ga.c_str(), "rb");
  ASSERT_NE(fa, nullptr);
  std::string raw_a(1 << 20, '\0');
  raw_a.resize(std::fread(raw_a.data(), 1, raw_a.size(), fa));
  std::fclose(fa);
  bool gz = false;
  EXPECT_EQ(read_text_file(ga, {}, &gz), ta);
  EXPECT_TRUE(gz);
  EXPECT_LT(raw_a.size(), ta.size() / 2);
  FILE* fb = std::fopen(gb.c_str(), "rb");
  std::string raw_b(1 << 20, '\0');
  raw_b.resize(std::fread(raw_b.data(), 1, raw_b.size(), fb));
  std::fclose(fb);
  EXPECT_EQ(raw_a, raw_b);
  for (const auto& p : {a, b, c, ga, gb}) std::remove(p.c_str());
}

TEST(TraceGen, ChangingOutputLengthsLeavesArrivalsAlone) {
  TraceGenOptions o;
  o.num_requests = 100;
  o.rate = 3;
  const auto x = generate_trace(o);
  o.output = parse_length_dist("uniform:1,9");
  const auto y = generate_trace(o);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i].arrival_ns, y[i].arrival_ns);
}

TEST(TraceGen, ArrivalProcesses) {
  TraceGenOptions o;
  o.num_requests = 20'001;
  o.rate = 5;
  o.seed = 1;
  // Poisson: mean gap 0.2 s (standard error 0.2/sqrt(20000) = 1.4 ms).
  auto r = generate_trace(o);
  EXPECT_EQ(r[0].arrival_ns, 0);
  EXPECT_NEAR(static_cast<double>(r.back().arrival_ns) / 1e9 / 20'000, 0.2, 0.006);
  // Gamma with cv 3: same mean gap, gaps' cv near 3.
  o.arrival = GenArrival::GAMMA;
  o.cv = 3;
  r = generate_trace(o);
  double s = 0, s2 = 0;
  for (size_t i = 1; i < r.size(); ++i) {
    const double g = static_cast<double>(r[i].arrival_ns - r[i - 1].arrival_ns) / 1e9;
    s += g;
    s2 += g * g;
  }
  const double m = s / 20'000;
  EXPECT_NEAR(m, 0.2, 0.02);
  EXPECT_NEAR(std::sqrt(s2 / 20'000 - m * m) / m, 3.0, 0.3);
  // Constant: exact gaps.
  o.arrival = GenArrival::CONSTANT;
  o.num_requests = 4;
  o.rate = 3;
  r = generate_trace(o);
  EXPECT_EQ(r[1].arrival_ns, 333'333'333);
  EXPECT_EQ(r[3].arrival_ns, 1'000'000'000);
  // Burst: 3 at once every 2.5 s.
  o.arrival = GenArrival::BURST;
  o.num_requests = 7;
  o.burst_size = 3;
  o.burst_period_s = 2.5;
  r = generate_trace(o);
  const std::vector<int64_t> want = {
      0, 0, 0, 2'500'000'000, 2'500'000'000, 2'500'000'000, 5'000'000'000};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r[i].arrival_ns, want[i]) << i;
}

TEST(TraceGen, LengthDistributionMeans) {
  TraceGenOptions o;
  o.num_requests = 50'000;
  o.arrival = GenArrival::ALL_AT_ONCE;
  o.input = parse_length_dist("uniform:100,300");
  o.output = parse_length_dist("normal:200,50");
  auto r = generate_trace(o);
  EXPECT_NEAR(mean(r, true), 200, 1.5);
  EXPECT_NEAR(mean(r, false), 200, 1.0);
  for (const auto& x : r) {
    ASSERT_GE(x.input_tokens, 100);
    ASSERT_LE(x.input_tokens, 300);
  }
  // Lognormal: mean exp(mu + sigma^2/2) = exp(6 + 0.125) = 457.1.
  o.input = parse_length_dist("lognormal:6,0.5");
  // Normal clipped at 1, counted: nearbyint(20 + 10 z) < 1 iff z < -1.95, P = 0.0256.
  o.output = parse_length_dist("normal:20,10");
  GenClipped clipped;
  r = generate_trace(o, &clipped);
  EXPECT_NEAR(mean(r, true), 457.1, 5);
  EXPECT_EQ(clipped.input, 0);
  int64_t below = 0;
  for (const auto& x : r) ASSERT_GE(x.output_tokens, 1);
  for (const auto& x : r) below += x.output_tokens == 1 ? 1 : 0;
  EXPECT_NEAR(static_cast<double>(clipped.output) / 50'000, 0.0256, 0.003);
  EXPECT_LE(clipped.output, below);  // a draw of exactly 1 is not clipped
  // Zipf(s=2, max 1000): P(1) = 1 / H(1000, 2) = 0.6087.
  o.input = parse_length_dist("zipf:2,1000");
  r = generate_trace(o);
  size_t k1 = 0;
  for (const auto& x : r) k1 += x.input_tokens == 1;
  EXPECT_NEAR(static_cast<double>(k1) / r.size(), 0.6087, 0.01);
}

TEST(TraceGen, EmpiricalResamplesWholeRowsFromATrace) {
  const std::string conv = KVSIM_SOURCE_DIR "/traces/AzureLLMInferenceTrace_conv.csv";
  const Trace t = read_trace(conv);
  std::set<std::pair<int32_t, int32_t>> rows;
  for (const auto& r : t.requests) rows.insert({r.input_tokens, r.output_tokens});
  TraceGenOptions o;
  o.num_requests = 20'000;
  o.input = parse_length_dist("empirical:" + conv);
  o.output = o.input;
  const auto g = generate_trace(o);
  for (const auto& r : g) ASSERT_TRUE(rows.count({r.input_tokens, r.output_tokens}));
  EXPECT_NEAR(mean(g, true), 1154.7, 25);  // input sd ~ 1100 -> se ~ 8
  EXPECT_NEAR(mean(g, false), 211.1, 5);
}

TEST(TraceGen, SharedPrefixGroupsAsHashIds) {
  TraceGenOptions o;
  o.num_requests = 400;
  o.prefix_groups = 3;
  o.prefix_tokens = 100;  // 6 full 16-token blocks shared, the 7th mixes prefix and request
  o.hash_block_size = 16;
  o.input = parse_length_dist("uniform:1,200");
  const auto r = generate_trace(o);
  std::set<uint64_t> first_ids;
  std::set<uint64_t> tail_ids;
  for (const auto& x : r) {
    ASSERT_TRUE(x.hash_ids);
    ASSERT_GE(x.input_tokens, 101);
    ASSERT_EQ(static_cast<int64_t>(x.hash_ids->size()), (x.input_tokens + 15) / 16);
    const uint64_t g = (*x.hash_ids)[0] / 6;
    for (size_t k = 0; k < 6; ++k) ASSERT_EQ((*x.hash_ids)[k], g * 6 + k);
    first_ids.insert((*x.hash_ids)[0]);
    for (size_t k = 6; k < x.hash_ids->size(); ++k) {
      ASSERT_TRUE(tail_ids.insert((*x.hash_ids)[k]).second) << "request blocks must be unique";
    }
  }
  EXPECT_EQ(first_ids, (std::set<uint64_t>{0, 6, 12}));
}

TEST(TraceGen, SharedPrefixGroupsAsTokenIds) {
  TraceGenOptions o;
  o.num_requests = 50;
  o.prefix_groups = 2;
  o.prefix_tokens = 40;
  o.prefix_encoding = PrefixEncoding::TOKEN_IDS;
  o.vocab_size = 1000;
  o.input = parse_length_dist("fixed:10");
  const auto r = generate_trace(o);
  std::set<std::vector<int32_t>> prefixes;
  for (const auto& x : r) {
    ASSERT_TRUE(x.prompt_token_ids);
    ASSERT_EQ(x.prompt_token_ids->size(), 50u);
    for (const int32_t tok : *x.prompt_token_ids) ASSERT_LT(tok, 1000);
    prefixes.insert(
        std::vector<int32_t>(x.prompt_token_ids->begin(), x.prompt_token_ids->begin() + 40));
  }
  EXPECT_EQ(prefixes.size(), 2u);
}

TEST(TraceGen, RoundTripThroughTheReader) {
  TraceGenOptions o;
  o.num_requests = 300;
  o.seed = 9;
  o.rate = 7.5;
  o.input = parse_length_dist("normal:300,100");
  o.prefix_groups = 2;
  o.prefix_tokens = 64;
  o.priority_levels = 4;
  const auto gen = generate_trace(o);
  for (const char* name : {"rt.jsonl", "rt.jsonl.gz"}) {
    const std::string p = temp_path(name);
    write_kvsim_jsonl(p, gen);
    const Trace back = read_trace(p);
    std::remove(p.c_str());
    EXPECT_EQ(back.format, TraceFormat::KVSIM);
    ASSERT_EQ(back.requests.size(), gen.size());
    for (size_t i = 0; i < gen.size(); ++i) {
      ASSERT_EQ(back.requests[i].arrival_ns, gen[i].arrival_ns) << i;
      ASSERT_EQ(back.requests[i].input_tokens, gen[i].input_tokens);
      ASSERT_EQ(back.requests[i].output_tokens, gen[i].output_tokens);
      ASSERT_EQ(back.requests[i].priority, gen[i].priority);
      ASSERT_EQ(back.requests[i].hash_block_size, 16);
      ASSERT_EQ(*back.requests[i].hash_ids, *gen[i].hash_ids);
    }
  }
  // Token-id prompts and a session id survive too.
  TraceRequest r;
  r.arrival_ns = 1'234'567'891;
  r.input_tokens = 3;
  r.output_tokens = 1;
  r.session_id = "a \"quoted\" id";
  r.prompt_token_ids = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{5, 6, 7});
  EXPECT_EQ(format_kvsim_jsonl(r),
            "{\"arrival_s\": 1.234567891, \"input_tokens\": 3, \"output_tokens\": 1, "
            "\"session_id\": \"a \\\"quoted\\\" id\", \"prompt_token_ids\": [5, 6, 7]}");
}

TEST(TraceGen, BadOptions) {
  TraceGenOptions o;
  o.num_requests = 0;
  EXPECT_THROW(generate_trace(o), std::invalid_argument);
  o = {};
  o.rate = 0;
  EXPECT_THROW(generate_trace(o), std::invalid_argument);
  o = {};
  o.prefix_groups = 2;
  EXPECT_THROW(generate_trace(o), std::invalid_argument);  // no prefix tokens
  o = {};
  o.arrival = GenArrival::GAMMA;
  o.cv = 0;
  EXPECT_THROW(generate_trace(o), std::invalid_argument);
  o = {};
  o.input = parse_length_dist("empirical:/nonexistent/trace.csv");
  EXPECT_THROW(generate_trace(o), std::runtime_error);
}

// The message generate_trace / parse_length_dist throws as std::invalid_argument ("" if none).
template <typename F>
std::string invalid_argument_of(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return spell_params(e.what(), ParamSpelling::kCli);
  }
  return {};
}

TEST(TraceGen, OutOfRangeOptionsAreErrorsNotSilentClips) {
  // fixed:N beyond the longest generated prompt used to be clipped to 2^24 without a word.
  EXPECT_EQ(invalid_argument_of([] { parse_length_dist("fixed:99999999999"); }),
            "length distribution 'fixed:99999999999': N must be an integer in [1, 16777216] "
            "(expected fixed:N, uniform:LO,HI, normal:MEAN,SIGMA, lognormal:MU,SIGMA, zipf:S,MAX "
            "or empirical:PATH)");
  EXPECT_EQ(parse_length_dist("fixed:16777216").a, 16777216);

  // A prefix that alone exceeds the maximum prompt (it used to saturate at INT32_MAX, or build
  // 134M hash ids per request and hang).
  TraceGenOptions o;
  o.num_requests = 2;
  o.prefix_groups = 3;
  o.prefix_tokens = 2147483647;
  EXPECT_EQ(invalid_argument_of([&] { generate_trace(o); }),
            "--prefix-tokens must be < 16777216 (the longest generated prompt; got 2147483647)");
  // Prefix + fixed input over the maximum.
  o.prefix_groups = 1;
  o.prefix_tokens = 16000000;
  o.input = parse_length_dist("fixed:777217");
  EXPECT_EQ(invalid_argument_of([&] { generate_trace(o); }),
            "--prefix-tokens 16000000 + --input-len up to 777217 = 16777217 tokens exceeds the "
            "longest generated prompt (16777216 tokens)");
  o.input = parse_length_dist("uniform:1,777217");
  EXPECT_NE(invalid_argument_of([&] { generate_trace(o); }), "");
  // Exactly the maximum is fine; random draws are clipped to leave room for the prefix.
  o.input = parse_length_dist("fixed:777216");
  EXPECT_EQ(generate_trace(o)[0].input_tokens, 16777216);
  // A normal around a mean above what is left is refused rather than clipped to the maximum.
  o.input = parse_length_dist("normal:5000000,10");
  EXPECT_EQ(invalid_argument_of([&] { generate_trace(o); }),
            "--input-len normal:5e+06,10: 100 % of the draws would fall outside [1, 777216] and "
            "be clipped (at most 10 % may be; a mean inside the range with a smaller SIGMA fits)");

  // Total shared-prefix content is bounded (2^28 ids): 300 prompts of 2^24 tokens at 16 tokens
  // per id need 300 * 2^20 ids; known before anything is generated.
  o.num_requests = 300;
  o.input = parse_length_dist("fixed:777216");
  EXPECT_EQ(invalid_argument_of([&] { generate_trace(o); }),
            "the shared-prefix content of 300 requests exceeds the generator's limit of 268435456 "
            "hash ids (lower --num-requests, --input-len or --prefix-tokens, or raise "
            "--hash-block-size)");
  o.num_requests = 2;
  o.prefix_encoding = PrefixEncoding::TOKEN_IDS;
  o.prefix_groups = 20;
  EXPECT_EQ(invalid_argument_of([&] { generate_trace(o); }),
            "--prefix-groups 20 x --prefix-tokens 16000000 token ids exceed the generator's limit "
            "of 268435456");
}

// Issue 23: normal/lognormal parameters that clip a substantial share are refused, as fixed and
// uniform values out of range are (normal:0,10 used to turn half the requests into length 1).
TEST(TraceGen, DistributionsThatWouldMostlyClipAreRefused) {
  TraceGenOptions o;
  o.num_requests = 10;
  o.output = parse_length_dist("normal:0,10");
  EXPECT_EQ(invalid_argument_of([&] { generate_trace(o); }),
            "--output-len normal:0,10: 52 % of the draws would fall outside [1, 16777216] and be "
            "clipped (at most 10 % may be; a mean inside the range with a smaller SIGMA fits)");
  o.output = parse_length_dist("normal:3,4");  // P(X < 0.5) = 27 %
  EXPECT_NE(invalid_argument_of([&] { generate_trace(o); }).find("27 % of the draws"),
            std::string::npos);
  o.output = parse_length_dist("normal:0.4,0");  // sigma 0: always rounds to 0
  EXPECT_NE(invalid_argument_of([&] { generate_trace(o); }).find("100 %"), std::string::npos);
  o.output = parse_length_dist("lognormal:-2,0.5");  // median 0.14 tokens
  EXPECT_NE(invalid_argument_of([&] { generate_trace(o); }).find("--output-len lognormal:-2,0.5"),
            std::string::npos);
  o.output = parse_length_dist("lognormal:17,0.1");  // median 24 M tokens, above 2^24
  EXPECT_NE(invalid_argument_of([&] { generate_trace(o); }).find("100 %"), std::string::npos);
  // Within the limit: generated, with the clipped draws counted.
  o.output = parse_length_dist("normal:12,10");  // P(X < 0.5) = 12.5 %: refused
  EXPECT_NE(invalid_argument_of([&] { generate_trace(o); }), "");
  o.output = parse_length_dist("normal:16,10");  // P(X < 0.5) = 6.1 %
  GenClipped clipped;
  EXPECT_EQ(generate_trace(o, &clipped).size(), 10u);
  EXPECT_EQ(clipped.input, 0);
}

TEST(TraceGen, GammaCvIsBounded) {
  TraceGenOptions o;
  o.num_requests = 3;
  o.arrival = GenArrival::GAMMA;
  for (const double cv : {1e-300, 1e300, 0.0, 5e-4, 1001.0}) {
    o.cv = cv;
    EXPECT_EQ(invalid_argument_of([&] { generate_trace(o); }),
              fmt::format("--cv must be in [0.001, 1000] (got {:g})", cv));
  }
  for (const double cv : {1e-3, 1e3}) {
    o.cv = cv;
    const auto reqs = generate_trace(o);
    ASSERT_EQ(reqs.size(), 3u);
    EXPECT_LE(reqs[1].arrival_ns, reqs[2].arrival_ns);
  }
}

}  // namespace
}  // namespace kvsim
