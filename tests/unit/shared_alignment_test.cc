// The kernels' static shared arrays that are read or written through a vector type carry __align__(16)
// (docs/cuda_backend.md, "Shared memory"): the compiler lays static shared variables out in an order of its
// own, so an array's 16-byte alignment by position holds only until an unrelated change. A scan of the
// sources, so that it runs without a GPU: the misaligned q_s of the forty-eighth session failed only on one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace tpserve {
namespace {

// The names of the static __shared__ arrays declared without __align__ in `source` (each declarator of a
// declaration: `__shared__ float a[4], b[4];` gives a and b).
std::set<std::string> unaligned_shared_arrays(const std::string& source) {
  std::set<std::string> names;
  static const std::regex declaration(R"(__shared__\s+([^;]*);)");
  static const std::regex array_name(R"((\w+)\s*\[)");
  for (std::sregex_iterator it(source.begin(), source.end(), declaration), end; it != end; ++it) {
    const std::string text = (*it)[1];
    if (text.find("__align__") != std::string::npos) continue;
    for (std::sregex_iterator n(text.begin(), text.end(), array_name); n != std::sregex_iterator(); ++n)
      names.insert((*n)[1]);
  }
  return names;
}

// The arrays of unaligned_shared_arrays(source) that `source` casts to a vector type's pointer
// (reinterpret_cast<... float4 ...>(&name[..]) or (name + ..)).
std::vector<std::string> vector_accessed_unaligned(const std::string& source) {
  std::vector<std::string> found;
  for (const std::string& name : unaligned_shared_arrays(source)) {
    const std::regex cast(
        R"(reinterpret_cast<[^>]*\b(float|uint|int|double|half|bf16)[24]\b[^>]*>\(\s*&?\s*)" + name +
        R"(\b)");
    if (std::regex_search(source, cast)) found.push_back(name);
  }
  return found;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(SharedAlignment, TheScanFindsAnUnalignedVectorRead) {
  // The CUDA-core decode attention kernel before efba124.
  const std::string before = R"(
    __shared__ float q_s[kRows][D];
    __shared__ __align__(16) bf16 k_s[kStages][kKeys][T::kRowStride];
    __shared__ float alpha_s[kRows], max_s[kRows];
    const float4 qa = *reinterpret_cast<const float4*>(&q_s[r][c * kBf16PerVec]);
    const uint4 kv = *reinterpret_cast<const uint4*>(&k_s[0][r][c]);
    max_s[r] = alpha_s[r];)";
  EXPECT_EQ(unaligned_shared_arrays(before), (std::set<std::string>{"q_s", "alpha_s", "max_s"}));
  EXPECT_EQ(vector_accessed_unaligned(before), std::vector<std::string>{"q_s"});
  const std::string after = R"(
    __shared__ __align__(16) float q_s[kRows][D];
    const float4 qa = *reinterpret_cast<const float4*>(&q_s[r][c * kBf16PerVec]);)";
  EXPECT_TRUE(vector_accessed_unaligned(after).empty());
}

TEST(SharedAlignment, EveryKernelsVectorAccessedSharedArrayIsAligned) {
  const std::filesystem::path kernels = std::filesystem::path(TPSERVE_SOURCE_DIR) / "kernels";
  ASSERT_TRUE(std::filesystem::is_directory(kernels)) << kernels;
  int scanned = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kernels)) {
    const std::string ext = entry.path().extension();
    if (ext != ".cu" && ext != ".cuh") continue;
    ++scanned;
    for (const std::string& name : vector_accessed_unaligned(read_file(entry.path())))
      ADD_FAILURE() << entry.path().filename().string() << ": __shared__ " << name
                    << " is read or written as a vector type; declare it __align__(16)";
  }
  EXPECT_GT(scanned, 10) << "kernel sources under " << kernels;
}

}  // namespace
}  // namespace tpserve
