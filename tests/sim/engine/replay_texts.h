// A replay's outputs as the CLI writes them, for tests that require two replays to be
// byte-identical: the timeline CSV, the requests CSV and the JSON summary (wall_seconds zeroed:
// the only field that may differ between two runs).
#pragma once

#include <sstream>
#include <string>

#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/report/report.h"

namespace kvsim::test {

struct ReplayTexts {
  std::string timeline;
  std::string requests;
  std::string summary;
};

inline ReplayTexts replay_texts(const ReplayResult& r) {
  ReplayTexts out;
  std::ostringstream tl;
  write_timeline_csv(tl, r.timeline);
  out.timeline = tl.str();
  std::ostringstream rq;
  write_requests_csv(rq, r.requests);
  out.requests = rq.str();
  ReplaySummary s = r.summary;
  s.wall_seconds = 0;
  ReportContext ctx;
  out.summary = replay_summary_json(s, ctx).dump();
  return out;
}

}  // namespace kvsim::test
