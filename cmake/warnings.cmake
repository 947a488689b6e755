# SPDX-License-Identifier: Apache-2.0
# The warning set of docs/style.md §10, as an interface target every sluice target links.
add_library(sl_warnings INTERFACE)
target_compile_options(sl_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
  -Wmissing-declarations -Wold-style-definition -Wpointer-arith -Wcast-qual -Wwrite-strings
  -Wformat=2 -Wundef -Wvla -Wimplicit-fallthrough -Wdouble-promotion
  -Werror=implicit-function-declaration -Werror=incompatible-pointer-types -Werror)
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  target_compile_options(sl_warnings INTERFACE -Wlogical-op -Wduplicated-cond -Wduplicated-branches)
elseif(CMAKE_C_COMPILER_ID STREQUAL "Clang")
  target_compile_options(sl_warnings INTERFACE -Wcomma -Wshorten-64-to-32)
endif()
