// A kernel's name as people read it in reports, from its mangled name (what CUPTI records and cudaFuncGetName
// give).
#pragma once

#include <string>

namespace tpserve {

// "void ns::(anonymous namespace)::gemv_kernel<...>(Params)" -> "gemv_kernel"; "?" for nullptr; the mangled
// name where it does not demangle.
std::string short_kernel_name(const char* mangled);

}  // namespace tpserve
