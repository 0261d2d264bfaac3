# Helpers shared by the project's CMake files.

# All backends land in ${CMAKE_BINARY_DIR}/backends/<name>/libtriton_<name>.so,
# the layout the backend search order expects under --backend-directory.
set(NRD_BACKEND_DIR ${CMAKE_BINARY_DIR}/backends)
set(NRD_TEST_BACKEND_DIR ${CMAKE_BINARY_DIR}/test_backends)
set(NRD_TEST_CACHE_DIR ${CMAKE_BINARY_DIR}/test_caches)
set(NRD_TEST_AGENT_DIR ${CMAKE_BINARY_DIR}/test_repoagents)

# nrd_add_backend(<name> <sources>... [TEST]) builds libtriton_<name>.so
# against only the public headers (and backend_utils). TEST puts it in the
# test-only backend directory so it never ships.
function(nrd_add_backend name)
  cmake_parse_arguments(ARG "TEST" "" "" ${ARGN})
  add_library(triton_${name} SHARED ${ARG_UNPARSED_ARGUMENTS})
  set_property(GLOBAL APPEND PROPERTY NRD_BACKEND_TARGETS triton_${name})
  target_include_directories(triton_${name} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(triton_${name} PRIVATE tritonserver nrd_backend_utils Threads::Threads)
  target_compile_options(triton_${name} PRIVATE -fvisibility=hidden)
  if(ARG_TEST)
    set(outdir ${NRD_TEST_BACKEND_DIR}/${name})
  else()
    set(outdir ${NRD_BACKEND_DIR}/${name})
  endif()
  set_target_properties(triton_${name} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${outdir}
    OUTPUT_NAME triton_${name})
endfunction()
