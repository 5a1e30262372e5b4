// Run-time compilation of generated kernels: NVRTC on NVIDIA, hipRTC on AMD.
// Compile a source for the device's exact architecture into a code object
// (cubin / hsaco), load a code object, launch its kernel with one by-value
// argument block. Caching is the caller's (backend/rocm/fused.cc).
#pragma once
#include <string>
#include <vector>

#include "backend/rocm/gpu/runtime.h"

namespace pyflame::gpu {

// The full architecture name code is compiled for: "sm_90" on NVIDIA, the
// gcnArchName with its features ("gfx90a:sramecc+:xnack-") on AMD.
std::string rtc_arch(int device);

// "nvrtc 13.0" or "hiprtc 6.4.x": part of every cache key.
std::string rtc_compiler_version();

// The options a source is compiled with (same floating-point defaults as the
// prebuilt kernels: no fast math, contraction as the platform's compiler does it).
std::vector<std::string> rtc_options(const std::string& arch);

// Compiles `source` into a code object; false with the compiler's log in
// *error when it fails (or when the compiler library is missing).
bool rtc_compile(const std::string& source, const std::vector<std::string>& options, std::string* code,
                 std::string* error);

// Loads a code object into the current device's context and returns the
// kernel `name`, or null with *error.
void* rtc_load(const std::string& code, const std::string& name, std::string* error);

// Launches `kernel` with one argument: the block of `bytes` at `args`.
void rtc_launch(void* kernel, unsigned grid, unsigned block, void* args, size_t bytes, hipStream_t stream);

}  // namespace pyflame::gpu
