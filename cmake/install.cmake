# Installing Nereid: the install tree (`cmake --install`), the CMake package
# and pkg-config files backend authors build against, and the Debian package
# (`cpack`). docs/deploy.md describes the result.
#
# Included from the top-level CMakeLists.txt before the subdirectories, so
# that NRD_VERSION reaches every source; the install rules themselves are
# deferred to the end of the top-level directory, when every target exists.
#
# The tree, laid out like Triton's /opt/tritonserver:
#   bin/nereid, bin/nrd_perf            RUNPATH $ORIGIN/../lib
#   lib/libtritonserver.so               the core
#   lib/libnrd_backend_utils.a           backend utilities (static)
#   lib/cmake/Nereid/, lib/pkgconfig/    for out-of-tree backends
#   include/triton/core/*.h              the public API
#   include/nereid/backend_utils.h
#   backends/<name>/libtriton_<name>.so  each shipped backend, with its own
#                                        libraries beside it (ONNX Runtime's
#                                        CPU build, or its GPU build with
#                                        NRD_INSTALL_ONNXRUNTIME_GPU)
# The installed nereid finds <prefix>/backends from its own path
# (src/server/main.c), so it needs no --backend-directory.

# `nereid --version` and the core's server metadata both print this.
add_compile_definitions(NRD_VERSION="${PROJECT_VERSION}")

# The targets that ship, by name: the one place to change when one is
# renamed. Shipped backends are found by themselves: every nrd_add_backend
# target whose output lands in ${NRD_BACKEND_DIR} (test backends do not).
set(NRD_INSTALL_PROGRAMS nereid nrd_perf)
set(NRD_INSTALL_CORE_LIBRARY tritonserver)
set(NRD_INSTALL_BACKEND_UTILS nrd_backend_utils)
# The pytorch backend ships only on request: its libtorch is 482 MB.
option(NRD_INSTALL_PYTORCH "Install the pytorch backend and libtorch beside it" OFF)
# ONNX Runtime's GPU build (.deps/onnxruntime-gpu, 299 MiB: its CUDA
# provider alone is 284 MB) beside the onnxruntime and stateful backends,
# instead of the CPU library, so that KIND_GPU ONNX models run on the CUDA
# provider (docs/gpu.md). Without the option the same files are the install
# component "onnxruntime_gpu", left out of a plain install:
#   cmake --install build --prefix P --component onnxruntime_gpu
# puts them over an installed tree's CPU library.
option(NRD_INSTALL_ONNXRUNTIME_GPU "Install ONNX Runtime's GPU build beside the ONNX backends instead of the CPU one" OFF)
set(NRD_ONNXRUNTIME_GPU_DIR ${PROJECT_SOURCE_DIR}/.deps/onnxruntime-gpu
    CACHE PATH "ONNX Runtime's GPU build: libonnxruntime.so.1 and its CUDA provider libraries")
set(NRD_ONNXRUNTIME_GPU_LIBS libonnxruntime.so.1 libonnxruntime_providers_shared.so libonnxruntime_providers_cuda.so)
set(NRD_INSTALL_BACKEND_UTILS_HEADER ${PROJECT_SOURCE_DIR}/src/backend_utils/nereid/backend_utils.h)

include(CMakePackageConfigHelpers)

# `make install` and cpack (its "preinstall" step) do not build first:
# build, then install or package. Otherwise cpack in ctest's deb test would
# rebuild a stale tree under the tests running beside it.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

function(nrd_install_rules)
  set_target_properties(${NRD_INSTALL_PROGRAMS} PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
  install(TARGETS ${NRD_INSTALL_PROGRAMS} RUNTIME DESTINATION bin)
  install(TARGETS ${NRD_INSTALL_CORE_LIBRARY} LIBRARY DESTINATION lib)
  install(TARGETS ${NRD_INSTALL_BACKEND_UTILS} ARCHIVE DESTINATION lib)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/triton DESTINATION include
          FILES_MATCHING PATTERN "*.h")
  install(FILES ${NRD_INSTALL_BACKEND_UTILS_HEADER} DESTINATION include/nereid)

  get_property(backends GLOBAL PROPERTY NRD_BACKEND_TARGETS)
  foreach(t ${backends})
    get_target_property(dir ${t} LIBRARY_OUTPUT_DIRECTORY)
    if(t STREQUAL "triton_pytorch" AND NOT NRD_INSTALL_PYTORCH)
      continue()
    endif()
    if(dir MATCHES "^${NRD_BACKEND_DIR}/([^/]+)$")
      install(TARGETS ${t} LIBRARY DESTINATION backends/${CMAKE_MATCH_1})
    endif()
  endforeach()
  # A backend's own libraries go beside it, where it opens them; a backend
  # with more (the Python backend's stub and module) adds its line here.
  if(NOT NRD_INSTALL_ONNXRUNTIME_GPU)
    if(TARGET triton_onnxruntime AND EXISTS "${NRD_ONNXRUNTIME_LIBRARY}")
      install(FILES ${NRD_ONNXRUNTIME_LIBRARY} DESTINATION backends/onnxruntime)
    endif()
    if(TARGET triton_stateful AND EXISTS "${NRD_ONNXRUNTIME_LIBRARY}")
      install(FILES ${NRD_ONNXRUNTIME_LIBRARY} DESTINATION backends/stateful)
    endif()
  endif()
  # The GPU build goes to backends/onnxruntime; backends/stateful gets
  # relative links to it rather than a second 299 MiB copy. ONNX Runtime
  # looks for its provider libraries in the folder of the path it was
  # opened by, so each of the three has its link there.
  if(TARGET triton_onnxruntime AND EXISTS "${NRD_ONNXRUNTIME_GPU_DIR}/libonnxruntime_providers_cuda.so")
    set(opt EXCLUDE_FROM_ALL)
    if(NRD_INSTALL_ONNXRUNTIME_GPU)
      set(opt "")
    endif()
    list(TRANSFORM NRD_ONNXRUNTIME_GPU_LIBS PREPEND ${NRD_ONNXRUNTIME_GPU_DIR}/ OUTPUT_VARIABLE gpu_libs)
    install(FILES ${gpu_libs} DESTINATION backends/onnxruntime COMPONENT onnxruntime_gpu ${opt})
    if(TARGET triton_stateful)
      install(CODE "
        file(MAKE_DIRECTORY \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/backends/stateful)
        foreach(lib ${NRD_ONNXRUNTIME_GPU_LIBS})
          set(link \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/backends/stateful/\${lib})
          file(REMOVE \${link})
          file(CREATE_LINK ../onnxruntime/\${lib} \${link} SYMBOLIC)
        endforeach()" COMPONENT onnxruntime_gpu ${opt})
    endif()
  elseif(NRD_INSTALL_ONNXRUNTIME_GPU)
    message(FATAL_ERROR "NRD_INSTALL_ONNXRUNTIME_GPU: no ONNX Runtime GPU build in ${NRD_ONNXRUNTIME_GPU_DIR} "
                        "(scripts/fetch_pypi.sh puts it in .deps/onnxruntime-gpu)")
  endif()
  if(TARGET triton_fil)
    file(GLOB tl_libs ${NRD_TREELITE_DIR}/libtreelite.so ${NRD_TREELITE_DIR}/libgomp-*.so*)
    if(tl_libs)
      install(FILES ${tl_libs} DESTINATION backends/fil)
    endif()
  endif()
  # libtorch (482 MB) only on request: -DNRD_INSTALL_PYTORCH=ON.
  if(TARGET triton_pytorch AND NRD_INSTALL_PYTORCH)
    foreach(lib ${NRD_PYTORCH_LIBS})
      install(FILES ${NRD_PYTORCH_DIR}/lib/${lib} DESTINATION backends/pytorch)
    endforeach()
  endif()
  if(TARGET triton_openvino AND EXISTS "${NRD_OPENVINO_LIBRARY_DIR}/libopenvino_c.so.2520")
    foreach(lib ${NRD_OPENVINO_LIBRARIES})
      install(FILES ${NRD_OPENVINO_LIBRARY_DIR}/${lib} DESTINATION backends/openvino)
    endforeach()
  endif()
  if(TARGET triton_python_backend_stub)
    install(TARGETS triton_python_backend_stub RUNTIME DESTINATION backends/python)
    install(FILES ${PROJECT_SOURCE_DIR}/backends/python/triton_python_backend_utils.py
                  ${PROJECT_SOURCE_DIR}/backends/python/nrd_python_stub.py
            DESTINATION backends/python)
  endif()

  # For backend authors: find_package(Nereid) and pkg-config, both
  # relocatable (paths computed from where the files are).
  set(cmdir ${CMAKE_BINARY_DIR}/nereid-package)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/NereidConfig.cmake.in ${cmdir}/NereidConfig.cmake @ONLY)
  write_basic_package_version_file(${cmdir}/NereidConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${cmdir}/NereidConfig.cmake ${cmdir}/NereidConfigVersion.cmake
          DESTINATION lib/cmake/Nereid)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/nereid.pc.in ${cmdir}/nereid.pc @ONLY)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/nereid-backend-utils.pc.in
                 ${cmdir}/nereid-backend-utils.pc @ONLY)
  install(FILES ${cmdir}/nereid.pc ${cmdir}/nereid-backend-utils.pc DESTINATION lib/pkgconfig)
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL nrd_install_rules)

# The Debian package: `cpack` in a build tree gives nereid_<version>_<arch>.deb
# holding the tree above in /opt/nereid, /usr/bin/nereid, a systemd unit
# (not enabled) and its /etc/default/nereid (deb_extras.cmake adds those
# three to the staged tree). Depends comes from dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME nereid)
set(CPACK_PACKAGE_VENDOR "Nereid")
set(CPACK_PACKAGE_CONTACT "Nereid maintainers <maintainers@nereid.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Triton-compatible inference server")
set(CPACK_PACKAGE_DESCRIPTION
  "Nereid serves machine-learning models over KServe's v2 protocol (HTTP/REST
and gRPC) and exports Prometheus metrics. Its libtritonserver.so, backend API
and command line are Triton Inference Server's, so Triton's backends, model
repositories and clients work unchanged.")
set(CPACK_PACKAGING_INSTALL_PREFIX /opt/nereid)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libtritonserver.so is the package's own: dpkg-shlibdeps finds it here
# (relative to the staged tree) rather than asking which package has it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS opt/nereid/lib)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/deb_extras.cmake)
# Where deb_extras.cmake finds the unit and its defaults (CPACK_* variables
# reach CPack's scripts).
set(CPACK_NRD_DEB_FILES_DIR ${PROJECT_SOURCE_DIR}/deploy/debian)
include(CPack)
