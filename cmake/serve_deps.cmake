# Libraries of runtime/serve: PCRE2 (8-bit, the tokenizer's pre-tokenizer regex) and cpp-httplib (the HTTP
# server). Debian builds cpp-httplib as a shared library (libcpp-httplib.so) whose header declares what the
# library defines, so it is linked through pkg-config with the same feature macros (OpenSSL, zlib, brotli)
# the library was built with. On a machine where nothing can be installed, launch/fetch-header-deps unpacks
# both Debian packages (headers and shared libraries) under .deps.
find_package(PkgConfig REQUIRED)

pkg_check_modules(PCRE2 IMPORTED_TARGET libpcre2-8)
if(NOT PCRE2_FOUND)
  find_path(_pcre2_include pcre2.h PATHS ${TPSERVE_DEPS_INCLUDE} NO_CACHE)
  find_library(_pcre2_lib NAMES pcre2-8 libpcre2-8.so.0 PATHS ${PROJECT_SOURCE_DIR}/.deps/lib NO_CACHE)
  if(NOT _pcre2_include OR NOT _pcre2_lib)
    message(FATAL_ERROR "PCRE2 (libpcre2-8) not found; run launch/setup (apt: libpcre2-dev) or launch/fetch-header-deps")
  endif()
  add_library(tpserve_pcre2 INTERFACE IMPORTED GLOBAL)
  target_include_directories(tpserve_pcre2 INTERFACE ${_pcre2_include})
  target_link_libraries(tpserve_pcre2 INTERFACE ${_pcre2_lib})
  add_library(PkgConfig::PCRE2 ALIAS tpserve_pcre2)
endif()

pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
if(NOT HTTPLIB_FOUND)
  find_path(_httplib_include httplib.h PATHS ${TPSERVE_DEPS_INCLUDE} NO_CACHE)
  find_library(_httplib_lib NAMES cpp-httplib libcpp-httplib.so.0.11 PATHS ${PROJECT_SOURCE_DIR}/.deps/lib NO_CACHE)
  if(NOT _httplib_include OR NOT _httplib_lib)
    message(FATAL_ERROR "cpp-httplib not found; run launch/setup (apt: libcpp-httplib-dev) or launch/fetch-header-deps")
  endif()
  add_library(tpserve_httplib INTERFACE IMPORTED GLOBAL)
  target_include_directories(tpserve_httplib INTERFACE ${_httplib_include})
  target_link_libraries(tpserve_httplib INTERFACE ${_httplib_lib} Threads::Threads)
  # The feature macros must match the library's build (Debian's: OpenSSL, zlib, brotli).
  target_compile_definitions(tpserve_httplib INTERFACE CPPHTTPLIB_OPENSSL_SUPPORT CPPHTTPLIB_ZLIB_SUPPORT
                             CPPHTTPLIB_BROTLI_SUPPORT)
  add_library(PkgConfig::HTTPLIB ALIAS tpserve_httplib)
endif()
message(STATUS "tpserve: PCRE2 ${PCRE2_VERSION}, cpp-httplib ${HTTPLIB_VERSION}")
