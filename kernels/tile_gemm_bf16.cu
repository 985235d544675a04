// tile_gemm's bf16 kernels (kernels/tile_gemm.cuh).
#include <cutlass/bfloat16.h>

#include "kernels/tile_gemm.cuh"

namespace cn::kernels::tile_gemm_impl {

int launch_bf16(int tile, const Args& a) { return launch_tensor_op<cutlass::bfloat16_t>(tile, a); }

}  // namespace cn::kernels::tile_gemm_impl
