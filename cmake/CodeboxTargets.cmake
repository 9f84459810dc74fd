# How codebox's own targets are declared. The layering the build enforces:
#   * include/ (the public API) is on the include path of everyone who links codebox::box;
#   * src/ is private: every codebox target sees it, no consumer does (it is wrapped in
#     BUILD_INTERFACE and linked PRIVATE, so it is in no exported or installed interface).
# Adding a source file to a library is one word in its codebox_library() call.

# The public headers, for consumers in the build tree and after install.
add_library(codebox_headers INTERFACE)
target_include_directories(codebox_headers INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(codebox_headers PROPERTIES EXPORT_NAME headers)

# What codebox's own code sees: src/ beside include/, and nlohmann/json (header-only, used
# inside the libraries only, so no consumer needs it).
add_library(codebox_internal INTERFACE)
target_include_directories(codebox_internal INTERFACE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(codebox_internal INTERFACE codebox_headers nlohmann_json::nlohmann_json)

function(_codebox_internal target)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:codebox_internal>)
endfunction()

# codebox_library(NAME SOURCES...): a static library of codebox's own (codebox_X is exported
# as codebox::X where it is installed).
function(codebox_library name)
  add_library(${name} STATIC ${ARGN})
  _codebox_internal(${name})
  string(REGEX REPLACE "^codebox_" "" export_name ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${export_name})
  add_library(codebox::${export_name} ALIAS ${name})
endfunction()

# codebox_executable(NAME SOURCES...): a program of codebox's own (the CLI, a helper, a
# fuzzer, a benchmark).
function(codebox_executable name)
  add_executable(${name} ${ARGN})
  _codebox_internal(${name})
endfunction()

# codebox_test(NAME [RUN_SERIAL] SOURCES... LIBS ...): a GoogleTest binary registered with
# CTest; nothing unless CODEBOX_TESTS is on. RUN_SERIAL: its tests run with no other test at
# once (for tests of host-wide state that any other test's first box would touch).
function(codebox_test name)
  if(NOT CODEBOX_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "RUN_SERIAL" "" "SOURCES;LIBS" ${ARGN})
  codebox_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600
                       RUN_SERIAL ${T_RUN_SERIAL})
endfunction()

# The processes the library starts; linking codebox::box builds them. Global properties, so
# that codebox_bundle() sees them from the scope of the project that calls it.
set(CODEBOX_HELPERS codebox-agent codebox-jail codebox-vm-keeper)
set_property(GLOBAL PROPERTY CODEBOX_HELPERS ${CODEBOX_HELPERS})
set_property(GLOBAL PROPERTY CODEBOX_RECIPES_DIR ${PROJECT_SOURCE_DIR}/images)

# codebox_bundle(TARGET): for a project that adds codebox with add_subdirectory. After TARGET
# is built, its folder gets codebox-libexec/ (the helper binaries) and codebox-images (a link
# to the recipes), the bundle layout the library looks for beside the program that links it
# (base/paths.h). An installed codebox (find_package) needs no bundle.
function(codebox_bundle target)
  get_property(helpers GLOBAL PROPERTY CODEBOX_HELPERS)
  get_property(recipes GLOBAL PROPERTY CODEBOX_RECIPES_DIR)
  add_dependencies(${target} ${helpers})
  set(dir $<TARGET_FILE_DIR:${target}>)
  set(copies)
  foreach(helper ${helpers})
    list(APPEND copies COMMAND ${CMAKE_COMMAND} -E copy_if_different
         $<TARGET_FILE:${helper}> ${dir}/codebox-libexec/${helper})
  endforeach()
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}/codebox-libexec
    ${copies}
    COMMAND ${CMAKE_COMMAND} -E create_symlink ${recipes} ${dir}/codebox-images
    VERBATIM)
endfunction()
