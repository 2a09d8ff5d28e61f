// kvsim size --merge: the checks that a shard's candidates agree with themselves, with their
// report's header and with each other. The size_id only fingerprints the flags and the trace,
// so without these a hand-edited or corrupted row (a GPU renamed, a cost that is not replicas x
// TP x price) would be merged and ranked as if it were a result.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "kvsim/sim/sweep/size_report.h"

namespace kvsim {

// One candidate against itself and its shard's header (max_replicas, router): the GPU count and
// cost arithmetic, the replica count and trials its verdict allows, the resolved settings it
// requested, and the replay command's tail. Throws std::invalid_argument naming the file and
// the candidate.
void check_size_candidate(const std::string& file, const SizeReportContext& ctx,
                          const SizeResult& r);

// Across every shard of one merge, once all candidates are read: one price per GPU (the price
// table is fingerprinted), one replay-command prefix (the shared flags are), and the candidates'
// requested settings forming the grid their indices imply (gpu outermost, then TP, KV dtype,
// block size, max_num_seqs). `file_of` maps each candidate index to its shard's name.
void check_size_candidates_agree(std::span<const SizeResult> results,
                                 const std::map<int64_t, std::string>& file_of,
                                 const std::string& router);

// "" when two shard headers describe the same search, else what differs, e.g. "trace 'a.csv'
// vs 'b.csv'" or "size_id 0123... vs 4567..." (each difference named once, not two equal ids).
std::string size_context_difference(const SizeReportContext& a, const SizeReportContext& b);

}  // namespace kvsim
