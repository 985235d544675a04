// tile_gemm's f16 kernels (kernels/tile_gemm.cuh).
#include <cutlass/half.h>

#include "kernels/tile_gemm.cuh"

namespace cn::kernels::tile_gemm_impl {

int launch_f16(int tile, const Args& a) { return launch_tensor_op<cutlass::half_t>(tile, a); }

}  // namespace cn::kernels::tile_gemm_impl
