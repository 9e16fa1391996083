# The CLI and the server are written on strider's public API alone: every quoted include in
# tools/strider or tools/serve is a header of the tools themselves (tools/strider,
# tools/serve) or a public header (include/strider/...). Run as
#   cmake -DTOOLS_DIR=tools/strider -P public_api_only.cmake
file(GLOB sources "${TOOLS_DIR}/*.cc" "${TOOLS_DIR}/*.h")
set(bad "")
foreach(source IN LISTS sources)
  file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${line}")
    if(NOT header MATCHES "^strider/" AND NOT EXISTS "${TOOLS_DIR}/../strider/${header}"
       AND NOT EXISTS "${TOOLS_DIR}/../serve/${header}")
      get_filename_component(name "${source}" NAME)
      list(APPEND bad "${name}: ${header}")
    endif()
  endforeach()
endforeach()
list(LENGTH sources count)
if(count EQUAL 0)
  message(FATAL_ERROR "no sources found in '${TOOLS_DIR}'")
endif()
if(bad)
  string(REPLACE ";" "\n  " listed "${bad}")
  message(FATAL_ERROR "the tools include strider internals, not the public API:\n  ${listed}")
endif()
message(STATUS "${count} tool files include only public headers")
