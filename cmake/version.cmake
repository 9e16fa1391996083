# The commit strider was built from, for `strider --version`.
execute_process(
  COMMAND git describe --always --dirty --abbrev=12
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
  OUTPUT_VARIABLE STRIDER_GIT_COMMIT
  OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET)
if(NOT STRIDER_GIT_COMMIT)
  set(STRIDER_GIT_COMMIT "unknown")
endif()
