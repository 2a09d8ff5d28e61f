// Fuzz target: parse_hf_config() on arbitrary bytes. On success the model passes the planner's
// validation and its shape is consistent.
#include <cstdint>
#include <exception>
#include <new>
#include <string_view>

#include "fuzz_check.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kvsim::ModelSpec m;
  try {
    m = kvsim::parse_hf_config(text, "config.json");
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
    return 0;
  }
  KVSIM_FUZZ_CHECK(m.num_layers >= 1 && m.num_layers <= kvsim::kMaxNumLayers);
  KVSIM_FUZZ_CHECK(m.num_kv_heads >= 1 && m.num_kv_heads <= m.num_attention_heads);
  KVSIM_FUZZ_CHECK(m.head_dim >= 1);
  KVSIM_FUZZ_CHECK(m.num_parameters >= 0 && m.num_parameters <= kvsim::kMaxNumParams);
  bool valid = true;
  try {
    kvsim::validate_model_spec(m);
  } catch (const std::exception&) {
    valid = false;
  }
  KVSIM_FUZZ_CHECK(valid);
  return 0;
}
