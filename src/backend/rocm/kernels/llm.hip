// GPU kernels of the llm family: rotary embedding, fused attention (a block
// per query row or per (row, key chunk), a wave per key at a time, online
// softmax). The GEMV kernels are in gemv.hip.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "backend/reduce_shape.h"
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
  unsigned* done;   // per row: chunks finished (attention_decode merges in the last one); zero
                    // before the launch and after it
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

// Merges row r's chunks (m, l, acc per chunk) into its output row. The
// block's threads go along the head dimension; each merges its element
// over the chunks in order with an online softmax (running max, rescaling
// its sum and accumulator when the max rises), its loads of a chunk's m, l
// and acc issued kMergeBatch chunks at a time: the merge is latency-bound,
// so a few round trips to the cache and no block reductions. P is float,
// or volatile float for partials other blocks of the same launch wrote.
constexpr int kMergeBatch = 16;

template <typename T, typename P>
__device__ void merge_chunks(T* out, P* part_ml, P* part_acc, int64_t r, int64_t chunks, int64_t Dv) {
  P* ml = part_ml + r * chunks * 2;
  P* acc = part_acc + r * chunks * Dv;
  for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {
    float M = -INFINITY, L = 0.0f, o = 0.0f;  // chunks without keys have l == 0 and take no part
    for (int64_t c0 = 0; c0 < chunks; c0 += kMergeBatch) {
      float a[kMergeBatch], mc[kMergeBatch], lc[kMergeBatch];
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
        const bool in = c0 + u < chunks;
        a[u] = in ? acc[(c0 + u) * Dv + d] : 0.0f;
        mc[u] = in ? ml[2 * (c0 + u)] : 0.0f;
        lc[u] = in ? ml[2 * (c0 + u) + 1] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
        if (lc[u] == 0.0f) continue;
        if (mc[u] > M) {
          const float f = expf(M - mc[u]);  // 0 while nothing is summed
          L *= f;
          o *= f;
          M = mc[u];
        }
        const float e = expf(mc[u] - M);
        L += lc[u] * e;
        o += a[u] * e;
      }
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
  // atomicInc wraps the last arrival's count back to 0: the counters are
  // zero again for the next launch.
  if (threadIdx.x == 0) {
    const unsigned top = static_cast<unsigned>(p.chunks - 1);
    last = atomicInc(p.done + r, top) == top;
  }
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
  constexpr int kRounds = (kAttnDecodeChunk + G - 1) / G;  // keys per group in a chunk
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
    // The chunk's keys and values are loaded first (kRounds each per lane
    // group, all in flight at once: the values do not wait for the scores),
    // then every lane runs every round of scores (the group sum shuffles the
    // wave).
    Pack<T, V> pk[kRounds], pv[kRounds];
#pragma unroll
    for (int u = 0; u < kRounds; ++u) {
      const int64_t t = int64_t(u) * G + g;
      if (t < n && lane_on) {
        pk[u] = *reinterpret_cast<const Pack<T, V>*>(kb + (j0 + t) * p.ks[2]);
        pv[u] = *reinterpret_cast<const Pack<T, V>*>(vb + (j0 + t) * p.vs[2]);
      }
    }
#pragma unroll
    for (int u = 0; u < kRounds; ++u) {
      const int64_t t = int64_t(u) * G + g;
      float s = 0.0f;
      if (t < n && lane_on) {
#pragma unroll
        for (int e = 0; e < V; ++e) s += qv[e] * static_cast<float>(pk[u].v[e]);
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
#pragma unroll
      for (int u = 0; u < kRounds; ++u) {
        const int64_t t = int64_t(u) * G + g;
        if (t < n) {
          const float pe = s_p[t];
#pragma unroll
          for (int e = 0; e < V; ++e) acc[e] += pe * static_cast<float>(pv[u].v[e]);
        }
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

}  // namespace
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
    // The context's arrival counters (zero between kernels), else zeroed
    // counters of this launch's own.
    if (rows <= backend::kMaxSplitRows) {
      p.done = ctx.row_counters;
    } else {
      done = temp_buffer(ctx, size_t(rows) * sizeof(unsigned));
      PF_HIP_CHECK(hipMemsetAsync(done->ptr, 0, size_t(rows) * sizeof(unsigned), ctx.stream));
      p.done = static_cast<unsigned*>(done->ptr);
    }
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
