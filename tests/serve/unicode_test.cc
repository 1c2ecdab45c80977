// UTF-8 helpers and NFC: hand-picked cases, and every NFC line of the Unicode Consortium's own conformance
// file (NormalizationTest.txt from Debian's unicode-data package; skipped with a reason when absent).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "runtime/serve/unicode_nfc.h"
#include "runtime/serve/utf8.h"

namespace tpserve::serve {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8, RepairReplacesEachMaximalIllFormedSubpart) {
  EXPECT_EQ(repair_utf8("abc"), "abc");
  EXPECT_EQ(repair_utf8("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(repair_utf8("a\xFF"
                        "b"),
            "a" + kReplacement + "b");
  EXPECT_EQ(repair_utf8("\xE2\x82"
                        "A"),
            kReplacement + "A");  // truncated 3-byte sequence: one U+FFFD
  EXPECT_EQ(repair_utf8("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);  // surrogate
  EXPECT_EQ(repair_utf8("\xF0\x80\x80"), kReplacement + kReplacement + kReplacement);  // overlong
  EXPECT_EQ(repair_utf8("\xC0\xAF"), kReplacement + kReplacement);
  EXPECT_EQ(repair_utf8("\xF4\x90\x80\x80"), kReplacement + kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(repair_utf8("\xF0\x9F\x98"), kReplacement);
}

TEST(Utf8, IncompleteTailIsOnlyAValidPrefix) {
  EXPECT_EQ(utf8_incomplete_tail(""), 0u);
  EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xC3"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\xE0\x80"), 0u);  // can never complete (overlong): not held back
  EXPECT_EQ(utf8_incomplete_tail("\x80"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\xC3\xE2\x82"), 2u);
}

TEST(Utf8, DecodeAndEncodeRoundTrip) {
  std::vector<char32_t> cps;
  ASSERT_TRUE(decode_utf8("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80", cps));
  EXPECT_EQ(cps, (std::vector<char32_t>{U'a', 0xE9, 0x4E2D, 0x1F600}));
  std::string back;
  for (char32_t c : cps) append_utf8(back, c);
  EXPECT_EQ(back, "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
  EXPECT_FALSE(decode_utf8("\xC3", cps));
  EXPECT_TRUE(is_valid_utf8("\xE2\x82\xAC"));
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));
}

TEST(Nfc, HandPickedCases) {
  EXPECT_EQ(to_nfc("plain ASCII"), "plain ASCII");
  EXPECT_EQ(to_nfc("e\xCC\x81"), "\xC3\xA9");                                 // e + U+0301 -> é
  EXPECT_EQ(to_nfc("\xE2\x84\xAB"), "\xC3\x85");                              // U+212B ANGSTROM SIGN -> Å
  EXPECT_EQ(to_nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");                          // ﬁ: compatibility only, kept
  EXPECT_EQ(to_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  EXPECT_EQ(to_nfc("\xEA\xB0\x81"), "\xEA\xB0\x81");
  // a + U+0302 + U+0323 and a + U+0323 + U+0302 both give ậ (U+1EAD).
  EXPECT_EQ(to_nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");
  EXPECT_EQ(to_nfc("a\xCC\xA3\xCC\x82"), "\xE1\xBA\xAD");
  EXPECT_EQ(to_nfc("\xCC\x81"
                   "a"),
            "\xCC\x81"
            "a");  // a leading combining mark stays
  EXPECT_EQ(canonical_combining_class(0x301), 230);
  EXPECT_EQ(canonical_combining_class(U'a'), 0);
  EXPECT_THROW(to_nfc("\xCC\x81\xFF"), Error);
}

// A long run of combining marks whose classes alternate (U+0301 is 230, U+0316 220): reordered by a sort
// of the run, not by swaps (quadratic: 80k pairs took 21 s). Ordered, the run is a + 220s + 230s, and the
// first 230 mark composes with the a (U+00E1); the others stay blocked behind it.
TEST(Nfc, LongRunsOfCombiningMarksSortQuickly) {
  constexpr int kPairs = 400000;
  std::string text = "a";
  for (int i = 0; i < kPairs; ++i) text += "\xCC\x81\xCC\x96";
  const auto start = std::chrono::steady_clock::now();
  const std::string nfc = to_nfc(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);  // well under a second; swaps would take hours
  std::string expected = "\xC3\xA1";
  for (int i = 0; i < kPairs; ++i) expected += "\xCC\x96";
  for (int i = 1; i < kPairs; ++i) expected += "\xCC\x81";
  EXPECT_TRUE(nfc == expected) << "length " << nfc.size() << " against " << expected.size();
}

std::string hex_to_utf8(const std::string& field) {
  std::stringstream ss(field);
  std::string out;
  for (std::string hex; ss >> hex;) append_utf8(out, static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
  return out;
}

// NormalizationTest.txt: c1;c2;c3;c4;c5; with c2 == toNFC(c1) == toNFC(c2) == toNFC(c3) and
// c4 == toNFC(c4) == toNFC(c5). Part 1 lists every character with a decomposition.
TEST(Nfc, UnicodeConformanceFile) {
  const std::string path = "/usr/share/unicode/NormalizationTest.txt.bz2";
  if (!std::filesystem::exists(path) || std::system("command -v bzcat >/dev/null 2>&1") != 0)
    GTEST_SKIP() << path << " (Debian package unicode-data, installed by launch/setup) or bzcat is missing";
  FILE* in = popen(("bzcat " + path).c_str(), "r");
  ASSERT_NE(in, nullptr);
  char buffer[4096];
  int lines = 0, failures = 0;
  while (std::fgets(buffer, sizeof(buffer), in) != nullptr) {
    std::string line(buffer);
    if (line.empty() || line[0] == '#' || line[0] == '@') continue;
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string field; c.size() < 5 && std::getline(ss, field, ';');) c.push_back(hex_to_utf8(field));
    if (c.size() < 5) continue;
    ++lines;
    const bool ok = to_nfc(c[0]) == c[1] && to_nfc(c[1]) == c[1] && to_nfc(c[2]) == c[1] &&
                    to_nfc(c[3]) == c[3] && to_nfc(c[4]) == c[3];
    if (!ok && ++failures <= 5) ADD_FAILURE() << "NFC differs on: " << line;
  }
  pclose(in);
  EXPECT_GT(lines, 15000);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace tpserve::serve
