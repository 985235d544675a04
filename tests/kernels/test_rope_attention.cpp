// kernels/rope_attention.h on the CPU (the composite path: rope_, SDPA, merge) against its fp64 reference, with
// masked keys and a single token; f32 within 2e-5 of the largest output.
#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "core/layers/rope.h"
#include "kernels/rope_attention.h"
#include "tests/kernels/rope_attention_ref.h"

namespace {

TEST(RopeAttention, CompositeMatchesFp64Reference) {
    for (const auto& [B, S, H, dk] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 34, 3, 16}, {1, 1, 2, 8}, {3, 9, 1, 64}}) {
        SCOPED_TRACE("B " + std::to_string(B) + " S " + std::to_string(S) + " H " + std::to_string(H) + " dk " + std::to_string(dk));
        at::manual_seed(3);
        const at::Tensor qkv = at::randn({B, S, 3 * H * dk});
        // Every third key masked, but never the last one (a query always has a key).
        at::Tensor bias = at::zeros({B, S});
        for (int64_t s = 0; s + 1 < S; s += 3) bias.select(1, s).fill_(std::numeric_limits<float>::lowest());
        const at::Tensor inv = cn::layers::rope_inv_freq(dk, 10000.0, at::kCPU);
        const at::Tensor ref = cn::test::rope_attention_ref(qkv, bias, inv, H);
        const at::Tensor got = cn::kernels::rope_attention(qkv.clone(), bias, inv, H);
        ASSERT_EQ(got.sizes(), ref.sizes());
        const double err = (got.to(at::kDouble) - ref).abs().max().item<double>();
        EXPECT_LT(err, 2e-5 * ref.abs().max().item<double>());
    }
}

}  // namespace
