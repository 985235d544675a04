// GPU (ctest label "gpu"): kernels/rope_attention.h's CUDA kernel against its fp64 reference (f32) and against the
// composite path (rope_, SDPA, merge) in every dtype; a series' output is bit-identical alone and inside a batch;
// shapes beyond the kernel's shared memory take the composite. Skips without CUDA.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>

#include "core/layers/rope.h"
#include "kernels/rope.h"
#include "kernels/rope_attention.h"
#include "tests/kernels/rope_attention_ref.h"

namespace {

TEST(RopeAttentionGpu, MatchesReferenceAndCompositeAndIsBatchInvariant) {
#ifndef CN_WITH_CUDA
    GTEST_SKIP() << "SKIPPED: built without CUDA kernels";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    for (auto dt : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (const auto& [B, S, H, dk] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{3, 34, 12, 64},
                                          {2, 133, 12, 64},
                                          {1, 1, 2, 8},
                                          {4, 40, 3, 16},
                                          {2, 70, 4, 128},
                                          {2, 5, 2, 6}}) {
            SCOPED_TRACE(std::string(c10::toString(dt)) + " B " + std::to_string(B) + " S " + std::to_string(S) + " H " +
                         std::to_string(H) + " dk " + std::to_string(dk));
            ASSERT_TRUE(cn::kernels::rope_attention_fits(S, dk));
            at::manual_seed(5);
            const auto opts = at::TensorOptions().device(at::kCUDA);
            const at::Tensor qkv = at::randn({B, S, 3 * H * dk}, opts).to(dt);
            const double lowest = dt == at::kFloat      ? static_cast<double>(std::numeric_limits<float>::lowest())
                                  : dt == at::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest())
                                                        : static_cast<double>(std::numeric_limits<c10::Half>::lowest());
            at::Tensor bias = at::zeros({B, S}, opts.dtype(dt));  // every fourth key masked, never the last
            for (int64_t s = 0; s + 1 < S; s += 4) bias.select(1, s).fill_(lowest);
            const at::Tensor inv = cn::layers::rope_inv_freq(dk, 10000.0, at::kCUDA);
            const at::Tensor got = cn::kernels::rope_attention_cuda(qkv, bias, inv, H);
            const at::Tensor comp = cn::kernels::rope_attention_composite(qkv.clone(), bias, inv, H);
            // A table made once and passed in (as the fused pass does) gives the same bits.
            const at::Tensor table = cn::kernels::rope_table(inv, S, dt);
            const at::Tensor with_table = cn::kernels::rope_attention_cuda(qkv, bias, inv, H, table).cpu();
            const at::Tensor g = got.cpu();
            EXPECT_EQ(std::memcmp(g.const_data_ptr(), with_table.const_data_ptr(), g.nbytes()), 0) << "explicit table";
            // The dk = 64 instantiation computes the same sums in the same order as the generic one; a misaligned qkv
            // (scalar loads) gives the same bits too.
            const at::Tensor generic = cn::kernels::rope_attention_cuda(qkv, bias, inv, H, table, /*generic=*/true).cpu();
            EXPECT_EQ(std::memcmp(g.const_data_ptr(), generic.const_data_ptr(), g.nbytes()), 0) << "generic instantiation";
            const at::Tensor shifted = at::cat({qkv.flatten().slice(0, 0, 1), qkv.flatten()}).slice(0, 1).view(qkv.sizes());
            const at::Tensor scalar = cn::kernels::rope_attention_cuda(shifted, bias, inv, H, table).cpu();
            EXPECT_EQ(std::memcmp(g.const_data_ptr(), scalar.const_data_ptr(), g.nbytes()), 0) << "misaligned qkv";
            const double scale = comp.abs().max().item<double>();
            const double vs_comp = (got.to(at::kDouble) - comp.to(at::kDouble)).abs().max().item<double>();
            EXPECT_LT(vs_comp, (dt == at::kFloat ? 1e-5 : 2e-2) * scale) << "against the composite";
            if (dt == at::kFloat) {
                const at::Tensor ref = cn::test::rope_attention_ref(qkv, bias, inv, H);
                EXPECT_LT((got.cpu().to(at::kDouble) - ref).abs().max().item<double>(), 2e-5 * scale) << "against fp64";
            }
            // Series 0 alone, and inside a batch with other series around it.
            const at::Tensor alone =
                cn::kernels::rope_attention_cuda(qkv.slice(0, 0, 1).contiguous(), bias.slice(0, 0, 1).contiguous(), inv, H);
            const at::Tensor others = at::randn({5, S, 3 * H * dk}, opts).to(dt);
            const at::Tensor big = at::cat({others.slice(0, 0, 2), qkv.slice(0, 0, 1), others.slice(0, 2)}, 0);
            const at::Tensor big_bias =
                at::cat({bias.slice(0, 0, 1).expand({2, S}), bias.slice(0, 0, 1), at::zeros({3, S}, opts).to(dt)}, 0);
            const at::Tensor in_batch =
                cn::kernels::rope_attention_cuda(big, big_bias.contiguous(), inv, H).slice(0, 2, 3).contiguous().cpu();
            const at::Tensor a = alone.cpu();
            EXPECT_EQ(std::memcmp(a.const_data_ptr(), in_batch.const_data_ptr(), a.nbytes()), 0) << "batch invariance";
        }
    }
    // Too long for the kernel: the composite.
    EXPECT_FALSE(cn::kernels::rope_attention_fits(4096, 64));
#endif
}

}  // namespace
