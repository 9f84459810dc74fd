# The ctest test `layering`: a file under src/X may include a header of src/Y only when the
# target that compiles it links (directly or through others) a target of src/Y, and nothing
# under src/ includes tests/ (tests/layering/check_layering.py). The build's own targets and
# their links are written here, at the end of configure, for the checker to read.

function(_codebox_layering_collect dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  set(lines "")
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(source_dir ${t} SOURCE_DIR)
    get_target_property(sources ${t} SOURCES)
    get_target_property(links ${t} LINK_LIBRARIES)
    if(NOT links)
      set(links "")
    endif()
    if(NOT sources)  # a headers-only library
      set(sources "")
    endif()
    # One line per target: NAME|SOURCE_DIR|SOURCES (;)|LINKS (;). Generator expressions in
    # the links ($<BUILD_INTERFACE:codebox_internal>) name no codebox folder and are dropped.
    # $<BUILD_INTERFACE:X> (a headers-only link) is a link for the checker: X is kept.
    string(REGEX REPLACE "\\$<BUILD_INTERFACE:([^>$]*)>" "\\1" links "${links}")
    string(GENEX_STRIP "${links}" links)
    string(APPEND lines "${t}|${source_dir}|${sources}|${links}\n")
  endforeach()
  foreach(sub ${subdirs})
    _codebox_layering_collect(${sub} sub_lines)
    string(APPEND lines "${sub_lines}")
  endforeach()
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

_codebox_layering_collect(${PROJECT_SOURCE_DIR} _codebox_targets)
file(WRITE ${PROJECT_BINARY_DIR}/layering_targets.txt "${_codebox_targets}")

find_program(CODEBOX_LAYERING_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(CODEBOX_TESTS AND CODEBOX_LAYERING_PYTHON3)
  add_test(NAME layering
           COMMAND ${CODEBOX_LAYERING_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/layering/check_layering.py
                   ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/layering_targets.txt)
  set_tests_properties(layering PROPERTIES TIMEOUT 120)
endif()
