// A JSON schema's string `pattern` as a regex of the string's content between its quotes: the pattern
// with every character set cut to what a JSON string holds unescaped (no '"', no '\', no U+0000..U+001F),
// so that no answer it admits is broken JSON (a pattern's `.` or `[^@]` would otherwise let the model write
// a bare quote). Characters that JSON strings must escape cannot be matched at all (not even escaped).
#pragma once

#include <string>
#include <string_view>

namespace tpserve::serve {

// Throws tpserve::Error for a pattern that does not parse, or that then matches nothing.
std::string json_string_pattern(std::string_view pattern);

}  // namespace tpserve::serve
