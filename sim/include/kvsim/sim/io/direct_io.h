// The alignment direct (O_DIRECT) file writes need: buffer address, length and file offset all
// multiples of it. 4096 covers disks with 512-byte and 4 KiB logical sectors; a file system
// asking for more refuses the write (EINVAL), and the CLI's writer falls back to buffered
// writes (cli/output_files.cpp). Writers that want their bytes to go out directly
// (TimelineCsvWriter) hand the stream aligned blocks.
#pragma once

#include <cstddef>

namespace kvsim {

inline constexpr size_t kDirectIoAlign = 4096;

}  // namespace kvsim
