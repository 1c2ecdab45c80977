// Tests of dtype conversion, the safetensors writer/reader round trip, sliced reads and LoadProgress.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "common/dtype.h"
#include "common/log.h"
#include "runtime/weights/load_progress.h"
#include "runtime/weights/safetensors_file.h"
#include "tests/model/weights_test_util.h"

namespace tpserve {
namespace {

using testing_util::add_bf16;
using testing_util::add_f32;
using testing_util::error_of;
using testing_util::iota_floats;
using testing_util::TempDir;

uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

TEST(DType, SizesAndNamesRoundTrip) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kI64, DType::kI32,
                  DType::kI16, DType::kI8, DType::kU8, DType::kBool, DType::kF64}) {
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << dtype_name(t);
  }
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::kF64), 8u);
  EXPECT_STREQ(dtype_name(DType::kF8E4M3), "F8_E4M3");
  EXPECT_STREQ(dtype_name(DType::kBool), "BOOL");
  EXPECT_FALSE(dtype_from_name("bf16").has_value());
  EXPECT_FALSE(dtype_from_name("F128").has_value());
}

TEST(DType, F16KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);  // largest half
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);  // below the halfway point
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // halfway: ties to even = inf
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to it: ties to even = 0
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 subnormal units: ties to even = 2
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, even below
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie, even above
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  const uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(float_bits(f16_to_f32(0x8000)), 0x80000000u);
}

TEST(DType, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

#ifdef __FLT16_MAX__
// The compiler's own float -> _Float16 conversion rounds to nearest even: compare on random bit patterns.
TEST(DType, F32ToF16MatchesCompilerConversion) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    if (i % 2 == 0) bits = (bits & 0x80ffffffu) | ((100u + rng() % 45u) << 23);  // near the half range
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    if (std::isnan(f)) continue;
    const _Float16 reference = static_cast<_Float16>(f);
    uint16_t reference_bits;
    std::memcpy(&reference_bits, &reference, sizeof(reference_bits));
    ASSERT_EQ(f32_to_f16(f), reference_bits) << std::hex << bits;
  }
}
#endif

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie, even above
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -9) * 1.5f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(5.0f, -9)), 0x3f81);  // above the tie
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

// A file with one tensor of each float dtype, written by SafetensorsWriter and read back.
TEST(Safetensors, RoundTripOfFloatDtypes) {
  TempDir dir;
  const std::vector<float> values = {0.0f, 1.0f, -2.5f, 3.140625f, 1e-3f, -65504.0f};
  SafetensorsWriter writer;
  add_f32(writer, "f32", {2, 3}, values);
  add_bf16(writer, "bf16", {3, 2}, values);
  std::vector<uint16_t> halves;
  for (float v : values) halves.push_back(f32_to_f16(v));
  writer.add("f16", DType::kF16, {6}, halves.data(), halves.size() * 2);
  writer.add("empty", DType::kF32, {0, 4}, nullptr, 0);
  writer.write(dir.file("a.safetensors"), {{"format", "pt"}});

  const SafetensorsFile file(dir.file("a.safetensors"));
  EXPECT_EQ(file.names(), (std::vector<std::string>{"bf16", "empty", "f16", "f32"}));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.meta("bf16").dtype, DType::kBF16);
  EXPECT_EQ(file.meta("bf16").shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(file.meta("empty").numel(), 0);
  EXPECT_EQ(file.tensor_bytes(), 6u * 4 + 6 * 2 + 6 * 2);
  // Data section 8-byte aligned: header length is a multiple of 8.
  EXPECT_EQ((file.file_size() - file.tensor_bytes()) % 8, 0u);
  ASSERT_EQ(file.bytes("f16").size(), 12u);
  EXPECT_EQ(std::memcmp(file.bytes("f16").data(), halves.data(), 12), 0);

  for (const char* name : {"f32", "bf16", "f16"}) {
    std::vector<float> out(6);
    const TensorMeta m = file.meta(name);
    std::vector<Range> all;
    for (int64_t d : m.shape) all.push_back({0, d});
    file.read(name, all, DType::kF32, out.data());
    for (size_t i = 0; i < values.size(); ++i) {
      const float expected = std::string(name) == "f32"    ? values[i]
                             : std::string(name) == "bf16" ? bf16_to_f32(f32_to_bf16(values[i]))
                                                           : f16_to_f32(f32_to_f16(values[i]));
      EXPECT_EQ(out[i], expected) << name << "[" << i << "]";
    }
  }
  std::vector<uint16_t> as_bf16(6);
  file.read("f32", std::vector<Range>{{0, 2}, {0, 3}}, DType::kBF16, as_bf16.data());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(as_bf16[i], f32_to_bf16(values[i])) << i;
}

TEST(Safetensors, F32ToBf16ReadRoundsToNearestEven) {
  TempDir dir;
  const std::vector<float> values = {1.0f + std::ldexp(1.0f, -8), 1.0f + std::ldexp(3.0f, -8),
                                     1.0f + std::ldexp(5.0f, -9), -1.0f - std::ldexp(3.0f, -8)};
  SafetensorsWriter writer;
  add_f32(writer, "w", {4}, values);
  writer.write(dir.file("w.safetensors"));
  std::vector<uint16_t> out(4);
  SafetensorsFile(dir.file("w.safetensors")).read("w", std::vector<Range>{{0, 4}}, DType::kBF16, out.data());
  EXPECT_EQ(out, (std::vector<uint16_t>{0x3f80, 0x3f82, 0x3f81, 0xbf82}));
}

// Reference slice: plain index arithmetic over a [d0, d1, d2] tensor.
std::vector<float> reference_slice(const std::vector<float>& full, const std::vector<int64_t>& shape,
                                   const std::vector<Range>& r) {
  std::vector<float> out;
  for (int64_t i = r[0].begin; i < r[0].end; ++i)
    for (int64_t j = r[1].begin; j < r[1].end; ++j)
      for (int64_t k = r[2].begin; k < r[2].end; ++k) out.push_back(full[(i * shape[1] + j) * shape[2] + k]);
  return out;
}

class SlicedReads : public testing::Test {
 protected:
  void SetUp() override {
    SafetensorsWriter writer;
    add_f32(writer, "matrix", {6, 7}, iota_floats(42));
    add_bf16(writer, "cube", {4, 5, 6}, iota_floats(120));
    add_f32(writer, "scalar", {}, {42.0f});
    writer.write(dir_.file("s.safetensors"));
    file_ = std::make_unique<SafetensorsFile>(dir_.file("s.safetensors"));
  }
  std::vector<float> read_f32(const std::string& name, const std::vector<Range>& ranges) {
    int64_t n = 1;
    for (const Range& r : ranges) n *= r.size();
    std::vector<float> out(static_cast<size_t>(n), -1.0f);
    file_->read(name, ranges, DType::kF32, out.data());
    return out;
  }
  TempDir dir_;
  std::unique_ptr<SafetensorsFile> file_;
};

TEST_F(SlicedReads, RowsOfAMatrix) {
  const std::vector<float> full = iota_floats(42);
  EXPECT_EQ(read_f32("matrix", {{2, 4}, {0, 7}}), std::vector<float>(full.begin() + 14, full.begin() + 28));
}

TEST_F(SlicedReads, ColumnsOfAMatrix) {
  const std::vector<float> got = read_f32("matrix", {{0, 6}, {3, 5}});
  std::vector<float> expected;
  for (int row = 0; row < 6; ++row)
    for (int col = 3; col < 5; ++col) expected.push_back(static_cast<float>(row * 7 + col));
  EXPECT_EQ(got, expected);
}

TEST_F(SlicedReads, MiddleOfA3DTensorAndOneExpert) {
  const std::vector<float> full = iota_floats(120);
  const std::vector<int64_t> shape = {4, 5, 6};
  const std::vector<Range> middle = {{1, 3}, {1, 4}, {2, 5}};
  EXPECT_EQ(read_f32("cube", middle), reference_slice(full, shape, middle));
  const std::vector<Range> expert = {{2, 3}, {0, 5}, {0, 6}};
  EXPECT_EQ(read_f32("cube", expert), reference_slice(full, shape, expert));
  // Same slice into bf16: the bf16 source bytes copied unchanged.
  std::vector<uint16_t> bits(3 * 3 * 2);
  file_->read("cube", middle, DType::kBF16, bits.data());
  const std::vector<float> ref = reference_slice(full, shape, middle);
  for (size_t i = 0; i < bits.size(); ++i) EXPECT_EQ(bf16_to_f32(bits[i]), ref[i]);
}

TEST_F(SlicedReads, RandomSlicesMatchTheFullTensor) {
  const std::vector<float> full = iota_floats(120);
  const std::vector<int64_t> shape = {4, 5, 6};
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Range> r;
    for (int64_t d : shape) {
      const auto a = static_cast<int64_t>(rng() % (d + 1));
      const auto b = static_cast<int64_t>(rng() % (d + 1));
      r.push_back({std::min(a, b), std::max(a, b)});
    }
    ASSERT_EQ(read_f32("cube", r), reference_slice(full, shape, r)) << trial;
  }
}

TEST_F(SlicedReads, ScalarAndEmptySlices) {
  EXPECT_EQ(read_f32("scalar", {}), std::vector<float>{42.0f});
  EXPECT_TRUE(read_f32("matrix", {{3, 3}, {0, 7}}).empty());
}

TEST_F(SlicedReads, BadRangesAreRejected) {
  float sink[64];
  const std::string wrong_count = error_of([&] {
    file_->read("matrix", std::vector<Range>{{0, 6}}, DType::kF32, sink);
  });
  EXPECT_NE(wrong_count.find("tensor 'matrix': read with 1 ranges, but the tensor has 2 dimensions"),
            std::string::npos)
      << wrong_count;
  const std::string past_end = error_of([&] {
    file_->read("matrix", std::vector<Range>{{0, 6}, {5, 8}}, DType::kF32, sink);
  });
  EXPECT_NE(past_end.find("range [5, 8) of dimension 1 is out of bounds [0, 7)"), std::string::npos)
      << past_end;
  const std::string reversed = error_of([&] {
    file_->read("matrix", std::vector<Range>{{4, 2}, {0, 7}}, DType::kF32, sink);
  });
  EXPECT_NE(reversed.find("range [4, 2) of dimension 0"), std::string::npos) << reversed;
  const std::string bad_out = error_of([&] {
    file_->read("matrix", std::vector<Range>{{0, 1}, {0, 1}}, DType::kF16, sink);
  });
  EXPECT_NE(bad_out.find("cannot read into F16"), std::string::npos) << bad_out;
  const std::string missing = error_of([&] { file_->meta("nope"); });
  EXPECT_NE(missing.find("s.safetensors: no tensor 'nope'"), std::string::npos) << missing;
}

TEST(Safetensors, UnsupportedSourceDtypesAreRefused) {
  TempDir dir;
  SafetensorsWriter writer;
  const uint8_t fp8[4] = {1, 2, 3, 4};
  const int32_t ints[2] = {1, 2};
  writer.add("fp8", DType::kF8E4M3, {4}, fp8, 4);
  writer.add("ints", DType::kI32, {2}, ints, 8);
  writer.write(dir.file("q.safetensors"));
  const SafetensorsFile file(dir.file("q.safetensors"));
  float sink[4];
  const std::string fp8_error = error_of([&] {
    file.read("fp8", std::vector<Range>{{0, 4}}, DType::kF32, sink);
  });
  EXPECT_NE(fp8_error.find("q.safetensors: tensor 'fp8': F8_E4M3 weights are not supported yet"),
            std::string::npos)
      << fp8_error;
  const std::string int_error = error_of([&] {
    file.read("ints", std::vector<Range>{{0, 2}}, DType::kBF16, sink);
  });
  EXPECT_NE(int_error.find("tensor 'ints': converting I32 to BF16 is not supported"), std::string::npos)
      << int_error;
}

TEST(SafetensorsWriter, RejectsInconsistentTensors) {
  SafetensorsWriter writer;
  const float data[4] = {};
  EXPECT_NE(error_of([&] { writer.add("w", DType::kF32, {3}, data, 16); }).find("16 bytes given"),
            std::string::npos);
  writer.add("w", DType::kF32, {4}, data, 16);
  EXPECT_NE(error_of([&] { writer.add("w", DType::kF32, {4}, data, 16); }).find("added twice"),
            std::string::npos);
}

TEST(LoadProgress, LogsProgressAndAFinalLine) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(5'600'000), "5.6 MB");
  EXPECT_EQ(format_bytes(61'000'000'000), "61.0 GB");
  set_log_level(LogLevel::kInfo);
  testing::internal::CaptureStderr();
  {
    LoadProgress progress("test weights", 3'000'000, 3, std::chrono::milliseconds(0));
    progress.add(1'000'000);
    progress.add(1'000'000);
    progress.add(1'000'000);
    EXPECT_EQ(progress.tensors_done(), 3);
    EXPECT_EQ(progress.bytes_done(), 3'000'000u);
  }
  {
    LoadProgress quiet("quiet", 2, 2, std::chrono::hours(1));
    quiet.add(1);  // within the interval: no line
  }
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("test weights: loaded 1.0 MB / 3.0 MB (1/3 tensors)"), std::string::npos) << out;
  EXPECT_NE(out.find("test weights: loaded 2.0 MB / 3.0 MB (2/3 tensors)"), std::string::npos) << out;
  EXPECT_NE(out.find("test weights: loaded 3.0 MB (3 tensors) in "), std::string::npos) << out;
  EXPECT_EQ(out.find("quiet"), std::string::npos) << out;
}

}  // namespace
}  // namespace tpserve
