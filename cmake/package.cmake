# The installable C++ package: the shared library libpyflame (made of the same
# objects as the static core), the public headers and a CMake package, so that
#   find_package(PyFlame)  +  target_link_libraries(app PyFlame::pyflame)
# works against `cmake --install <build> --component cpp --prefix <dir>`.
# Only the `pyflame::` API is exported (cmake/pyflame.map); OpenMP, OpenBLAS, SLEEF and
# the GPU runtime are the library's own dependencies, found by the loader. In a
# GPU build the public GPU headers (pyflame/backend/rocm/*.h) include the GPU
# runtime and library headers, so the package config finds those packages.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

if(NOT PYFLAME_BUILD_SHARED)
  return()
endif()

set(PYFLAME_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/PyFlame)

add_library(pyflame SHARED)
add_library(PyFlame::pyflame ALIAS pyflame)
target_link_libraries(pyflame PRIVATE pyflame_objects)
target_include_directories(pyflame PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                          $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(pyflame PUBLIC cxx_std_20)
set_target_properties(pyflame PROPERTIES
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  EXPORT_NAME pyflame LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/pyflame.map)
# --no-undefined: every symbol the library uses must come from a library it
# names (the GPU link check in CI relies on it).
target_link_options(pyflame PRIVATE -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/pyflame.map
                    -Wl,--no-undefined)

# The GPU layer of the public API: its headers include the platform's runtime
# and library headers and the backend's own (installed under pyflame/detail).
set(PYFLAME_DETAIL_HEADERS)
if(PYFLAME_GPU_BACKEND STREQUAL "CUDA")
  target_compile_definitions(pyflame PUBLIC PYFLAME_GPU_CUDA)
  # The shared CUDA runtime, the one an application using the GPU layer links too.
  set_target_properties(pyflame PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
  target_link_libraries(pyflame PUBLIC CUDA::cudart CUDA::cublas CUDA::cublasLt)
  get_filename_component(PYFLAME_CUDNN_DIR "${PYFLAME_CUDNN}" DIRECTORY)
  find_path(PYFLAME_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${PYFLAME_CUDNN_DIR}/../include)
  if(PYFLAME_CUDNN_INCLUDE)
    target_include_directories(pyflame PUBLIC $<BUILD_INTERFACE:${PYFLAME_CUDNN_INCLUDE}>
                                              $<INSTALL_INTERFACE:${PYFLAME_CUDNN_INCLUDE}>)
  endif()
elseif(PYFLAME_GPU_BACKEND STREQUAL "ROCM")
  target_link_libraries(pyflame PUBLIC hip::host roc::rocblas MIOpen)
endif()
if(NOT PYFLAME_GPU_BACKEND STREQUAL "OFF")
  target_include_directories(pyflame PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/pyflame/detail>)
  foreach(h context.h memory.h blas.h dnn.h gpu/runtime.h gpu/libs.h gpu/platform.h)
    get_filename_component(d ${h} DIRECTORY)
    install(FILES src/backend/rocm/${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pyflame/detail/backend/rocm/${d}
            COMPONENT cpp)
  endforeach()
endif()

install(TARGETS pyflame EXPORT PyFlameTargets COMPONENT cpp
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(pyflame_header_excludes)
if(PYFLAME_GPU_BACKEND STREQUAL "OFF")  # the GPU layer needs a GPU build
  set(pyflame_header_excludes PATTERN "backend/rocm" EXCLUDE)
endif()
install(DIRECTORY include/pyflame DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT cpp
        FILES_MATCHING PATTERN "*.h" ${pyflame_header_excludes})
install(EXPORT PyFlameTargets NAMESPACE PyFlame:: DESTINATION ${PYFLAME_CMAKE_DIR} COMPONENT cpp)
configure_package_config_file(cmake/PyFlameConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/PyFlameConfig.cmake
                              INSTALL_DESTINATION ${PYFLAME_CMAKE_DIR})
# 0.x: minor versions may break the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/PyFlameConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/PyFlameConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/PyFlameConfigVersion.cmake
        DESTINATION ${PYFLAME_CMAKE_DIR} COMPONENT cpp)
