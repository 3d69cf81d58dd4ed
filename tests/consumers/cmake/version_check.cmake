# Checks devtapConfigVersion.cmake's answers without a project:
#   cmake -DVERSION_FILE=<prefix>/lib/.../cmake/devtap/devtapConfigVersion.cmake -P version_check.cmake
# Asked for nothing, for its own major.minor or exact version: compatible. For the next minor (before
# 1.0) or the next major, or a range that ends below it: not.
function(ask wanted expected)
  set(PACKAGE_FIND_VERSION "${wanted}")
  if(wanted MATCHES "\\.\\.\\.")
    string(REGEX MATCH "^(.*)\\.\\.\\.(<?)(.*)$" _ "${wanted}")
    set(PACKAGE_FIND_VERSION_RANGE "${wanted}")
    set(PACKAGE_FIND_VERSION_MIN "${CMAKE_MATCH_1}")
    set(PACKAGE_FIND_VERSION_MAX "${CMAKE_MATCH_3}")
    set(PACKAGE_FIND_VERSION_RANGE_MAX INCLUDE)
    if(CMAKE_MATCH_2 STREQUAL "<")
      set(PACKAGE_FIND_VERSION_RANGE_MAX EXCLUDE)
    endif()
    set(PACKAGE_FIND_VERSION "${CMAKE_MATCH_1}")
  endif()
  include("${VERSION_FILE}")
  if(NOT PACKAGE_VERSION_COMPATIBLE STREQUAL expected)
    message(FATAL_ERROR "devtap ${PACKAGE_VERSION}, asked for '${wanted}': compatible=${PACKAGE_VERSION_COMPATIBLE}, expected ${expected}")
  endif()
  message(STATUS "devtap ${PACKAGE_VERSION}, asked for '${wanted}': compatible=${PACKAGE_VERSION_COMPATIBLE}")
endfunction()

include("${VERSION_FILE}")  # for PACKAGE_VERSION
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _ "${PACKAGE_VERSION}")
set(major "${CMAKE_MATCH_1}")
set(minor "${CMAKE_MATCH_2}")
math(EXPR next_major "${major} + 1")
math(EXPR next_minor "${minor} + 1")
set(minor_bump_breaks TRUE)  # before 1.0, every minor release may break
if(major GREATER 0)
  set(minor_bump_breaks FALSE)
endif()

ask("" TRUE)
ask("${major}.${minor}" TRUE)
ask("${PACKAGE_VERSION}" TRUE)
ask("${next_major}.0" FALSE)
if(minor_bump_breaks)
  ask("${major}.${next_minor}" FALSE)
endif()
ask("${major}.${minor}...${next_major}.0" TRUE)
ask("${major}.${minor}...<${PACKAGE_VERSION}" FALSE)
