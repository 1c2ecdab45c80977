#pragma once

namespace tpserve {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace tpserve
