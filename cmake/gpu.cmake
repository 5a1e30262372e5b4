# GPU backend: the HIP sources of src/backend/rocm, built by ROCm (hipcc /
# clang, rocBLAS, MIOpen, hipSOLVER) on AMD or by nvcc through gpu/runtime.h's
# alias header (cuBLAS, cuDNN, cuSOLVER) on NVIDIA. AUTO picks ROCm, then CUDA, then none.

# Where ROCm is: -DROCM_PATH=..., else $ROCM_PATH, else /opt/rocm (the spec's recipe).
if(NOT ROCM_PATH)
  if(DEFINED ENV{ROCM_PATH})
    set(ROCM_PATH $ENV{ROCM_PATH} CACHE PATH "ROCm installation directory")
  else()
    set(ROCM_PATH /opt/rocm CACHE PATH "ROCm installation directory")
  endif()
endif()

if(PYFLAME_GPU STREQUAL "AUTO")
  find_package(hip QUIET CONFIG PATHS ${ROCM_PATH})
  include(CheckLanguage)
  if(hip_FOUND)
    set(PYFLAME_GPU_BACKEND ROCM)
  else()
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      set(PYFLAME_GPU_BACKEND CUDA)
    endif()
  endif()
endif()

if(PYFLAME_GPU_BACKEND STREQUAL "CUDA")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper; override with -DCMAKE_CUDA_ARCHITECTURES=...
  endif()
  enable_language(CUDA)
  # CMake < 3.26 knows nvcc's dialect flags only up to C++17.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  find_package(CUDAToolkit REQUIRED)
  find_library(PYFLAME_CUDNN cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
               ${CUDAToolkit_LIBRARY_DIR}/.. REQUIRED)
elseif(PYFLAME_GPU_BACKEND STREQUAL "ROCM")
  # HIP sources build one of two ways:
  #  - HIP: CMake's HIP language, with ROCm's own clang (a ROCm install from AMD, /opt/rocm).
  #  - CXX: when the C++ compiler is clang itself (e.g. Debian's clang-19 with Debian's ROCm
  #    packages, whose hip-lang files CMake's HIP support does not find), the HIP sources are
  #    C++ sources compiled with `-x hip` for the offload architectures.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(PYFLAME_HIP_MODE CXX)
  else()
    set(PYFLAME_HIP_MODE HIP)
  endif()
  set(PYFLAME_HIP_ARCHITECTURES "gfx90a;gfx942;gfx1030;gfx1100" CACHE STRING "AMD GPU targets to compile for")
  # hip-config would otherwise probe this machine's GPUs for its own target list.
  set(GPU_TARGETS ${PYFLAME_HIP_ARCHITECTURES})
  list(PREPEND CMAKE_PREFIX_PATH ${ROCM_PATH})
  find_package(hip REQUIRED CONFIG)
  find_package(rocblas REQUIRED CONFIG)
  find_package(miopen REQUIRED CONFIG)
  find_package(hipsolver REQUIRED CONFIG)  # linalg decompositions (on rocSOLVER)
  # hipBLASLt (GEMMs with per-problem plans and epilogues, blas_lt.cc), found by its header and
  # library: Debian's CMake package names a static helper library the package does not ship.
  find_path(PYFLAME_HIPBLASLT_INCLUDE hipblaslt/hipblaslt.h HINTS ${ROCM_PATH}/include REQUIRED)
  find_library(PYFLAME_HIPBLASLT NAMES hipblaslt HINTS ${ROCM_PATH}/lib ${ROCM_PATH}/lib/x86_64-linux-gnu
               REQUIRED)
  # hipRTC (run-time compiled fused kernels): its own library next to the HIP runtime.
  find_library(PYFLAME_HIPRTC NAMES hiprtc libhiprtc.so.6 HINTS ${ROCM_PATH}/lib
               ${ROCM_PATH}/lib/x86_64-linux-gnu REQUIRED)
  if(PYFLAME_HIP_MODE STREQUAL "HIP")
    set(CMAKE_HIP_ARCHITECTURES ${PYFLAME_HIP_ARCHITECTURES})
    enable_language(HIP)
    set(CMAKE_HIP_STANDARD 20)
  else()
    # Device bitcode: ROCm's own layout (<rocm>/amdgcn/bitcode) or Debian's (rocm-device-libs).
    if(NOT PYFLAME_ROCM_DEVICE_LIB_PATH AND NOT EXISTS ${ROCM_PATH}/amdgcn/bitcode)
      file(GLOB bitcode_dirs LIST_DIRECTORIES true ${ROCM_PATH}/lib/llvm-*/lib/clang/*/amdgcn/bitcode)
      if(bitcode_dirs)
        list(SORT bitcode_dirs)
        list(GET bitcode_dirs -1 PYFLAME_ROCM_DEVICE_LIB_PATH)
      endif()
    endif()
    set(PYFLAME_HIP_CXX_FLAGS -x hip --rocm-path=${ROCM_PATH})
    foreach(arch ${PYFLAME_HIP_ARCHITECTURES})
      list(APPEND PYFLAME_HIP_CXX_FLAGS --offload-arch=${arch})
    endforeach()
    if(PYFLAME_ROCM_DEVICE_LIB_PATH)
      list(APPEND PYFLAME_HIP_CXX_FLAGS --rocm-device-lib-path=${PYFLAME_ROCM_DEVICE_LIB_PATH})
    endif()
  endif()
  message(STATUS "PyFlame ROCm: ${ROCM_PATH}, HIP compiled as ${PYFLAME_HIP_MODE}, targets ${PYFLAME_HIP_ARCHITECTURES}")
elseif(NOT PYFLAME_GPU_BACKEND STREQUAL "OFF")
  message(FATAL_ERROR "PYFLAME_GPU must be AUTO, OFF, ROCM or CUDA")
endif()

# GPU collectives (pyflame.distributed): NCCL's header on NVIDIA (the CUDA toolkit's, the
# system's or the nvidia-nccl-cu* wheel's), RCCL's on AMD. Only the header: the library is
# opened at run time (gpu/ccl.h). Without it the GPU build has no NCCL/RCCL backend.
set(PYFLAME_GPU_CCL OFF)
if(PYFLAME_GPU_BACKEND STREQUAL "CUDA")
  set(nccl_hints ${CUDAToolkit_INCLUDE_DIRS})
  # The interpreter scikit-build-core names, else python3 (no find_package here: the
  # extension's own Python lookup comes later).
  set(nccl_python "${Python_EXECUTABLE}")
  if(NOT nccl_python)
    find_program(nccl_python python3)
  endif()
  if(nccl_python)
    execute_process(COMMAND "${nccl_python}" -c
                    "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'include'))"
                    OUTPUT_VARIABLE wheel_nccl OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    list(APPEND nccl_hints ${wheel_nccl})
  endif()
  find_path(PYFLAME_CCL_INCLUDE nccl.h HINTS ${nccl_hints})
elseif(PYFLAME_GPU_BACKEND STREQUAL "ROCM")
  find_path(PYFLAME_CCL_INCLUDE rccl/rccl.h HINTS ${ROCM_PATH}/include)
endif()
if(PYFLAME_CCL_INCLUDE)
  set(PYFLAME_GPU_CCL ON)
endif()
if(NOT PYFLAME_GPU_BACKEND STREQUAL "OFF")
  message(STATUS "PyFlame GPU collectives (NCCL/RCCL header): ${PYFLAME_GPU_CCL} ${PYFLAME_CCL_INCLUDE}")
endif()

function(pyflame_add_gpu_backend target)
  if(PYFLAME_GPU_BACKEND STREQUAL "OFF")
    return()
  endif()
  file(GLOB hip_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backend/rocm/kernels/*.hip)
  file(GLOB host_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backend/rocm/*.cc
       ${PROJECT_SOURCE_DIR}/src/backend/rocm/gpu/*.cc)
  if(PYFLAME_GPU_CCL)
    target_include_directories(${target} PRIVATE ${PYFLAME_CCL_INCLUDE})
  else()
    list(FILTER host_sources EXCLUDE REGEX "/collectives\\.cc$")  # src/distributed/no_gpu_ccl.cc instead
  endif()
  if(NOT PYFLAME_GPU_BACKEND STREQUAL "CUDA")
    list(FILTER host_sources EXCLUDE REGEX "/dnn_cudnn_graph\\.cc$")  # cuDNN's graph API: NVIDIA only
  endif()
  target_sources(${target} PRIVATE ${hip_sources} ${host_sources})
  if(PYFLAME_GPU_BACKEND STREQUAL "CUDA")
    set_source_files_properties(${hip_sources} PROPERTIES LANGUAGE CUDA)
    target_compile_definitions(${target} PUBLIC PYFLAME_GPU_CUDA)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3 --expt-relaxed-constexpr -Xcompiler=-fPIC>)
    # NVRTC for run-time compiled fused kernels (loaded through the runtime's library API, so
    # nothing links libcuda: a CUDA build still imports where no driver is installed).
    target_link_libraries(${target} PUBLIC CUDA::cudart CUDA::cublas CUDA::cublasLt CUDA::cusolver ${PYFLAME_CUDNN} CUDA::nvrtc)
  else()
    if(PYFLAME_HIP_MODE STREQUAL "HIP")
      set_source_files_properties(${hip_sources} ${host_sources} PROPERTIES LANGUAGE HIP)
    else()
      set_source_files_properties(${hip_sources} ${host_sources} PROPERTIES LANGUAGE CXX
                                  COMPILE_OPTIONS "${PYFLAME_HIP_CXX_FLAGS}")
    endif()
    # hip::host, not hip::device: the latter would compile every C++ source of the
    # consumers as HIP.
    target_link_libraries(${target} PUBLIC hip::host roc::rocblas MIOpen roc::hipsolver ${PYFLAME_HIPRTC})
    target_include_directories(${target} PRIVATE ${PYFLAME_HIPBLASLT_INCLUDE})
    target_link_libraries(${target} PUBLIC ${PYFLAME_HIPBLASLT})
  endif()
endfunction()
