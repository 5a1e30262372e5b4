// GPU kernels of the llm family: rotary embedding, fused attention (a block
// per query row or per (row, key chunk), a wave per key at a time, online
// softmax), and the batch-1 GEMV path of matmul (try_gemv).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "backend/rocm/kernels/common.h"
#include "backend/rocm/memory.h"

namespace pyflame::backend::rocm {

namespace {

// ---------------------------------------------------------------- rope

template <typename T>
__global__ void rope_kernel(T* out, const T* x, const float* inv_freq, const float* pos, Indexer<1> pix,
                            bool has_pos, bool interleaved, double offset, int64_t S, int64_t D,
                            int64_t n) {
  const int64_t half = D / 2;
  PF_GRID_STRIDE(i, n) {
    const int64_t r = i / half, j = i % half;
    float p;
    if (has_pos) {
      int64_t o[1];
      pix.offsets(r, o);
      p = static_cast<float>(static_cast<double>(pos[o[0]]) + offset);
    } else {
      p = static_cast<float>(static_cast<double>(r % S) + offset);
    }
    const float ang = p * inv_freq[j];
    const float c = cosf(ang), s = sinf(ang);
    const int64_t i0 = interleaved ? 2 * j : j, i1 = interleaved ? 2 * j + 1 : j + half;
    const float a = static_cast<float>(x[r * D + i0]), b = static_cast<float>(x[r * D + i1]);
    out[r * D + i0] = T(a * c - b * s);
    out[r * D + i1] = T(b * c + a * s);
  }
}

// ---------------------------------------------------------------- attention
// Work item w = (query row r, key chunk c): keys [c * chunk_len, ...) of the
// row's visible keys. Each wave takes every nwaves-th key of the chunk with
// an online softmax (running max m, sum l, accumulator acc); the block then
// merges its waves. With one chunk the block writes the output row; with
// several it writes (m, l, acc) of its chunk and attention_combine merges
// the chunks (split-K for few rows and long key ranges: decoding).

constexpr int kAttnThreads = 128;
constexpr int kAttnMaxWaves = kAttnThreads / gpu::kMinWaveSize;
constexpr int kAttnMaxDim = 512;

struct AttnParams {
  int64_t B, H, Sq, Sk, D, Dv, G;
  int64_t qs[4], ks[4], vs[4];
  float scale;
  int causal;
  int64_t offset;
  const int64_t* offset_ptr;  // a 0-d offset tensor added to offset, or null
  int64_t chunks, chunk_len;
  float* part_ml;   // (rows * chunks, 2): m, l; null with one chunk
  float* part_acc;  // (rows * chunks, Dv)
  unsigned* done;   // per row: chunks finished (attention_decode merges in the last one); zeroed
};

__device__ inline int64_t visible_keys(const AttnParams& p, int64_t i) {
  if (!p.causal) return p.Sk;
  const int64_t lim = i + p.offset + (p.offset_ptr ? *p.offset_ptr : 0) + 1;
  return lim < 0 ? 0 : (lim < p.Sk ? lim : p.Sk);
}

// NPL: head elements per lane, NPL * wave size >= max(D, Dv).
template <typename T, int NPL>
__global__ void __launch_bounds__(kAttnThreads) attention_kernel(const T* q, const T* k, const T* v, T* out,
                                                                 AttnParams p) {
  __shared__ float s_m[kAttnMaxWaves], s_l[kAttnMaxWaves];
  __shared__ float s_acc[kAttnMaxWaves * kAttnMaxDim];
  const int W = PF_WAVE_SIZE;
  const int lane = threadIdx.x % W, wave = threadIdx.x / W, nwaves = blockDim.x / W;
  const int64_t items = p.B * p.H * p.Sq * p.chunks;
  for (int64_t w = blockIdx.x; w < items; w += gridDim.x) {
    const int64_t r = w / p.chunks, c = w % p.chunks;
    const int64_t i = r % p.Sq, h = (r / p.Sq) % p.H, b = r / (p.Sq * p.H), hk = h / p.G;
    const int64_t nk = visible_keys(p, i);
    const int64_t j0 = c * p.chunk_len;
    const int64_t j1 = j0 + p.chunk_len < nk ? j0 + p.chunk_len : nk;
    const T* qr = q + b * p.qs[0] + h * p.qs[1] + i * p.qs[2];
    float qreg[NPL], acc[NPL];
#pragma unroll
    for (int t = 0; t < NPL; ++t) {
      const int64_t d = lane + int64_t(t) * W;
      qreg[t] = d < p.D ? static_cast<float>(qr[d * p.qs[3]]) * p.scale : 0.0f;
      acc[t] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const T* kb = k + b * p.ks[0] + hk * p.ks[1];
    const T* vb = v + b * p.vs[0] + hk * p.vs[1];
    for (int64_t j = j0 + wave; j < j1; j += nwaves) {  // uniform per wave
      const T* kr = kb + j * p.ks[2];
      float s = 0.0f;
#pragma unroll
      for (int t = 0; t < NPL; ++t) {
        const int64_t d = lane + int64_t(t) * W;
        if (d < p.D) s += qreg[t] * static_cast<float>(kr[d * p.ks[3]]);
      }
      s = gpu::warp_reduce_sum(s);
      const float mn = fmaxf(m, s);
      const float corr = expf(m - mn), pe = expf(s - mn);
      l = l * corr + pe;
      const T* vr = vb + j * p.vs[2];
#pragma unroll
      for (int t = 0; t < NPL; ++t) {
        const int64_t d = lane + int64_t(t) * W;
        if (d < p.Dv) acc[t] = acc[t] * corr + pe * static_cast<float>(vr[d * p.vs[3]]);
      }
      m = mn;
    }
    if (lane == 0) {
      s_m[wave] = m;
      s_l[wave] = l;
    }
#pragma unroll
    for (int t = 0; t < NPL; ++t) {
      const int64_t d = lane + int64_t(t) * W;
      if (d < p.Dv) s_acc[wave * p.Dv + d] = acc[t];
    }
    __syncthreads();
    // Merge the waves. A wave that saw keys has l >= 1 (its maximum adds
    // exp(0)) or NaN; one that saw none has l == 0 and takes no part.
    float M = -INFINITY;
    for (int u = 0; u < nwaves; ++u) M = s_l[u] != 0.0f ? fmaxf(M, s_m[u]) : M;
    float L = 0.0f;
    for (int u = 0; u < nwaves; ++u) L += s_l[u] != 0.0f ? s_l[u] * expf(s_m[u] - M) : 0.0f;
    const bool empty = L == 0.0f;  // no keys in this row (chunk)
    if (p.chunks == 1) {
      T* y = out + r * p.Dv;
      for (int64_t d = threadIdx.x; d < p.Dv; d += blockDim.x) {
        float o = 0.0f;
        for (int u = 0; u < nwaves; ++u) o += s_l[u] != 0.0f ? s_acc[u * p.Dv + d] * expf(s_m[u] - M) : 0.0f;
        y[d] = empty ? T(0.0f) : T(o / L);
      }
    } else {
      float* pa = p.part_acc + w * p.Dv;
      for (int64_t d = threadIdx.x; d < p.Dv; d += blockDim.x) {
        float o = 0.0f;
        for (int u = 0; u < nwaves; ++u) o += s_l[u] != 0.0f ? s_acc[u * p.Dv + d] * expf(s_m[u] - M) : 0.0f;
        pa[d] = o;
      }
      if (threadIdx.x == 0) {
        p.part_ml[2 * w] = M;
        p.part_ml[2 * w + 1] = L;
      }
    }
    __syncthreads();
  }
}

// Decoding (few query rows, keys split in chunks, contiguous 16-byte-aligned
// head rows, D == Dv): LPK lanes share a key, one 16-byte load each, so a
// block has kAttnThreads / LPK keys in flight instead of one per wave. The
// chunk's scores go to shared memory, then its softmax, then each lane group
// accumulates its keys' values and the block sums the groups. With one
// chunk it writes the row; else the chunk's (m, l, acc), and the block that
// finishes a row last merges them (merge_if_last: no combine launch).
constexpr int kAttnDecodeChunk = 32;

// Merges row r's chunks (m, l, acc per chunk) into its output row, with the
// block's threads along the head dimension. P is float, or volatile float
// for partials other blocks of the same launch wrote.
template <typename T, typename P>
__device__ void merge_chunks(T* out, P* part_ml, P* part_acc, int64_t r, int64_t chunks, int64_t Dv) {
  P* ml = part_ml + r * chunks * 2;
  P* acc = part_acc + r * chunks * Dv;
  float M = -INFINITY;  // chunks without keys have l == 0 and take no part
  for (int64_t c = 0; c < chunks; ++c) M = ml[2 * c + 1] != 0.0f ? fmaxf(M, ml[2 * c]) : M;
  float L = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) L += ml[2 * c + 1] != 0.0f ? ml[2 * c + 1] * expf(ml[2 * c] - M) : 0.0f;
  for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {
    float o = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      if (ml[2 * c + 1] != 0.0f) o += acc[c * Dv + d] * expf(ml[2 * c] - M);
    }
    out[r * Dv + d] = L == 0.0f ? T(0.0f) : T(o / L);
  }
}

// The block that finishes a row's last chunk merges the row's chunks (the
// partials of other blocks are read past L1: volatile, after a fence).
template <typename T>
__device__ void merge_if_last(T* out, const AttnParams& p, int64_t r) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(p.done + r, 1u) == static_cast<unsigned>(p.chunks - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  merge_chunks(out, static_cast<const volatile float*>(p.part_ml), static_cast<const volatile float*>(p.part_acc),
               r, p.chunks, p.Dv);
}

template <typename T, int LPK>
__global__ void __launch_bounds__(kAttnThreads) attention_decode(const T* q, const T* k, const T* v, T* out,
                                                                 AttnParams p) {
  constexpr int V = 16 / sizeof(T);
  constexpr int G = kAttnThreads / LPK;  // key groups per block
  __shared__ float s_p[kAttnDecodeChunk];
  __shared__ float s_red[2];
  __shared__ float s_acc[G * LPK * V];
  const int g = threadIdx.x / LPK, gl = threadIdx.x % LPK;
  const int64_t d0 = int64_t(gl) * V;
  const bool lane_on = d0 < p.D;
  const int64_t items = p.B * p.H * p.Sq * p.chunks;
  for (int64_t w = blockIdx.x; w < items; w += gridDim.x) {
    const int64_t r = w / p.chunks, c = w % p.chunks;
    const int64_t i = r % p.Sq, h = (r / p.Sq) % p.H, b = r / (p.Sq * p.H), hk = h / p.G;
    const int64_t nk = visible_keys(p, i);
    const int64_t j0 = c * p.chunk_len;
    const int64_t n = (j0 + p.chunk_len < nk ? j0 + p.chunk_len : nk) - j0;  // keys in this chunk (may be <= 0)
    float qv[V];
    if (lane_on) {
      const Pack<T, V> pq = *reinterpret_cast<const Pack<T, V>*>(q + b * p.qs[0] + h * p.qs[1] + i * p.qs[2] + d0);
#pragma unroll
      for (int t = 0; t < V; ++t) qv[t] = static_cast<float>(pq.v[t]) * p.scale;
    } else {
#pragma unroll
      for (int t = 0; t < V; ++t) qv[t] = 0.0f;
    }
    const T* kb = k + b * p.ks[0] + hk * p.ks[1] + d0;
    const T* vb = v + b * p.vs[0] + hk * p.vs[1] + d0;
    // Scores: every lane runs every round (the group sum shuffles the wave).
    for (int64_t t0 = 0; t0 < n; t0 += G) {
      const int64_t t = t0 + g;
      float s = 0.0f;
      if (t < n && lane_on) {
        const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(kb + (j0 + t) * p.ks[2]);
#pragma unroll
        for (int e = 0; e < V; ++e) s += qv[e] * static_cast<float>(pk.v[e]);
      }
#pragma unroll
      for (int off = LPK / 2; off > 0; off /= 2) s += gpu::warp_shfl_xor(s, off);
      if (t < n && gl == 0) s_p[t] = s;
    }
    __syncthreads();
    // The chunk's softmax, by the first wave (n <= kAttnDecodeChunk <= 32).
    if (threadIdx.x < 32) {
      const int t = threadIdx.x;
      float m = t < n ? s_p[t] : -INFINITY;
      for (int off = 16; off > 0; off /= 2) m = fmaxf(m, gpu::warp_shfl_xor(m, off));
      const float e = t < n ? expf(s_p[t] - m) : 0.0f;
      float l = e;
      for (int off = 16; off > 0; off /= 2) l += gpu::warp_shfl_xor(l, off);
      if (t < n) s_p[t] = e;
      if (t == 0) {
        s_red[0] = m;
        s_red[1] = l;
      }
    }
    __syncthreads();
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = 0.0f;
    if (lane_on) {
      for (int64_t t = g; t < n; t += G) {
        const float pe = s_p[t];
        const Pack<T, V> pv = *reinterpret_cast<const Pack<T, V>*>(vb + (j0 + t) * p.vs[2]);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] += pe * static_cast<float>(pv.v[e]);
      }
    }
#pragma unroll
    for (int e = 0; e < V; ++e) s_acc[g * LPK * V + gl * V + e] = acc[e];
    __syncthreads();
    const float M = s_red[0], L = s_red[1];
    for (int64_t d = threadIdx.x; d < p.Dv; d += blockDim.x) {
      float o = 0.0f;
      for (int u = 0; u < G; ++u) o += s_acc[u * LPK * V + d];
      if (p.chunks == 1) {
        out[r * p.Dv + d] = L == 0.0f ? T(0.0f) : T(o / L);
      } else {
        p.part_acc[w * p.Dv + d] = o;
      }
    }
    if (p.chunks > 1 && threadIdx.x == 0) {
      p.part_ml[2 * w] = M;
      p.part_ml[2 * w + 1] = L;
    }
    if (p.chunks > 1) merge_if_last(out, p, r);
    __syncthreads();
  }
}

// Merges the chunks of each row (one block per row, grid-stride).
template <typename T>
__global__ void attention_combine(T* out, const float* part_ml, const float* part_acc, int64_t rows,
                                  int64_t chunks, int64_t Dv) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) merge_chunks(out, part_ml, part_acc, r, chunks, Dv);
}

template <typename T>
void launch_attention(int npl, unsigned grid, hipStream_t stream, const T* q, const T* k, const T* v, T* out,
                      const AttnParams& p) {
  switch (npl) {
    case 1: attention_kernel<T, 1><<<grid, kAttnThreads, 0, stream>>>(q, k, v, out, p); break;
    case 2: attention_kernel<T, 2><<<grid, kAttnThreads, 0, stream>>>(q, k, v, out, p); break;
    case 4: attention_kernel<T, 4><<<grid, kAttnThreads, 0, stream>>>(q, k, v, out, p); break;
    case 8: attention_kernel<T, 8><<<grid, kAttnThreads, 0, stream>>>(q, k, v, out, p); break;
    default: attention_kernel<T, 16><<<grid, kAttnThreads, 0, stream>>>(q, k, v, out, p); break;
  }
  PF_HIP_CHECK_LAUNCH();
}

template <typename T>
void launch_attention_decode(int lpk, unsigned grid, hipStream_t stream, const T* q, const T* k, const T* v,
                             T* out, const AttnParams& p) {
  switch (lpk) {
    case 4: attention_decode<T, 4><<<grid, kAttnThreads, 0, stream>>>(q, k, v, out, p); break;
    case 8: attention_decode<T, 8><<<grid, kAttnThreads, 0, stream>>>(q, k, v, out, p); break;
    case 16: attention_decode<T, 16><<<grid, kAttnThreads, 0, stream>>>(q, k, v, out, p); break;
    default: attention_decode<T, 32><<<grid, kAttnThreads, 0, stream>>>(q, k, v, out, p); break;
  }
  PF_HIP_CHECK_LAUNCH();
}

// Lanes per key of attention_decode for these tensors, or 0 where it does not
// apply: head rows contiguous and 16-byte aligned, D == Dv, at most 32
// sixteen-byte pieces per row.
int decode_lanes_per_key(const Tensor& q, const Tensor& k, const Tensor& v, Dtype dt) {
  const int64_t V = 16 / static_cast<int64_t>(itemsize(dt));
  const int64_t D = q.shape()[3];
  if (D != v.shape()[3] || D % V != 0 || D / V > 32) return 0;
  for (const Tensor* t : {&q, &k, &v}) {
    if (t->strides()[3] != 1 || !aligned16(t->raw_data())) return 0;
    for (int d = 0; d < 3; ++d) {
      if (t->strides()[d] % V != 0) return 0;
    }
  }
  int lpk = 4;
  while (lpk < D / V) lpk *= 2;
  return lpk;
}

// ---------------------------------------------------------------- GEMV
// y[o] = sum_k x[k * xs] * w[o * ws_o + k * ws_k], float accumulation.

constexpr int kGemvThreads = 256;

// ws_k == 1: S waves per output (lanes along k, the waves' pieces
// interleaved), summed by the block. Aligned rows take 16-byte loads, U of
// them in flight per lane before the arithmetic (a GEMV of a few thousand
// rows is latency-bound: more waves per row and more loads in flight keep
// the memory busy). Each lane still sums its chunks in order.
template <typename T, bool kVec, int S, int U>
__global__ void __launch_bounds__(kGemvThreads) gemv_rows(const T* __restrict__ w, int64_t ws_o,
                                                          const T* __restrict__ x, int64_t xs, T* y, int64_t O,
                                                          int64_t K) {
  constexpr int V = kVec ? 16 / sizeof(T) : 1;
  __shared__ float part[kGemvThreads / gpu::kMinWaveSize];
  const int W = PF_WAVE_SIZE;
  const int lane = threadIdx.x % W, wave = threadIdx.x / W, piece = wave % S;
  const int64_t rows = (blockDim.x / W) / S;  // outputs per block and round
  for (int64_t o0 = int64_t(blockIdx.x) * rows; o0 < O; o0 += int64_t(gridDim.x) * rows) {
    const int64_t o = o0 + wave / S;
    float s = 0.0f;
    if (o < O) {
      const T* wr = w + o * ws_o;
      if constexpr (kVec) {
        const int64_t step = int64_t(W) * V * S;
        int64_t k0 = (int64_t(piece) * W + lane) * V;
        for (; k0 + step * (U - 1) < K; k0 += step * U) {
          Pack<T, V> pw[U], px[U];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            pw[u] = *reinterpret_cast<const Pack<T, V>*>(wr + k0 + step * u);
            px[u] = *reinterpret_cast<const Pack<T, V>*>(x + k0 + step * u);
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int t = 0; t < V; ++t) s += static_cast<float>(pw[u].v[t]) * static_cast<float>(px[u].v[t]);
          }
        }
        for (; k0 < K; k0 += step) {
          const Pack<T, V> pw = *reinterpret_cast<const Pack<T, V>*>(wr + k0);
          const Pack<T, V> px = *reinterpret_cast<const Pack<T, V>*>(x + k0);
#pragma unroll
          for (int t = 0; t < V; ++t) s += static_cast<float>(pw.v[t]) * static_cast<float>(px.v[t]);
        }
      } else {
        for (int64_t k = lane; k < K; k += W) s += static_cast<float>(wr[k]) * static_cast<float>(x[k * xs]);
      }
    }
    s = gpu::warp_reduce_sum(s);
    if constexpr (S == 1) {
      if (lane == 0 && o < O) y[o] = T(s);
    } else {
      if (lane == 0) part[wave] = s;
      __syncthreads();
      if (piece == 0 && lane == 0 && o < O) {
        float t = 0.0f;
#pragma unroll
        for (int q = 0; q < S; ++q) t += part[wave + q];
        y[o] = T(t);
      }
      __syncthreads();
    }
  }
}

// ws_o == 1: threads along o (coalesced), k split over 4 thread rows and
// gridDim.y blocks; with several splits the partial sums go to `part`.
constexpr int kGemvCols = 64, kGemvKRows = kGemvThreads / kGemvCols;

template <typename T>
__global__ void __launch_bounds__(kGemvThreads) gemv_cols(const T* w, int64_t ws_k, const T* x, int64_t xs,
                                                          T* y, float* part, int64_t O, int64_t K) {
  __shared__ float red[kGemvKRows][kGemvCols];
  const int tx = threadIdx.x % kGemvCols, ty = threadIdx.x / kGemvCols;
  const int64_t o = int64_t(blockIdx.x) * kGemvCols + tx;
  float s = 0.0f;
  if (o < O) {
    const int64_t step = int64_t(gridDim.y) * kGemvKRows;
    for (int64_t k = int64_t(blockIdx.y) * kGemvKRows + ty; k < K; k += step) {
      s += static_cast<float>(x[k * xs]) * static_cast<float>(w[k * ws_k + o]);
    }
  }
  red[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && o < O) {
    float t = 0.0f;
#pragma unroll
    for (int r = 0; r < kGemvKRows; ++r) t += red[r][tx];
    if (part) part[int64_t(blockIdx.y) * O + o] = t;
    else y[o] = T(t);
  }
}

template <typename T>
__global__ void gemv_finish(const float* part, T* y, int64_t O, int splits) {
  PF_GRID_STRIDE(o, O) {
    float t = 0.0f;
    for (int s = 0; s < splits; ++s) t += part[int64_t(s) * O + o];
    y[o] = T(t);
  }
}

}  // namespace

// The batch-1 GEMV path of matmul: (1, K) x (K, N) and (M, K) x (K, 1)
// (batch axes of size 1) in float types, for layouts with a unit stride
// along k or along the output. Returns false (nothing launched) otherwise,
// and Matmul::eval_gpu goes on with BLAS.
bool try_gemv(const std::vector<Tensor>& in, Tensor& out) {
  // float64 goes to BLAS: this kernel accumulates in float32.
  if (!is_floating(out.dtype()) || out.dtype() == Dtype::Float64 || in.size() != 2) return false;
  const Tensor &a = in[0], &b = in[1];
  const int nd = out.ndim();
  if (nd < 2 || a.dtype() != out.dtype() || b.dtype() != out.dtype()) return false;
  const int64_t M = out.shape()[nd - 2], N = out.shape()[nd - 1], K = a.shape()[nd - 1];
  if (K == 0 || out.size() == 0 || out.size() != M * N || (M != 1 && N != 1)) return false;
  const char *px, *pw;
  int64_t xs, ws_o, ws_k, O;
  if (M == 1) {  // x = a's row, w[o, k] = b[k, o]
    px = static_cast<const char*>(a.raw_data());
    xs = a.strides()[nd - 1];
    pw = static_cast<const char*>(b.raw_data());
    ws_o = b.strides()[nd - 1];
    ws_k = b.strides()[nd - 2];
    O = N;
  } else {  // x = b's column, w = a
    px = static_cast<const char*>(b.raw_data());
    xs = b.strides()[nd - 2];
    pw = static_cast<const char*>(a.raw_data());
    ws_o = a.strides()[nd - 2];
    ws_k = a.strides()[nd - 1];
    O = M;
  }
  if (O == 1 && ws_k != 1) ws_o = 1;  // a single output: any o stride
  const bool rows = ws_k == 1, cols = !rows && ws_o == 1;
  if (!rows && !cols) return false;
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int wave = std::max(ctx.wave_size, 1);
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = reinterpret_cast<const T*>(px);
    const T* w = reinterpret_cast<const T*>(pw);
    T* y = out.data<T>();
    if (rows) {
      constexpr int V = 16 / sizeof(T);
      const bool vec = xs == 1 && K % V == 0 && ws_o % V == 0 && aligned16(x) && aligned16(w);
      // Few rows (fewer than ~16 per multiprocessor): four waves per row.
      const int split = vec && O * 4 <= int64_t(ctx.multiprocessors) * 64 && K >= 4 * wave * V * 2 ? 4 : 1;
      const int64_t per_block = kGemvThreads / wave / split;
      const unsigned grid = static_cast<unsigned>(
          std::min<int64_t>((O + per_block - 1) / per_block, int64_t(ctx.multiprocessors) * 32));
      if (!vec) gemv_rows<T, false, 1, 1><<<grid, kGemvThreads, 0, ctx.stream>>>(w, ws_o, x, xs, y, O, K);
      else if (split == 4) gemv_rows<T, true, 4, 2><<<grid, kGemvThreads, 0, ctx.stream>>>(w, ws_o, x, xs, y, O, K);
      else gemv_rows<T, true, 1, 4><<<grid, kGemvThreads, 0, ctx.stream>>>(w, ws_o, x, xs, y, O, K);
      PF_HIP_CHECK_LAUNCH();
      return;
    }
    const int64_t gx = (O + kGemvCols - 1) / kGemvCols;
    const int64_t target = int64_t(ctx.multiprocessors) * 8;
    int64_t splits = std::max<int64_t>(1, target / gx);
    splits = std::min<int64_t>(splits, std::max<int64_t>(1, K / (kGemvKRows * 16)));
    splits = std::min<int64_t>(splits, 65535);
    std::shared_ptr<Buffer> part;
    if (splits > 1) part = temp_buffer(ctx, size_t(splits) * O * sizeof(float));
    float* pp = part ? static_cast<float*>(part->ptr) : nullptr;
    gemv_cols<T><<<dim3(unsigned(gx), unsigned(splits)), kGemvThreads, 0, ctx.stream>>>(w, ws_k, x, xs, y, pp, O, K);
    PF_HIP_CHECK_LAUNCH();
    if (pp) {
      gemv_finish<T><<<grid_for(ctx, O, kThreads), kThreads, 0, ctx.stream>>>(pp, y, O, int(splits));
      PF_HIP_CHECK_LAUNCH();
    }
  });
  return true;
}

// ---------------------------------------------------------------- rope tables
// Rope's frequency table (computed on the host as the CPU backend does),
// uploaded once per (device, head_dim, theta, inv_freq) and kept for the
// process: a few hundred bytes per model, read by every rope call after the
// first (a decode step's ropes, a captured graph's). Never freed, since a
// graph may read it. The tables form a list that only grows at its head:
// a lookup walks it without a lock (threads decoding at once do not meet
// here); making a table takes the mutex.
namespace {

struct RopeTable {
  int device;
  int64_t D;
  float theta;
  std::vector<float> freqs;
  float* ptr;
  const RopeTable* next;
};

std::atomic<const RopeTable*> g_rope_tables{nullptr};

const float* find_rope_table(const DeviceContext& ctx, const Rope& r, int64_t D) {
  for (const RopeTable* t = g_rope_tables.load(std::memory_order_acquire); t; t = t->next) {
    if (t->device == ctx.device && t->D == D && t->theta == r.theta && t->freqs == r.freqs) return t->ptr;
  }
  return nullptr;
}

const float* rope_table(DeviceContext& ctx, const Rope& r, int64_t D) {
  if (const float* p = find_rope_table(ctx, r, D)) return p;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (const float* p = find_rope_table(ctx, r, D)) return p;  // made meanwhile
  // A capture's warm-up run made the table before the captured run needs it.
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  PF_HIP_CHECK(hipStreamIsCapturing(ctx.stream, &status));
  if (status != hipStreamCaptureStatusNone) {
    throw RuntimeError(errmsg("rope", "the frequency table must be uploaded before a graph capture"));
  }
  const int64_t half = D / 2;
  std::vector<float> inv(half);
  for (int64_t j = 0; j < half; ++j) inv[j] = r.freq(j, D);
  void* p = nullptr;
  PF_HIP_CHECK(hipMalloc(&p, std::max<size_t>(half * sizeof(float), 1)));
  PF_HIP_CHECK(hipMemcpyAsync(p, inv.data(), half * sizeof(float), hipMemcpyHostToDevice, ctx.stream));
  PF_HIP_CHECK(hipStreamSynchronize(ctx.stream));  // other streams may read it next
  auto* t = new RopeTable{ctx.device, D, r.theta, r.freqs, static_cast<float*>(p),
                          g_rope_tables.load(std::memory_order_relaxed)};
  g_rope_tables.store(t, std::memory_order_release);
  return t->ptr;
}

}  // namespace

}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Rope::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int64_t D = out.shape().back();
  if (D == 0) return;
  const int64_t half = D / 2, rows = out.size() / D;
  const int64_t S = out.ndim() >= 2 ? out.shape()[out.ndim() - 2] : 1;
  const float* table = rope_table(ctx, *this, D);
  Indexer<1> pix;
  const float* pos = nullptr;
  if (has_positions) {
    pix = make_indexer<1>(in[1].shape(), {&in[1].strides()}, name());
    pos = in[1].data<float>();
  }
  const int64_t n = rows * half;
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
        out.data<T>(), in[0].data<T>(), table, pos, pix, has_positions,
        interleaved, offset, S, D, n);
    PF_HIP_CHECK_LAUNCH();
  });
}

void Attention::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  AttnParams p{};
  p.B = q.shape()[0];
  p.H = q.shape()[1];
  p.Sq = q.shape()[2];
  p.D = q.shape()[3];
  p.Sk = k.shape()[2];
  p.Dv = v.shape()[3];
  p.G = p.H / k.shape()[1];
  for (int d = 0; d < 4; ++d) {
    p.qs[d] = q.strides()[d];
    p.ks[d] = k.strides()[d];
    p.vs[d] = v.strides()[d];
  }
  p.scale = scale;
  p.causal = causal ? 1 : 0;
  p.offset = causal_offset;
  p.offset_ptr = in.size() > 3 ? in[3].data<int64_t>() : nullptr;  // read by the kernel: graph-safe
  const int64_t maxd = std::max(p.D, p.Dv);
  if (maxd > kAttnMaxDim) {
    throw RuntimeError(errmsg(name(), "head dimension above 512 is not supported by the fused kernel"));
  }
  // Elements per lane for the narrowest wave (32), so any wave size fits.
  const int64_t need = (maxd + gpu::kMinWaveSize - 1) / gpu::kMinWaveSize;
  const int npl = need <= 1 ? 1 : need <= 2 ? 2 : need <= 4 ? 4 : need <= 8 ? 8 : 16;
  const int64_t rows = p.B * p.H * p.Sq;
  // Split the keys into chunks when the rows alone leave the GPU idle.
  constexpr int64_t kMinChunk = 64;
  const int64_t target = int64_t(ctx.multiprocessors) * 4;
  int64_t chunks = 1;
  if (rows < target && p.Sk >= 2 * kMinChunk) {
    chunks = std::min((target + rows - 1) / rows, (p.Sk + kMinChunk - 1) / kMinChunk);
  }
  // Decoding through the lane-group kernel: fixed short chunks.
  const int lpk = chunks > 1 ? decode_lanes_per_key(q, k, v, out.dtype()) : 0;
  if (lpk) chunks = (p.Sk + kAttnDecodeChunk - 1) / kAttnDecodeChunk;
  p.chunks = chunks;
  p.chunk_len = (p.Sk + chunks - 1) / chunks;
  std::shared_ptr<Buffer> part_ml, part_acc;
  std::shared_ptr<Buffer> done;
  if (chunks > 1 && lpk) {
    done = temp_buffer(ctx, size_t(rows) * sizeof(unsigned));
    PF_HIP_CHECK(hipMemsetAsync(done->ptr, 0, size_t(rows) * sizeof(unsigned), ctx.stream));
    p.done = static_cast<unsigned*>(done->ptr);
  }
  if (chunks > 1) {
    part_ml = temp_buffer(ctx, size_t(rows * chunks) * 2 * sizeof(float));
    part_acc = temp_buffer(ctx, size_t(rows * chunks * p.Dv) * sizeof(float));
    p.part_ml = static_cast<float*>(part_ml->ptr);
    p.part_acc = static_cast<float*>(part_acc->ptr);
  }
  const int64_t items = rows * chunks;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(items, int64_t(ctx.multiprocessors) * 16));
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (lpk) {
      launch_attention_decode<T>(lpk, grid, ctx.stream, q.data<T>(), k.data<T>(), v.data<T>(), out.data<T>(), p);
    } else {
      launch_attention<T>(npl, grid, ctx.stream, q.data<T>(), k.data<T>(), v.data<T>(), out.data<T>(), p);
    }
    if (chunks > 1 && !lpk) {  // attention_decode merges its own chunks
      const unsigned cgrid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t(ctx.multiprocessors) * 16));
      attention_combine<T><<<cgrid, kAttnThreads, 0, ctx.stream>>>(out.data<T>(), p.part_ml, p.part_acc, rows,
                                                                    chunks, p.Dv);
      PF_HIP_CHECK_LAUNCH();
    }
  });
}

}  // namespace pyflame
