#include "kernels/tile_gemm.h"

#include <cstdlib>
#include <string>
#include <vector>

#include <ATen/ops/empty.h>

#include "core/common/status.h"

#ifdef CN_WITH_CUTLASS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/tile_gemm_launch.h"
#endif

namespace cn::kernels {

#ifdef CN_WITH_CUTLASS
namespace tile_gemm_impl {

// Smallest first; the shapes instantiated in tile_gemm.cuh (launch_tensor_op, launch_simt_f32), in the same order.
const Tile* tiles(Dtype dt) {
    static const Tile tensor_op[kTiles] = {{32, 32}, {64, 64}, {128, 128}, {128, 256}};
    static const Tile simt[kTiles] = {{32, 32}, {64, 64}, {128, 128}, {256, 128}};
    return dt == Dtype::kF32 ? simt : tensor_op;
}

int alignment(Dtype dt) { return dt == Dtype::kF32 ? 1 : 8; }

int launch(Dtype dt, int tile, const Args& a) {
    switch (dt) {
        case Dtype::kBF16: return launch_bf16(tile, a);
        case Dtype::kF16: return launch_f16(tile, a);
        default: return launch_f32(tile, a);
    }
}

}  // namespace tile_gemm_impl

namespace {

using tile_gemm_impl::Dtype;

bool dtype_of(at::ScalarType t, Dtype& dt) {
    switch (t) {
        case at::kFloat: dt = Dtype::kF32; return true;
        case at::kBFloat16: dt = Dtype::kBF16; return true;
        case at::kHalf: dt = Dtype::kF16; return true;
        default: return false;
    }
}

bool aligned(const void* p, int elements, size_t esize) { return reinterpret_cast<uintptr_t>(p) % (elements * esize) == 0; }

// CN_TILE_GEMM_TILE=0..3 forces a tile (benchmarks; the bits are the same for every tile), else -1.
int forced_tile() {
    static const int t = [] {
        const char* v = std::getenv("CN_TILE_GEMM_TILE");
        if (!v || !*v) return -1;
        const int i = std::atoi(v);
        return i >= 0 && i < tile_gemm_impl::kTiles ? i : -1;
    }();
    return t;
}

}  // namespace
#endif

bool tile_gemm_enabled(at::ScalarType dtype) {
#ifdef CN_WITH_CUTLASS
    static const int setting = [] {  // -1: the default, 0: off, 1: on
        const char* v = std::getenv("CN_TILE_GEMM");
        if (v && std::string(v) == "1") return 1;
        if (v && std::string(v) == "0") return 0;
        return -1;
    }();
    (void)dtype;
    return setting == 1;
#else
    (void)dtype;
    return false;
#endif
}

bool tile_gemm_fits(const at::Tensor& w) {
#ifdef CN_WITH_CUTLASS
    Dtype dt = Dtype::kF32;
    if (!w.defined() || !w.is_cuda() || w.dim() != 2 || !w.is_contiguous() || !dtype_of(w.scalar_type(), dt)) return false;
    const int64_t align = tile_gemm_impl::alignment(dt);
    return w.size(0) % align == 0 && w.size(1) % align == 0 && w.size(0) < (int64_t{1} << 30) && w.size(1) < (int64_t{1} << 30);
#else
    (void)w;
    return false;
#endif
}

const char* tile_gemm_tile_name(at::ScalarType dtype, int tile) {
    static const char* tensor_op[] = {"32x32x64", "64x64x64", "128x128x64", "128x256x64"};
    static const char* simt[] = {"32x32x8", "64x64x8", "128x128x8", "256x128x8"};
    if (tile < 0 || tile > 3) return "?";
    return dtype == at::kFloat ? simt[tile] : tensor_op[tile];
}

int tile_gemm_pick(at::ScalarType dtype, int64_t rows, int64_t n) {
#ifdef CN_WITH_CUTLASS
    if (forced_tile() >= 0) return forced_tile();
    Dtype dt = Dtype::kF32;
    if (!dtype_of(dtype, dt)) return 0;
    static const int sms = [] {
        const cudaDeviceProp* p = at::cuda::getCurrentDeviceProperties();
        return p && p->multiProcessorCount > 0 ? p->multiProcessorCount : 132;
    }();
    // The largest tile that still gives every SM a threadblock; the smallest when none does.
    const tile_gemm_impl::Tile* t = tile_gemm_impl::tiles(dt);
    for (int i = tile_gemm_impl::kTiles - 1; i > 0; --i) {
        const int64_t blocks = ((rows + t[i].m - 1) / t[i].m) * ((n + t[i].n - 1) / t[i].n);
        if (blocks >= sms) return i;
    }
    return 0;
#else
    (void)dtype, (void)rows, (void)n;
    return 0;
#endif
}

at::Tensor tile_gemm(const at::Tensor& x_in, const at::Tensor& w, const at::Tensor& b, bool relu, int tile) {
#ifndef CN_WITH_CUTLASS
    (void)x_in, (void)w, (void)b, (void)relu, (void)tile;
    fail(Status::kInternal, "tile_gemm: built without CUTLASS");
#else
    if (!tile_gemm_fits(w) || !x_in.is_cuda() || x_in.device() != w.device() || x_in.size(-1) != w.size(1) ||
        x_in.scalar_type() != w.scalar_type() ||
        (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0) || b.scalar_type() != w.scalar_type() || b.device() != w.device())) ||
        tile < -1 || tile >= tile_gemm_impl::kTiles) {
        fail(Status::kInternal, "tile_gemm: CUDA x [..., K], w [N, K] contiguous (tile_gemm_fits), b [N], one dtype and device");
    }
    Dtype dt = Dtype::kF32;
    dtype_of(w.scalar_type(), dt);
    const int64_t N = w.size(0), K = w.size(1);
    std::vector<int64_t> shape = x_in.sizes().vec();
    shape.back() = N;
    at::Tensor out = at::empty(shape, x_in.options().memory_format(at::MemoryFormat::Contiguous));
    const int64_t M = K > 0 ? x_in.numel() / K : 0;
    if (M == 0) return out;
    if (M >= (int64_t{1} << 31)) fail(Status::kInternal, "tile_gemm: more than 2^31 rows");
    const int align = tile_gemm_impl::alignment(dt);
    const size_t esize = x_in.element_size();
    // A row-major [M, K] matrix with unit stride along K, its row stride and base aligned to `align` elements.
    at::Tensor x = x_in.reshape({M, K});
    if (x.stride(1) != 1 || x.stride(0) < K || x.stride(0) % align != 0 || !aligned(x.const_data_ptr(), align, esize)) {
        x = x.contiguous();
        if (!aligned(x.const_data_ptr(), align, esize)) x = x.clone();
    }
    const at::Tensor bc = b.defined() && !aligned(b.const_data_ptr(), align, esize) ? b.clone() : b;
    const c10::cuda::CUDAGuard guard(x.device());
    tile_gemm_impl::Args a;
    a.M = M, a.N = N, a.K = K, a.ldx = x.stride(0);
    a.x = x.const_data_ptr();
    a.w = w.const_data_ptr();
    a.bias = bc.defined() ? bc.const_data_ptr() : nullptr;
    a.out = out.data_ptr();
    a.relu = relu;
    a.stream = at::cuda::getCurrentCUDAStream();
    const int t = tile >= 0 ? tile : tile_gemm_pick(w.scalar_type(), M, N);
    const int rc = tile_gemm_impl::launch(dt, t, a);
    if (rc != 0) {
        fail(Status::kInternal, "tile_gemm: CUTLASS launch failed (code " + std::to_string(rc) + ", tile " +
                                    tile_gemm_tile_name(w.scalar_type(), t) + ", M " + std::to_string(M) + ", N " + std::to_string(N) +
                                    ", K " + std::to_string(K) + ")");
    }
    return out;
#endif
}

}  // namespace cn::kernels
