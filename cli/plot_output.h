// `--plot FILE` for every command that draws (replay, sweep, size): the figure is made by one of
// the plot scripts tools/plot_*.py (matplotlib; the figure code itself is python/kvsim/_plots.py,
// the one the Python package's .plot() methods use), run without a shell into the temporary file
// OutputFiles made for --plot, so the plot is committed or discarded with the command's other
// outputs and has every guarantee of docs/files.md.
//
// The interpreter: $KVSIM_PYTHON when set (used as given), else the first of `python3` on PATH
// and /usr/bin/python3 (Debian's, where tools/install-deps.sh puts python3-matplotlib) that can
// `import matplotlib`, checked once per process; when none can, the error names each one tried.
// The scripts: tools/ of the source tree kvsim was built from, or $KVSIM_TOOLS_DIR.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "output_files.h"

namespace kvsim::cli {

// Registers --plot (empty: not requested) with `outputs`; a plot is an image file, never stdout:
// "-" is refused (std::invalid_argument).
void add_plot_output(OutputFiles& outputs, const std::string& plot_path);

// Input files of a plot script that the user did not ask to keep (a summary JSON, a timeline):
// temporary files in the system's temporary directory, removed when this object goes (and by a
// second signal, interrupt.h).
class PlotInputs {
 public:
  PlotInputs() = default;
  PlotInputs(const PlotInputs&) = delete;
  PlotInputs& operator=(const PlotInputs&) = delete;
  ~PlotInputs();

  // A new temporary file holding what `write` puts into the stream; returns its path. Throws
  // std::runtime_error naming --plot when it cannot be written.
  std::string add(const std::function<void(std::ostream&)>& write);

 private:
  struct File {
    std::string path;
    int slot;
  };
  std::vector<File> files_;
};

// Draws --plot: `PYTHON tools/SCRIPT ARGS... -o TEMPORARY --format F` (F from the destination's
// extension, png when it has none; the script's stdout discarded, since kvsim's may carry another
// output; its errors on stderr), then finishes --plot in `outputs` (commit_all() still to come).
// Throws std::runtime_error naming --plot and the destination when no interpreter has matplotlib or
// the script fails; Interrupted when a signal came meanwhile.
void draw_plot(OutputFiles& outputs, const std::string& plot_path, const std::string& script,
               const std::vector<std::string>& args);

}  // namespace kvsim::cli
