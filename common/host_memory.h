// The host memory the kernel says a new allocation can still get without swapping (MemAvailable).
#pragma once

#include <cstddef>
#include <optional>

namespace tpserve {

// MemAvailable from /proc/meminfo in bytes; nullopt where it cannot be read (not Linux, an old kernel).
std::optional<size_t> available_host_memory();

}  // namespace tpserve
