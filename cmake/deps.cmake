# SPDX-License-Identifier: Apache-2.0
# Third-party libraries. Debian 12 packages through pkg-config, and llhttp 9.2 from Debian 13's
# libllhttp-dev, unpacked into ${SLUICE_DEPS_DIR}/llhttp by tools/deps.sh (Debian 12's llhttp 8.1
# accepts obs-fold and other ambiguous framing; see README.md).
find_package(PkgConfig REQUIRED)
pkg_check_modules(UV REQUIRED IMPORTED_TARGET libuv>=1.44)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson>=2.14)
pkg_check_modules(CRYPTO REQUIRED IMPORTED_TARGET libcrypto>=3.0 libssl>=3.0)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium>=1.0.18)
pkg_check_modules(SQLITE REQUIRED IMPORTED_TARGET sqlite3>=3.40)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl>=7.88)
pkg_check_modules(ARCHIVE REQUIRED IMPORTED_TARGET libarchive>=3.6)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka>=1.1.5)
pkg_check_modules(NFTABLES REQUIRED IMPORTED_TARGET libnftables>=1.0)
find_package(Threads REQUIRED)

set(SLUICE_LLHTTP_ROOT "${SLUICE_DEPS_DIR}/llhttp/usr")
file(GLOB _llhttp_lib "${SLUICE_LLHTTP_ROOT}/lib/*/libllhttp.a")
if(NOT EXISTS "${SLUICE_LLHTTP_ROOT}/include/llhttp.h" OR NOT _llhttp_lib)
  message(FATAL_ERROR
    "llhttp 9.2 not found under ${SLUICE_LLHTTP_ROOT}.\n"
    "Run `tools/deps.sh` (or `make build`), which fetches Debian 13's libllhttp-dev into the "
    "build tree; Debian 12's own llhttp 8.1 is not strict enough for a proxy.")
endif()
list(GET _llhttp_lib 0 _llhttp_lib)
file(STRINGS "${SLUICE_LLHTTP_ROOT}/include/llhttp.h" _llhttp_ver REGEX "define LLHTTP_VERSION_(MAJOR|MINOR) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+).*" "\\1" _llhttp_major "${_llhttp_ver}")
string(REGEX REPLACE ".*MINOR ([0-9]+).*" "\\1" _llhttp_minor "${_llhttp_ver}")
if(_llhttp_major LESS 9 OR (_llhttp_major EQUAL 9 AND _llhttp_minor LESS 2))
  message(FATAL_ERROR "llhttp ${_llhttp_major}.${_llhttp_minor} found; 9.2 or newer is required")
endif()
add_library(sl_llhttp STATIC IMPORTED GLOBAL)
set_target_properties(sl_llhttp PROPERTIES
  IMPORTED_LOCATION "${_llhttp_lib}"
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${SLUICE_LLHTTP_ROOT}/include"
  INTERFACE_INCLUDE_DIRECTORIES "${SLUICE_LLHTTP_ROOT}/include")
message(STATUS "llhttp ${_llhttp_major}.${_llhttp_minor}: ${_llhttp_lib}")
