# Header-only dependencies (nlohmann-json, CLI11, cpp-httplib): the system package's CMake config when it is
# installed, else headers under .deps/include (launch/fetch-header-deps unpacks Debian's packages there for
# machines where nothing can be installed, such as the GPU machine).
set(TPSERVE_DEPS_INCLUDE "${PROJECT_SOURCE_DIR}/.deps/include")

function(tpserve_header_dep target package header)
  find_package(${package} QUIET CONFIG)
  if(TARGET ${target})
    return()
  endif()
  find_path(_dir ${header} PATHS ${TPSERVE_DEPS_INCLUDE} /usr/include NO_CACHE)
  if(NOT _dir)
    message(FATAL_ERROR "${package}: ${header} not found; run launch/setup (apt) or launch/fetch-header-deps")
  endif()
  string(REPLACE "::" "_" _name ${target})
  add_library(${_name} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${_name} INTERFACE ${_dir})
  add_library(${target} ALIAS ${_name})
  message(STATUS "${package}: headers from ${_dir}")
endfunction()

tpserve_header_dep(nlohmann_json::nlohmann_json nlohmann_json nlohmann/json.hpp)
tpserve_header_dep(CLI11::CLI11 CLI11 CLI/CLI.hpp)
