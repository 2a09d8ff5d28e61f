// Internal: the CSV headers and row formatters shared by the single-replica writers (report.h)
// and the cluster writers (cluster_report.h), so both print the same columns the same way.
#pragma once

#include <string_view>

#include <fmt/format.h>

#include "kvsim/sim/engine/replay.h"

namespace kvsim::detail {

inline constexpr std::string_view kTimelineCsvHeader =
    "step,time_s,duration_s,running,waiting,scheduled_reqs,scheduled_tokens,prefill_tokens,"
    "decode_tokens,used_blocks,free_blocks,cached_blocks,padding_tokens,preemptions,"
    "admission_stop,swap_out_blocks,swap_in_blocks,host_slots_used";
inline constexpr std::string_view kRequestsCsvHeader =
    "request_id,source_line,arrival_s,prompt_tokens,max_tokens,output_tokens,priority,"
    "first_scheduled_s,first_token_s,finish_s,queueing_s,ttft_s,e2e_s,preemptions,"
    "scheduled_tokens,recomputed_tokens,prefix_hit_tokens,status,reject_reason,swap_outs";

// One line each, '\n'-terminated.
void append_timeline_row(fmt::memory_buffer& buf, const TimelineRow& r);
void append_request_row(fmt::memory_buffer& buf, const RequestRecord& r,
                        std::string_view reject_reason);

}  // namespace kvsim::detail
