// Collective communication library behind one set of names: RCCL on AMD, NCCL on NVIDIA. RCCL
// implements NCCL's API under NCCL's names (ncclAllReduce, ncclComm_t, ncclFloat32, ...), so
// code spells NCCL; only the header, the library's file name and the stream type (hipStream_t,
// which runtime.h aliases to cudaStream_t on NVIDIA) differ. The library is opened at run time
// (dlopen) when a process group asks for it, so a GPU build links neither and imports where
// neither is installed. Kept out of libs.h: only the collectives include it.
#pragma once

#include "backend/rocm/gpu/runtime.h"

#if defined(__HIP_PLATFORM_AMD__)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif

#include <string>

namespace pyflame::gpu {

#if defined(__HIP_PLATFORM_AMD__)
inline constexpr const char* kCclName = "rccl";
inline constexpr const char* kCclLibrary = "librccl.so.1";
#else
inline constexpr const char* kCclName = "nccl";
inline constexpr const char* kCclLibrary = "libnccl.so.2";
#endif

// The entry points we use, resolved from the library by name.
struct CclApi {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclGetErrorString) get_error_string;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
};

// Opens the library once (process-wide); null, with the reason in *error, when it or one of
// the entry points is missing.
const CclApi* ccl_api(std::string* error);

}  // namespace pyflame::gpu
