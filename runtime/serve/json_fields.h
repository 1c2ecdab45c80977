// JsonFields: typed, range-checked reads of one JSON object of a request, each failure an ApiError (400)
// naming the field's full path ("stream_options.include_usage") with what was given and what is allowed.
// An absent field and an explicit null both read as "not given".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpserve::serve {

// Most levels of nested lists and objects a request body may have. What the server does with a value (its
// dump in a message, the chat template's rendering) recurses once a level, so deeper bodies are refused
// before they are parsed; real requests (tool schemas included) stay far below it.
inline constexpr int kMaxJsonDepth = 256;

// A request body as JSON; 400 invalid_json when it is not JSON (numbers beyond a double included) or is
// nested deeper than kMaxJsonDepth.
nlohmann::ordered_json parse_json_body(const std::string& body);

// The deepest nesting of lists and objects in JSON text (brackets inside strings not counted); the text need
// not be valid JSON.
int json_nesting_depth(std::string_view text);

// "a string", "an integer", "null", ... for messages.
std::string describe_json(const nlohmann::ordered_json& value);

class JsonFields {
 public:
  // The object at `path` (empty for the request body itself); throws when it is not an object.
  JsonFields(const nlohmann::ordered_json& object, std::string path);

  std::string path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  // The field, or nullptr when absent or null.
  const nlohmann::ordered_json* get(const std::string& key) const;

  std::optional<bool> boolean(const std::string& key) const;
  std::optional<std::string> string(const std::string& key) const;
  // A finite number in [lo, hi] (or (lo, hi] with lo_open).
  std::optional<double> number(const std::string& key, double lo, double hi, bool lo_open = false) const;
  // An integer (a whole float such as 2.0 is accepted) in [lo, hi].
  std::optional<int64_t> integer(const std::string& key, int64_t lo, int64_t hi) const;

  // A field we do not support: accepted when absent, null or equal to its neutral value, else 400.
  void refuse_unless_neutral(const std::string& key, const nlohmann::ordered_json& neutral,
                             const std::string& why) const;

 private:
  const nlohmann::ordered_json& object_;
  std::string path_;
};

// Reads a JSON integer (or whole float) into int64; false when it is not one or does not fit.
bool json_to_int64(const nlohmann::ordered_json& value, int64_t& out);

}  // namespace tpserve::serve
