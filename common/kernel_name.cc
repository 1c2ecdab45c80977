#include "common/kernel_name.h"

#include <cxxabi.h>

#include <cstdlib>

namespace tpserve {

std::string short_kernel_name(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  const std::string anonymous = "(anonymous namespace)::";
  for (size_t at; (at = name.find(anonymous)) != std::string::npos;) name.erase(at, anonymous.size());
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);  // a template's return type
  name = name.substr(0, name.find_first_of("<("));
  const size_t colon = name.rfind("::");
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

}  // namespace tpserve
