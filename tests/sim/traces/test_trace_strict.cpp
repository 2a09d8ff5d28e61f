// Silent acceptance and resource exhaustion, closed: NUL bytes in JSONL, strict JSON for configs
// (duplicate keys, NUL, trailing garbage) and trace headers, Mooncake/Bailian detection that
// asks instead of guessing, BurstGPT totals, kvsim's self-delimiting header, and input limits
// (line length, size, gzip header, /dev/zero) that stop early and name the input.
#include <zlib.h>

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/io/model_config.h"
#include "kvsim/sim/io/strict_json.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_writer.h"
#include "scratch_dir_test.h"

namespace kvsim {
namespace {

class TraceStrict : public kvsim_test::ScratchDirTest {
 protected:
  static std::string error_of(const std::string& path, const TraceReadOptions& o = {}) {
    try {
      read_trace(path, o);
    } catch (const std::exception& e) {
      return spell_params(e.what(), ParamSpelling::kCli);
    }
    return {};
  }
};

std::string config_error(std::string_view text) {
  try {
    parse_hf_config(text, "config.json");
  } catch (const std::exception& e) {
    return spell_params(e.what(), ParamSpelling::kCli);
  }
  return {};
}

const std::string kBurstHeader =
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";

TEST_F(TraceStrict, NulInsideAJsonlRecordIsRefused) {
  // Before: the parser stopped at the NUL and the record after it was ignored, exit 0.
  const std::string line =
      std::string(R"({"arrival_s": 0, "input_tokens": 5, "output_tokens": 3)") + '\0' +
      R"(, "output_tokens": 9})";
  const std::string ok = R"({"arrival_s": 0, "input_tokens": 1, "output_tokens": 1})";
  const std::string p = write("nul.jsonl", ok + "\n" + line + "\n");
  EXPECT_EQ(
      error_of(p).rfind(p + ":2: field 'record': NUL byte at column 55 (got '{\"arrival_s\"", 0),
      0u)
      << error_of(p);
  // On the first line, format detection's strict parse refuses it.
  const std::string first = write("nul1.jsonl", line + "\n");
  EXPECT_EQ(error_of(first).rfind(first + ":1: field 'record': NUL byte at offset 54", 0), 0u)
      << error_of(first);
}

TEST_F(TraceStrict, ConfigDuplicateKeysNulAndTrailingGarbageAreRefusedWithTheLine) {
  const std::string dup =
      "{\n  \"num_hidden_layers\": 28,\n  \"num_attention_heads\": 4,\n"
      "  \"hidden_size\": 256,\n  \"num_hidden_layers\": 2\n}";
  EXPECT_EQ(config_error(dup),
            "config.json:5: key \"num_hidden_layers\" given twice in one object");
  const std::string nested = R"({"num_hidden_layers": 2, "num_attention_heads": 4,
 "hidden_size": 256, "quantization_config": {"quant_method": "fp8", "quant_method": "awq"}})";
  EXPECT_EQ(config_error(nested), "config.json:2: key \"quant_method\" given twice in one object");
  std::string nul = R"({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256})";
  nul.insert(25, 1, '\0');
  EXPECT_EQ(config_error(nul),
            "config.json:1: NUL byte at offset 25 (a JSON text never contains one)");
  EXPECT_NE(config_error(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256}
x)")
                .find("config.json:2: malformed JSON"),
            std::string::npos);
}

TEST_F(TraceStrict, StrictJsonAcceptsOrdinaryJson) {
  const auto j = parse_strict_json(R"({"a": {"b": 1}, "c": [{"b": 2}, {"b": 3}], "b": 4} )", "x");
  EXPECT_EQ(j["c"][1]["b"], 3);
  EXPECT_EQ(j["b"], 4);
}

TEST_F(TraceStrict, MooncakeOrBailianIsDetectedOnlyWhenCertain) {
  // The issue's file: Mooncake without hash_ids, first timestamp written 1.0.
  const std::string ambiguous =
      write("a.jsonl", "{\"timestamp\": 1.0, \"input_length\": 10, \"output_length\": 2}\n");
  EXPECT_NE(error_of(ambiguous).find("field 'timestamp': cannot tell Mooncake (timestamp in ms) "
                                     "from Bailian (timestamp in s) by this record; pass --format "
                                     "mooncake or --format bailian"),
            std::string::npos)
      << error_of(ambiguous);
  TraceReadOptions o;
  o.format = TraceFormat::MOONCAKE;
  EXPECT_EQ(read_trace(ambiguous, o).format, TraceFormat::MOONCAKE);
  const std::string mooncake =
      write("m.jsonl",
            "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [7]}\n");
  EXPECT_EQ(read_trace(mooncake).format, TraceFormat::MOONCAKE);
  const std::string bailian =
      write("b.jsonl",
            "{\"chat_id\": 1, \"timestamp\": 1, \"input_length\": 10, \"output_length\": 2}\n");
  EXPECT_EQ(read_trace(bailian).format, TraceFormat::BAILIAN);
}

TEST_F(TraceStrict, BurstGptTotalMustBeRequestPlusResponse) {
  const std::string p = write("b.csv", kBurstHeader +
                                           "1,ChatGPT,100,20,120,Conversation log\n"
                                           "2,ChatGPT,100,20,999,Conversation log\n");
  EXPECT_EQ(error_of(p), p + ":3: field 'Total tokens': differs from Request tokens + Response "
                             "tokens (100 + 20 = 120) (got '999')");
  TraceReadOptions o;
  o.skip_bad_rows = true;
  const Trace t = read_trace(p, o);
  EXPECT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.rows_read, 2);
  EXPECT_EQ(t.dropped.at("field 'Total tokens': differs from Request tokens + Response tokens "
                         "(100 + 20 = 120)"),
            1);
}

TEST_F(TraceStrict, KvsimHeaderCountIsVerified) {
  TraceRequest r;
  r.input_tokens = 4;
  r.output_tokens = 2;
  const std::string p = (dir_ / "g.jsonl").string();
  write_kvsim_jsonl(p, {r, r, r});
  EXPECT_EQ(read_trace(p).requests.size(), 3u);
  const std::string longer =
      write("l.jsonl", kvsim_jsonl_header(2) + "\n" + format_kvsim_jsonl(r) + "\n" +
                           format_kvsim_jsonl(r) + "\n" + format_kvsim_jsonl(r) + "\n");
  EXPECT_NE(error_of(longer).find("declares 2 records and the file holds 3"), std::string::npos);
  const std::string bad_version =
      write("v.jsonl", "{\"kvsim_trace\": 2, \"records\": 1}\n" + format_kvsim_jsonl(r) + "\n");
  EXPECT_NE(error_of(bad_version).find("unsupported version"), std::string::npos);
  // A file without the header (written by hand) is still read.
  const std::string plain = write("p.jsonl", format_kvsim_jsonl(r) + "\n");
  EXPECT_EQ(read_trace(plain).requests.size(), 1u);
}

TEST_F(TraceStrict, LineAndSizeLimitsStopEarlyAndNameTheInput) {
  const std::string p = write("long.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n" +
                                              std::string(5000, '1') + "\n");
  TraceReadOptions o;
  o.limits.max_line_bytes = 4096;
  EXPECT_EQ(error_of(p, o), p + ":2: line longer than the limit of 4096 bytes; not a text trace? "
                                "(raise the limit with --max-line-bytes)");
  o = {};
  o.limits.max_bytes = 1000;
  EXPECT_EQ(error_of(p, o),
            p + ": input larger than the limit of 1000 bytes (raise it with --max-input-bytes)");
}

TEST_F(TraceStrict, DevZeroHitsTheLineLimit) {
  TraceReadOptions o;
  o.limits.max_line_bytes = 1 << 20;
  EXPECT_EQ(error_of("/dev/zero", o),
            "/dev/zero:1: line longer than the limit of 1 MiB; not a text trace? (raise the limit "
            "with --max-line-bytes)");
}

TEST_F(TraceStrict, GzipBombStopsAtTheLimitAfterDecompression) {
  // 64 MiB of zeros compress to ~64 KiB: the limit stops the inflation, not the end of memory.
  const std::string zeros(64 << 20, '\0');
  uLongf size = compressBound(zeros.size()) + 64;
  std::string gz(size, '\0');
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
  z.avail_in = static_cast<uInt>(zeros.size());
  z.next_out = reinterpret_cast<Bytef*>(gz.data());
  z.avail_out = static_cast<uInt>(gz.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  gz.resize(z.total_out);
  deflateEnd(&z);
  const std::string p = write("bomb.gz", gz);
  TraceReadOptions o;
  o.limits.max_bytes = 8 << 20;
  o.limits.max_line_bytes = 0;
  EXPECT_EQ(error_of(p, o), p + ": input larger than the limit of 8 MiB after decompression (raise "
                                "it with --max-input-bytes)");
}

TEST_F(TraceStrict, GzipHeaderIsCheckedBeforeInflating) {
  std::string bad = "\x1f\x8b\x07";  // method 7: not deflate
  bad += std::string(20, 'x');
  const std::string p = write("bad.gz", bad);
  EXPECT_EQ(error_of(p),
            p + ": not a valid gzip file: compression method 7 at byte 2 (only 8, deflate)");
  const std::string flags =
      write("flags.gz", std::string("\x1f\x8b\x08\xe0", 4) + std::string(20, 'x'));
  EXPECT_EQ(error_of(flags),
            flags + ": not a valid gzip file: reserved header flags 0xe0 at byte 3");
}

TEST_F(TraceStrict, ConfigReadIsBoundedAndNamesThePath) {
  try {
    load_hf_config("/dev/zero");
    FAIL() << "read /dev/zero as a config";
  } catch (const std::exception& e) {
    EXPECT_EQ(spell_params(e.what(), ParamSpelling::kCli),
              "/dev/zero: input larger than the limit of 16 MiB");
  }
}

TEST_F(TraceStrict, DurationsThatRoundToZeroAreRefused) {
  const std::string p = write("t.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n1,2,3\n");
  TraceReadOptions o;
  o.duration_s = 1e-12;
  EXPECT_EQ(error_of(p, o), "--duration 1e-12: rounds to 0 ns; give at least 1e-9 seconds, or 0");
}

}  // namespace
}  // namespace kvsim
