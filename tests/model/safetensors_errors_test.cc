// Every way a .safetensors file can be broken, each written by hand with raw bytes, must be refused with a
// message that names the file (and the tensor) and the specific problem.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "runtime/weights/safetensors_file.h"
#include "tests/model/weights_test_util.h"

namespace tpserve {
namespace {

using testing_util::error_of;
using testing_util::raw_safetensors;
using testing_util::TempDir;
using testing_util::write_bytes;

struct BrokenFile {
  const char* name;
  std::string bytes;
  std::string must_contain;  // besides the file name
};

void PrintTo(const BrokenFile& b, std::ostream* os) {
  *os << b.name;
}

class BrokenSafetensors : public testing::TestWithParam<BrokenFile> {};

TEST_P(BrokenSafetensors, IsRejectedNamingTheFileAndTheProblem) {
  const BrokenFile& b = GetParam();
  TempDir dir;
  const std::string path = dir.file(std::string(b.name) + ".safetensors");
  write_bytes(path, b.bytes);
  const std::string msg = error_of([&] { SafetensorsFile file(path); });
  EXPECT_NE(msg.find(path + ": "), std::string::npos) << msg;
  EXPECT_NE(msg.find(b.must_contain), std::string::npos) << "message:\n"
                                                         << msg << "\nwanted: " << b.must_contain;
}

// A valid entry for "w": 4 F32 values in [0, 16).
const std::string kW = R"("w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]})";

std::string file_with(const std::string& entries, size_t data_bytes = 16) {
  return raw_safetensors("{" + entries + "}", data_bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Safetensors, BrokenSafetensors,
    testing::Values(
        BrokenFile{"empty_file", "", "file is 0 bytes, shorter than the 8-byte header length"},
        BrokenFile{"seven_bytes", std::string(7, '\x01'),
                   "file is 7 bytes, shorter than the 8-byte header length"},
        BrokenFile{"header_past_end", raw_safetensors("{}", 0, 100),
                   "header length 100 runs past the end of the file (10 bytes)"},
        BrokenFile{"header_absurd", raw_safetensors("{}", 0, int64_t{1} << 40),
                   "header length 1099511627776 is absurdly large"},
        BrokenFile{"malformed_json", file_with(kW + ","),
                   "malformed header JSON: [json.exception.parse_error"},
        BrokenFile{"not_json_at_all", raw_safetensors("GGUF", 0), "malformed header JSON"},
        BrokenFile{"header_is_array", raw_safetensors("[1, 2]", 0),
                   "header is not a JSON object (it is array)"},
        BrokenFile{"entry_not_object", file_with(R"("w": [1, 2])"),
                   "tensor 'w': entry must be an object (it is array)"},
        BrokenFile{"missing_dtype", file_with(R"("w": {"shape": [4], "data_offsets": [0, 16]})"),
                   "tensor 'w': missing 'dtype'"},
        BrokenFile{"missing_shape", file_with(R"("w": {"dtype": "F32", "data_offsets": [0, 16]})"),
                   "tensor 'w': missing 'shape'"},
        BrokenFile{"missing_offsets", file_with(R"("w": {"dtype": "F32", "shape": [4]})"),
                   "tensor 'w': missing 'data_offsets'"},
        BrokenFile{"dtype_not_string",
                   file_with(R"("w": {"dtype": 4, "shape": [4], "data_offsets": [0, 16]})"),
                   "tensor 'w': 'dtype' must be a string (it is number)"},
        BrokenFile{"unknown_dtype",
                   file_with(R"("w": {"dtype": "F17", "shape": [4], "data_offsets": [0, 16]})"),
                   "tensor 'w': unknown dtype 'F17' (known: BF16, F16, F32"},
        BrokenFile{"shape_not_array",
                   file_with(R"("w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]})"),
                   "tensor 'w': 'shape' must be an array (it is number)"},
        BrokenFile{"shape_float",
                   file_with(R"("w": {"dtype": "F32", "shape": [4.0], "data_offsets": [0, 16]})"),
                   "tensor 'w': shape [4.0] has a dimension that is not a non-negative integer"},
        // 200,000 levels (printing it once recursed to a crash), and a header of nothing but 4 million
        // brackets (a tree of gigabytes if it were built): refused as the nesting opens.
        BrokenFile{"shape_nested_deep",
                   file_with(R"("w": {"dtype": "F32", "shape": [)" + std::string(200000, '[') +
                             std::string(200000, ']') + R"(], "data_offsets": [0, 16]})"),
                   "header nests deeper than a safetensors header does"},
        BrokenFile{"header_nested_deep",
                   raw_safetensors(std::string(4000000, '[') + std::string(4000000, ']'), 0),
                   "header nests deeper than a safetensors header does"},
        BrokenFile{"shape_of_objects",
                   file_with(R"("w": {"dtype": "F32", "shape": [{}], "data_offsets": [0, 16]})"),
                   "header nests deeper than a safetensors header does"},
        BrokenFile{"negative_dim",
                   file_with(R"("w": {"dtype": "F32", "shape": [-2, -2], "data_offsets": [0, 16]})"),
                   "tensor 'w': negative dimension -2 in shape [-2,-2]"},
        BrokenFile{"offsets_not_pair",
                   file_with(R"("w": {"dtype": "F32", "shape": [4], "data_offsets": [0]})"),
                   "tensor 'w': 'data_offsets' must be [begin, end] with non-negative integers (got [0])"},
        BrokenFile{"offsets_negative",
                   file_with(R"("w": {"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]})"),
                   "tensor 'w': 'data_offsets' must be [begin, end]"},
        BrokenFile{"offsets_past_data",
                   file_with(R"("w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]})"),
                   "tensor 'w': data_offsets [8, 24] out of range of the data section (16 bytes)"},
        BrokenFile{"begin_after_end",
                   file_with(R"("w": {"dtype": "F32", "shape": [0], "data_offsets": [16, 0]})"),
                   "tensor 'w': data_offsets begin 16 > end 0"},
        BrokenFile{"size_mismatch",
                   file_with(R"("w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 16]})"),
                   "tensor 'w': data_offsets span 16 bytes but shape [2,2] of BF16 needs 8"},
        BrokenFile{
            "size_overflow",
            file_with(R"("w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]})"),
            "needs more than 2^64"},
        BrokenFile{"overlap",
                   file_with(kW + R"(, "v": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]})"),
                   "tensors 'w' [0, 16) and 'v' [8, 16) overlap"},
        BrokenFile{"duplicate_name", file_with(kW + ", " + kW), "header lists 'w' twice"},
        BrokenFile{
            "duplicate_field",
            file_with(R"("w": {"dtype": "F16", "dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]})"),
            "header lists 'dtype' twice"},
        BrokenFile{"metadata_not_object", file_with(kW + R"(, "__metadata__": "pt")"),
                   "__metadata__ must be an object (it is string)"},
        BrokenFile{"metadata_not_strings", file_with(kW + R"(, "__metadata__": {"format": "pt", "step": 3})"),
                   "__metadata__ values must be strings; 'step' is number"}),
    [](const testing::TestParamInfo<BrokenFile>& param_info) { return std::string(param_info.param.name); });

TEST(Safetensors, MissingFileIsReported) {
  const std::string msg = error_of([] { SafetensorsFile file("/nonexistent/dir/x.safetensors"); });
  EXPECT_NE(msg.find("/nonexistent/dir/x.safetensors: cannot open: No such file"), std::string::npos) << msg;
}

// A FIFO is refused at once (opening it for reading used to wait for a writer forever).
TEST(Safetensors, FifoIsNotAFile) {
  TempDir dir;
  const std::string path = dir.file("pipe.safetensors");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const std::string msg = error_of([&] { SafetensorsFile file(path); });
  EXPECT_NE(msg.find(path + ": not a regular file"), std::string::npos) << msg;
}

TEST(Safetensors, HandWrittenValidFileIsAccepted) {
  TempDir dir;
  // Unpadded header, tensors out of offset order, a gap between them and an empty tensor.
  const std::string header = R"({"b": {"dtype": "U8", "shape": [2], "data_offsets": [20, 22]}, )" + kW +
                             R"(, "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}})";
  write_bytes(dir.file("ok.safetensors"), raw_safetensors(header, 22));
  const SafetensorsFile file(dir.file("ok.safetensors"));
  EXPECT_EQ(file.names(), (std::vector<std::string>{"b", "e", "w"}));
  EXPECT_EQ(file.bytes("b").size(), 2u);
  EXPECT_TRUE(file.metadata().empty());
}

}  // namespace
}  // namespace tpserve
