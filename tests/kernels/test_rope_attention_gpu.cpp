// GPU (ctest label "gpu"): kernels/rope_attention.h's tensor-core kernel (bf16, f16) against an fp64 reference given
// the same rotated q and k (within one rounding to the dtype plus 2e-4 of the largest |v|), against the composite
// path (rope_, SDPA, merge), with an explicit RoPE table, alone and inside a batch (bit-identical); the inputs it
// refuses (f32, other head dims, too long, misaligned) run the composite. Skips without CUDA.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

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

#ifdef CN_WITH_CUDA
bool same_bits(const at::Tensor& a_in, const at::Tensor& b_in) {
    const at::Tensor a = a_in.contiguous().cpu(), b = b_in.contiguous().cpu();
    return a.sizes() == b.sizes() && std::memcmp(a.const_data_ptr(), b.const_data_ptr(), a.nbytes()) == 0;
}

double lowest_of(at::ScalarType dt) {
    return dt == at::kFloat      ? static_cast<double>(std::numeric_limits<float>::lowest())
           : dt == at::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest())
                                 : static_cast<double>(std::numeric_limits<c10::Half>::lowest());
}

// Every fourth key masked, never the last (a query always has a key).
at::Tensor masked_bias(int64_t B, int64_t S, at::ScalarType dt) {
    at::Tensor bias = at::zeros({B, S}, at::TensorOptions().device(at::kCUDA).dtype(dt));
    for (int64_t s = 0; s + 1 < S; s += 4) bias.select(1, s).fill_(lowest_of(dt));
    return bias;
}
#endif

TEST(RopeAttentionGpu, KernelMatchesReferenceAndCompositeAndIsBatchInvariant) {
#ifndef CN_WITH_CUDA
    GTEST_SKIP() << "SKIPPED: built without CUDA kernels";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    for (auto dt : {at::kBFloat16, at::kHalf}) {
        for (const auto& [B, S, H, dk] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{3, 34, 12, 64},
                                          {2, 133, 12, 64},
                                          {1, 1, 2, 64},
                                          {2, 17, 2, 64},
                                          {4, 40, 3, 32},
                                          {2, 70, 4, 128},
                                          {1, 200, 2, 64}}) {
            SCOPED_TRACE(std::string(c10::toString(dt)) + " B " + std::to_string(B) + " S " + std::to_string(S) + " H " +
                         std::to_string(H) + " dk " + std::to_string(dk));
            at::manual_seed(5);
            const auto opts = at::TensorOptions().device(at::kCUDA);
            const at::Tensor qkv = at::randn({B, S, 3 * H * dk}, opts).to(dt);
            ASSERT_TRUE(cn::kernels::rope_attention_cuda_takes(qkv, H));
            const at::Tensor bias = masked_bias(B, S, dt);
            const at::Tensor inv = cn::layers::rope_inv_freq(dk, 10000.0, at::kCUDA);
            const at::Tensor got = cn::kernels::rope_attention_cuda(qkv, bias, inv, H);
            // A table made once and passed in (as the fused pass does) gives the same bits; so does the dispatcher.
            const at::Tensor table = cn::kernels::rope_table(inv, S, dt);
            EXPECT_TRUE(same_bits(got, cn::kernels::rope_attention_cuda(qkv, bias, inv, H, table))) << "explicit table";
            if (cn::kernels::rope_attention_cuda_enabled())
                EXPECT_TRUE(same_bits(got, cn::kernels::rope_attention(qkv.clone(), bias, inv, H, table))) << "dispatcher";

            // The composite rotates its copy in place: the same rounded q and k the kernel stages. Against the fp64
            // softmax and product on those: one rounding to the dtype (half an ulp: 2^-8 |x| for bf16, 2^-11 for
            // f16) plus 2e-4 of the largest |v| (fp32 scores and exp, the two-part p).
            at::Tensor rotated = qkv.clone();
            const at::Tensor comp = cn::kernels::rope_attention_composite(rotated, bias, inv, H, table);
            const at::Tensor ref = cn::test::rope_attention_ref(rotated, bias, inv, H, /*rotate=*/false);
            const double rel = dt == at::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
            const double vmax = qkv.view({B, S, 3, H * dk}).select(2, 2).abs().max().item<double>();
            const at::Tensor excess = (got.cpu().to(at::kDouble) - ref).abs() - rel * ref.abs();
            EXPECT_LT(excess.max().item<double>(), 2e-4 * vmax) << "against fp64 on the rotated q and k";
            const double scale = comp.abs().max().item<double>();
            EXPECT_LT((got.to(at::kDouble) - comp.to(at::kDouble)).abs().max().item<double>(), 2e-2 * scale) << "against the composite";

            // Series 0 alone, and inside a batch with other series around it.
            const at::Tensor alone =
                cn::kernels::rope_attention_cuda(qkv.slice(0, 0, 1).contiguous(), bias.slice(0, 0, 1).contiguous(), inv, H);
            const at::Tensor others = at::randn({5, S, 3 * H * dk}, opts).to(dt);
            const at::Tensor big = at::cat({others.slice(0, 0, 2), qkv.slice(0, 0, 1), others.slice(0, 2)}, 0);
            const at::Tensor big_bias =
                at::cat({bias.slice(0, 0, 1).expand({2, S}), bias.slice(0, 0, 1), at::zeros({3, S}, opts).to(dt)}, 0);
            const at::Tensor in_batch = cn::kernels::rope_attention_cuda(big, big_bias.contiguous(), inv, H).slice(0, 2, 3);
            EXPECT_TRUE(same_bits(alone, in_batch)) << "batch invariance";
            EXPECT_TRUE(same_bits(alone, got.slice(0, 0, 1))) << "alone against the first call";
        }
    }
#endif
}

TEST(RopeAttentionGpu, RefusedInputsRunTheComposite) {
#ifndef CN_WITH_CUDA
    GTEST_SKIP() << "SKIPPED: built without CUDA kernels";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    const auto opts = at::TensorOptions().device(at::kCUDA);
    const at::Tensor inv64 = cn::layers::rope_inv_freq(64, 10000.0, at::kCUDA);
    at::manual_seed(6);
    // f32; dk 16; too long for shared memory; a base that is not 16-byte aligned. Each maker gives a fresh copy (the
    // composite rotates its input in place).
    const at::Tensor f32 = at::randn({2, 34, 3 * 2 * 64}, opts);
    const at::Tensor dk16 = at::randn({2, 34, 3 * 2 * 16}, opts).to(at::kBFloat16);
    const at::Tensor too_long = at::randn({1, 4096, 3 * 1 * 64}, opts).to(at::kBFloat16);
    const at::Tensor flat = at::randn({2 * 34 * 3 * 2 * 64 + 1}, opts).to(at::kBFloat16);
    const std::vector<std::pair<std::function<at::Tensor()>, int64_t>> cases = {
        {[&] { return f32.clone(); }, 2},
        {[&] { return dk16.clone(); }, 2},
        {[&] { return too_long.clone(); }, 1},
        {[&] { return flat.clone().slice(0, 1).view({2, 34, 3 * 2 * 64}); }, 2}};
    for (const auto& [make, H] : cases) {
        const at::Tensor x = make();
        SCOPED_TRACE(std::string(c10::toString(x.scalar_type())) + " S " + std::to_string(x.size(1)) + " dk " +
                     std::to_string(x.size(2) / (3 * H)));
        EXPECT_FALSE(cn::kernels::rope_attention_cuda_takes(x, H));
        const int64_t dk = x.size(2) / (3 * H);
        const at::Tensor inv = dk == 64 ? inv64 : cn::layers::rope_inv_freq(dk, 10000.0, at::kCUDA);
        const at::Tensor bias = masked_bias(x.size(0), x.size(1), x.scalar_type());
        EXPECT_TRUE(same_bits(cn::kernels::rope_attention(x, bias, inv, H), cn::kernels::rope_attention_composite(make(), bias, inv, H)));
    }
    // f32 on the composite against fp64.
    const at::Tensor bias = masked_bias(2, 34, at::kFloat);
    const at::Tensor got = cn::kernels::rope_attention(f32.clone(), bias, inv64, 2);
    const at::Tensor ref = cn::test::rope_attention_ref(f32, bias, inv64, 2);
    EXPECT_LT((got.cpu().to(at::kDouble) - ref).abs().max().item<double>(), 5e-5 * ref.abs().max().item<double>());
#endif
}

}  // namespace
