// ApiError: a request the server refuses, carried to the HTTP layer as an exception and answered as
// OpenAI does: {"error": {"message", "type", "param", "code"}} with the HTTP status. `param` names the
// offending field as the client wrote it ("temperature", "messages[1].content", "stop[0]").
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace tpserve::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // OpenAI's error type for the status: invalid_request_error (400, 413), not_found_error (404), ...
  const char* type() const {
    switch (status_) {
      case 400:
      case 413:
        return "invalid_request_error";
      case 404:
        return "not_found_error";
      case 405:
        return "method_not_allowed_error";
      case 503:
        return "service_unavailable_error";
      default:
        return status_ >= 500 ? "server_error" : "invalid_request_error";
    }
  }
  nlohmann::ordered_json body() const {
    nlohmann::ordered_json error = {
        {"message", what()},
        {"type", type()},
        {"param", param_.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param_)},
        {"code", code_.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(code_)}};
    return {{"error", error}};
  }

 private:
  int status_;
  std::string param_;
  std::string code_;
};

// 400 naming the field: bad_request("temperature", "must be in [0, 2], got 3").
[[noreturn]] inline void bad_request(const std::string& param, const std::string& message,
                                     const std::string& code = "invalid_value") {
  throw ApiError(400, param.empty() ? message : param + ": " + message, param, code);
}

}  // namespace tpserve::serve
