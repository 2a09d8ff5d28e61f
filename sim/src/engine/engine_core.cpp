#include "kvsim/sim/engine/engine_core.h"

namespace kvsim {

EngineStep EngineCore::step(const AfterSchedule& after_schedule) {
  EngineStep st;
  if (!sched_.config().async_scheduling) {
    if (!sched_.has_requests()) return st;
    st.scheduled = &sched_.schedule();
    if (after_schedule) after_schedule(*st.scheduled);
    st.processed = &sched_.update_from_output();
    return st;
  }
  const int64_t queue_size = max_concurrent_batches(sched_.config());
  if (sched_.has_requests()) {
    st.scheduled = &sched_.schedule();
    if (after_schedule) after_schedule(*st.scheduled);
    const bool executed = st.scheduled->total_num_scheduled_tokens > 0;
    // Filling the queue comes first: do not block on the oldest batch while another fits.
    if (num_in_flight() < queue_size && (executed || sched_.has_requests())) return st;
  } else if (num_in_flight() == 0) {
    return st;
  }
  st.processed = &sched_.update_from_output();
  return st;
}

}  // namespace kvsim
