#include "output_files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include <fmt/core.h>

namespace kvsim::cli {
namespace fs = std::filesystem;

void OutputFiles::add(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  std::string key = path;
  if (path != "-") {
    std::error_code ec;
    const fs::path canon = fs::weakly_canonical(fs::absolute(path), ec);
    if (!ec) key = canon.string();
  }
  for (const Entry& e : entries_) {
    if (e.key == key) {
      throw std::invalid_argument(
          path == "-" ? fmt::format("{} - and {} - both write to stdout; give at most one '-'",
                                    e.flag, flag)
                      : fmt::format("{} and {} name the same file '{}'", e.flag, flag, path));
    }
  }
  entries_.push_back({flag, path, key, nullptr});
}

void OutputFiles::open_all() {
  for (Entry& e : entries_) {
    if (e.path == "-" || e.file) continue;
    e.file = std::make_unique<std::ofstream>(e.path, std::ios::binary | std::ios::trunc);
    if (!*e.file) {
      throw std::runtime_error(
          fmt::format("{} {}: cannot open for writing: {}", e.flag, e.path, std::strerror(errno)));
    }
  }
}

bool OutputFiles::uses_stdout() const {
  for (const Entry& e : entries_) {
    if (e.path == "-") return true;
  }
  return false;
}

const OutputFiles::Entry* OutputFiles::find(const std::string& flag) const {
  for (const Entry& e : entries_) {
    if (e.flag == flag) return &e;
  }
  return nullptr;
}

OutputFiles::Entry& OutputFiles::get(const std::string& flag) {
  for (Entry& e : entries_) {
    if (e.flag == flag) return e;
  }
  throw std::logic_error("OutputFiles: " + flag + " was not registered");
}

std::ostream& OutputFiles::stream(const std::string& flag) {
  Entry& e = get(flag);
  if (e.path == "-") return std::cout;
  if (!e.file) throw std::logic_error("OutputFiles: " + flag + " was not opened");
  return *e.file;
}

void OutputFiles::finish(const std::string& flag) {
  Entry& e = get(flag);
  if (e.path == "-") {
    std::cout.flush();  // main() checks stdout's final state
    return;
  }
  e.file->close();
  if (!*e.file) {
    throw std::runtime_error(fmt::format("{} {}: write error", e.flag, e.path));
  }
}

}  // namespace kvsim::cli
