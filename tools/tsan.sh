#!/usr/bin/env bash
# ThreadSanitizer over the C++ thread tests (CPU build): shared graphs and
# leaves evaluated and differentiated from many threads, compiled functions
# replayed from many threads: no data race.
#   BUILD_DIR (default build/tsan)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${BUILD_DIR:-build/tsan}
cmake -S . -B "$B" -G Ninja -DPYFLAME_GPU=OFF -DPYFLAME_BUILD_TESTS=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
cmake --build "$B" -j "$(nproc)" --target pyflame_tests
# One OpenMP thread: libgomp is not instrumented, so its pool would only add false reports.
OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}" "$B/pyflame_tests" --gtest_filter='*Threads*:Compile.*'
