// tile_gemm's f32 kernels (kernels/tile_gemm.cuh).
#include "kernels/tile_gemm.cuh"

namespace cn::kernels::tile_gemm_impl {

int launch_f32(int tile, const Args& a) { return launch_simt_f32(tile, a); }

}  // namespace cn::kernels::tile_gemm_impl
