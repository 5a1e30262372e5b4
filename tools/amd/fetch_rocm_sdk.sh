#!/usr/bin/env bash
# Fetch the ROCm 6.4 SDK needed for the AMD compile check and the ROCm link check, without a GPU and
# without installing ROCm: .debs from Debian sid/trixie are downloaded with a private apt state and
# unpacked with `dpkg -x` into $PYFLAME_AMD_SDK (default build/amd-sdk): headers, CMake package files,
# device bitcode, and the shared libraries of the HIP runtime, rocBLAS, hipBLASLt, MIOpen and hipSOLVER (only
# their .so files: rocBLAS's 4 GB of kernels and MIOpen's databases are left out, and rocSOLVER,
# which hipSOLVER loads, altogether (2 GB); the link check needs none of them).
# Only the compiler (clang-19, lld-19, clang-tools-19, libomp-19-dev) is installed, from the
# system's own bookworm sources.
#
# Env: PYFLAME_AMD_SDK       unpack dir (default <repo>/build/amd-sdk)
#      PYFLAME_DEBIAN_MIRROR mirror for sid/trixie (default http://deb.debian.org/debian; a
#                            snapshot.debian.org/archive/debian/<date> URL pins the versions)
#      PYFLAME_AMD_SDK_FORCE=1 re-download even if already unpacked
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
sdk=$(realpath -m "${PYFLAME_AMD_SDK:-$repo/build/amd-sdk}")
[[ $sdk != / && $sdk != /usr ]] || { echo "[fetch] refusing to unpack into $sdk" >&2; exit 1; }
mirror=${PYFLAME_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# Headers (sid, ROCm 6.4) and device bitcode (trixie; sid's newer one targets a newer LLVM than 19).
sid_pkgs=(libamdhip64-dev libhsa-runtime-dev librocblas-dev libmiopen-dev libamd-comgr-dev libhipsolver-dev
          librccl-dev libhipblaslt-dev libhipblas-dev libhipblas-common-dev)
trixie_pkgs=(rocm-device-libs-17)
# Runtime libraries (the -dev packages' .so links point into these), shared objects only.
sid_lib_pkgs=(libamdhip64-6 libhiprtc6 libhiprtc-builtins6 libhsa-runtime64-1 libamd-comgr3 librocblas4
              libmiopen1 libroctx64-4 libhipsolver0 libhipblaslt1)
stamp=$sdk/.fetched

SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo

# 1. System toolchain from bookworm itself: clang-19, lld-19 (links device code objects) and
#    clang-tools-19 (clang-offload-bundler: `clang -x hip -c` cannot emit a fat object without it);
#    libomp-19-dev and libclang-rt-19-dev for the CMake ROCm build, which compiles with clang-19.
llvm=/usr/lib/llvm-19/bin
if [[ ! -x $llvm/clang++ || ! -x $llvm/ld.lld || ! -x $llvm/clang-offload-bundler || ! -f $keyring ]] ||
   ! dpkg -s libomp-19-dev libclang-rt-19-dev >/dev/null 2>&1; then
  echo "[fetch] installing clang-19 lld-19 clang-tools-19 libomp-19-dev libclang-rt-19-dev (apt)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    clang-19 lld-19 clang-tools-19 libomp-19-dev libclang-rt-19-dev debian-archive-keyring >/dev/null
fi

want="${sid_pkgs[*]} | ${trixie_pkgs[*]} | ${sid_lib_pkgs[*]} (libs) | $mirror"
if [[ ${PYFLAME_AMD_SDK_FORCE:-0} != 1 && -f $stamp && $(head -1 "$stamp") == "$want" ]]; then
  echo "[fetch] ROCm SDK already in $sdk"; exit 0
fi

# 2. Private apt state: never touches /etc/apt or /var/lib/apt.
apt_dir=$sdk/.apt
rm -rf "$apt_dir"; mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,debs,parts,prefs}
cat > "$apt_dir/sources.list" <<SRC
deb [signed-by=$keyring] $mirror sid main
deb [signed-by=$keyring] $mirror trixie main
SRC
apt_opts=(
  -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts="$apt_dir/parts"
  -o Dir::Etc::PreferencesParts="$apt_dir/prefs"
  -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache"
  -o APT::Architectures=amd64 -o Acquire::Languages=none
  -o APT::Sandbox::User=root -o Debug::NoLocking=1 -qq)
# snapshot.debian.org serves old Release files whose Valid-Until has passed.
[[ $mirror != *snapshot.debian.org* ]] || apt_opts+=(-o Acquire::Check-Valid-Until=false)
echo "[fetch] apt-get update (sid, trixie) into $apt_dir"
apt-get "${apt_opts[@]}" --error-on=any update  # fail here, not later, when a suite is unreachable

cd "$apt_dir/debs"
# Pin each package to its suite explicitly: pkg/suite.
apt-get "${apt_opts[@]}" download "${sid_pkgs[@]/%//sid}" "${trixie_pkgs[@]/%//trixie}"
mkdir -p "$apt_dir/libdebs"
(cd "$apt_dir/libdebs" && rm -f ./*.deb && apt-get "${apt_opts[@]}" download "${sid_lib_pkgs[@]/%//sid}")

# 3. Unpack (no maintainer scripts run, nothing registered with dpkg).
rm -rf "$sdk/usr"
for deb in *.deb; do
  echo "[fetch] unpack $deb"
  dpkg -x "$deb" "$sdk"
done
for deb in "$apt_dir"/libdebs/*.deb; do
  echo "[fetch] unpack the shared libraries of $(basename "$deb")"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$sdk" --wildcards --no-wildcards-match-slash './usr/lib/x86_64-linux-gnu/*.so*'
done
rm -rf "$apt_dir/libdebs"   # rocBLAS's package alone is 280 MB
mkdir -p "$sdk/usr/bin"      # hip-config checks that its bin directory exists (hipcc: not needed)
bc=$(ls -d "$sdk"/usr/lib/llvm-*/lib/clang/*/amdgcn/bitcode | head -1)
lib=$sdk/usr/lib/x86_64-linux-gnu
[[ -f $sdk/usr/include/hip/hip_runtime.h && -f $sdk/usr/include/rocblas/rocblas.h &&
   -f $sdk/usr/include/hipblaslt/hipblaslt.h && -e $lib/libhipblaslt.so &&
   -f $sdk/usr/include/miopen/miopen.h && -f $sdk/usr/include/hipsolver/hipsolver.h && -f $bc/ocml.bc &&
   -e $lib/libamdhip64.so && -e $lib/librocblas.so && -e $lib/libMIOpen.so && -e $lib/libhipsolver.so ]] || { echo "[fetch] incomplete SDK" >&2; exit 1; }
# The compile check targets the ROCm 6.4 API; sid moves on. Pin with a snapshot mirror if needed.
hip_major=$(sed -n 's/^HIP_VERSION_MAJOR=//p' "$sdk/usr/share/hip/version")
[[ $hip_major == 6 ]] || echo "[fetch] WARNING: sid now has HIP $hip_major, not 6.x; for ROCm 6.4 set" \
  "PYFLAME_DEBIAN_MIRROR=https://snapshot.debian.org/archive/debian/20251101T000000Z" >&2
{ echo "$want"; ls *.deb; } > "$stamp"
rm -rf "$apt_dir/lists" "$apt_dir/cache"   # ~100 MB of indexes; the .debs stay for reference
echo "[fetch] ROCm SDK ready in $sdk (device libs: ${bc#$sdk/})"
