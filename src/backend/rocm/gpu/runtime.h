// GPU runtime API for the rocm backend. All backend code spells the runtime in HIP names.
//  - AMD (__HIP_PLATFORM_AMD__): the real HIP headers.
//  - NVIDIA (PYFLAME_GPU_CUDA): cuda_runtime.h plus one alias per HIP name we use. Only names whose
//    CUDA twin has the same signature and meaning are aliased; enum values are mapped name to name,
//    never cast. Device-property structs are not aliased (CUDA 13 removed fields): query
//    attributes.
// To use a new HIP name on NVIDIA, add its alias below (see gpu/README.md).
#pragma once

#include <stdexcept>
#include <string>

#if defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#elif defined(PYFLAME_GPU_CUDA)
#include <cuda_runtime.h>

// Types.
using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipDeviceAttribute_t = cudaDeviceAttr;
using hipMemcpyKind = cudaMemcpyKind;
using hipFuncAttribute = cudaFuncAttribute;

// Errors.
#define hipSuccess cudaSuccess
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorNoDevice cudaErrorNoDevice
#define hipGetErrorString cudaGetErrorString
#define hipGetErrorName cudaGetErrorName
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError

// Devices.
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipRuntimeGetVersion cudaRuntimeGetVersion
#define hipDriverGetVersion cudaDriverGetVersion
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define hipDeviceAttributeComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor
#define hipDeviceAttributeMaxThreadsPerBlock cudaDevAttrMaxThreadsPerBlock
#define hipDeviceAttributeMaxThreadsPerMultiProcessor cudaDevAttrMaxThreadsPerMultiProcessor
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define hipDeviceAttributeSharedMemPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#define hipDeviceAttributeMaxRegistersPerBlock cudaDevAttrMaxRegistersPerBlock
#define hipDeviceAttributeWarpSize cudaDevAttrWarpSize
#define hipDeviceAttributeL2CacheSize cudaDevAttrL2CacheSize
#define hipDeviceAttributeClockRate cudaDevAttrClockRate
#define hipDeviceAttributeMemoryClockRate cudaDevAttrMemoryClockRate
#define hipDeviceAttributeMemoryBusWidth cudaDevAttrGlobalMemoryBusWidth

// Memory.
#define hipMemGetInfo cudaMemGetInfo
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMallocAsync cudaMallocAsync
#define hipFreeAsync cudaFreeAsync
#define hipHostFree cudaFreeHost
#define hipHostGetDevicePointer cudaHostGetDevicePointer
#define hipHostMallocDefault cudaHostAllocDefault
#define hipHostMallocPortable cudaHostAllocPortable
#define hipHostMallocMapped cudaHostAllocMapped
#define hipHostMallocWriteCombined cudaHostAllocWriteCombined
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemcpy2DAsync cudaMemcpy2DAsync
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyHostToHost cudaMemcpyHostToHost
#define hipMemcpyDefault cudaMemcpyDefault

// Streams.
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamDefault cudaStreamDefault
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipStreamQuery cudaStreamQuery

// Events.
#define hipEventCreate cudaEventCreate
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDefault cudaEventDefault
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventQuery cudaEventQuery
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy

// Graphs (stream capture). hipGraphInstantiate's signature differs from
// cudaGraphInstantiate's: use hipGraphInstantiateWithFlags.
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipStreamCaptureStatus = cudaStreamCaptureStatus;
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamIsCapturing cudaStreamIsCapturing
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy
// Graphs built node by node (a replay's copy nodes around its captured graph).
using hipGraphNode_t = cudaGraphNode_t;
using hipKernelNodeParams = cudaKernelNodeParams;
#define hipGraphCreate cudaGraphCreate
#define hipGraphAddKernelNode cudaGraphAddKernelNode
#define hipGraphAddChildGraphNode cudaGraphAddChildGraphNode

// Kernels. HIP's hipFuncSetAttribute takes only const void*: call it as
// hipFuncSetAttribute(reinterpret_cast<const void*>(&kernel), attr, value) on both platforms.
#define hipFuncSetAttribute(func, attr, value) \
  cudaFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value)
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)

// hipHostMalloc(ptr, size[, flags]): HIP defaults flags; cudaHostAlloc has no default.
inline hipError_t hipHostMalloc(void** ptr, size_t size, unsigned flags = cudaHostAllocDefault) {
  return cudaHostAlloc(ptr, size, flags);
}
template <class T>
inline hipError_t hipHostMalloc(T** ptr, size_t size, unsigned flags = cudaHostAllocDefault) {
  return cudaHostAlloc(reinterpret_cast<void**>(ptr), size, flags);
}

#else
#error "gpu/runtime.h: define __HIP_PLATFORM_AMD__ (ROCm) or PYFLAME_GPU_CUDA (CUDA)"
#endif

namespace pyflame::gpu {

// Runtime failure of a HIP call; code() keeps the platform error for callers that recover
// (e.g. the allocator on hipErrorOutOfMemory).
class HipError : public std::runtime_error {
 public:
  HipError(hipError_t code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  hipError_t code() const noexcept { return code_; }

 private:
  hipError_t code_;
};

namespace detail {
[[noreturn]] inline void throw_hip_error(hipError_t err, const char* call, const char* file,
                                         int line) {
  // Clear the non-sticky last error so a later hipGetLastError() does not report it again.
  (void)hipGetLastError();
  throw HipError(err, std::string("[") + call + "] failed: " + hipGetErrorName(err) + " (" +
                          hipGetErrorString(err) + ") at " + file + ":" + std::to_string(line));
}
}  // namespace detail

// Whether a stream or event query (hipStreamQuery, hipEventQuery) says the
// work is still running. hipErrorNotReady is an answer, not a fault, but HIP
// keeps it as the thread's last error, where the next PF_HIP_CHECK_LAUNCH()
// would report it: it is cleared here.
inline bool still_running(hipError_t query) {
  if (query != hipErrorNotReady) return false;
  (void)hipGetLastError();
  return true;
}

}  // namespace pyflame::gpu

// Evaluates a HIP call once; on failure throws pyflame::gpu::HipError (a std::runtime_error).
#define PF_HIP_CHECK(call)                                                             \
  do {                                                                                 \
    const hipError_t pf_hip_err_ = (call);                                             \
    if (pf_hip_err_ != hipSuccess)                                                     \
      ::pyflame::gpu::detail::throw_hip_error(pf_hip_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports launch-configuration errors without synchronizing.
#define PF_HIP_CHECK_LAUNCH() PF_HIP_CHECK(hipGetLastError())
