// A main() for the fuzz targets when libFuzzer is not available (GCC builds): runs each file
// given (or each file in each directory given) through LLVMFuzzerTestOneInput once. ctest uses
// it to replay the seed corpora and the regressions (fuzz/regressions/) in every build.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  int files = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      std::vector<std::filesystem::path> entries;
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_regular_file()) entries.push_back(e.path());
      }
      std::sort(entries.begin(), entries.end());
      for (const auto& e : entries) {
        run_file(e);
        ++files;
      }
    } else if (std::filesystem::is_regular_file(p)) {
      run_file(p);
      ++files;
    }
  }
  std::printf("ran %d inputs\n", files);
  return 0;
}
