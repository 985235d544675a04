// Microbenchmark of cutenative's CUDA kernels against the ATen composites they replace in the Chronos-2
// pass (the eager code of core/models/chronos2/chronos2_forward.cpp, op for op). Each op is captured
// `kReps` times into one CUDA graph, so launch overhead is out and the GPU time per op is measured with
// CUDA events: median of 15 replays after 3 warm-up replays. A second table times the Kronos decode step's
// launches one by one (docs/benchmarks.md). Bandwidth = bytes the op must move (inputs
// read once, outputs written once) / time, against the device's measured copy bandwidth
// (cudaMemcpyAsync device to device, 1 GiB, read + write counted).
//   cn_bench_kernels            # prints a Markdown table
//   cn_bench_kernels attention B   # rope_attention's kernel twice on B series (for a profiler), nothing else
//   cn_bench_kernels attention-table   # rope_attention's table alone (scripts/device_chronos2_perf.sh's ab stage)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/arcsinh.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/nanmean.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sinh.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "kernels/chronos2_io.h"
#include "kernels/kv_cache.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/rope_attention.h"
#include "kernels/sampling.h"
#include "kernels/skinny_gemm.h"
#include "tests/support/gpu_timing.h"

namespace {

constexpr int kReps = 50;

using cn::test::median;

// Microseconds per call of fn on the GPU.
double time_us(const std::function<void()>& fn) { return cn::test::graph_us_per_call(fn, kReps); }

double copy_bandwidth_gbs() {
    const size_t bytes = size_t{1} << 30;
    void *a = nullptr, *b = nullptr;
    cudaMalloc(&a, bytes);
    cudaMalloc(&b, bytes);
    auto stream = at::cuda::getCurrentCUDAStream();
    std::vector<double> t;
    for (int i = 0; i < 13; ++i) {
        at::cuda::CUDAEvent e0(cudaEventDefault), e1(cudaEventDefault);
        e0.record(stream);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream);
        e1.record(stream);
        e1.synchronize();
        if (i >= 3) t.push_back(e0.elapsed_time(e1) / 1000.0);
    }
    cudaFree(a);
    cudaFree(b);
    return 2.0 * bytes / median(t) / 1e9;
}

double lowest(c10::ScalarType dt) {
    return dt == at::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest())
                               : static_cast<double>(std::numeric_limits<float>::lowest());
}

// --- the eager composites (chronos2_forward.cpp) -----------------------------------------------------------
at::Tensor aten_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
    const at::Tensor var = at::pow(x.to(at::kFloat), 2).mean(-1, true);
    at::Tensor y = x * at::rsqrt(var + eps);
    if (w.scalar_type() != at::kFloat) y = y.to(w.scalar_type());
    return w * y;
}

at::Tensor rotate_half(const at::Tensor& x) {
    const int64_t half = x.size(-1) / 2;
    return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

void aten_rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& inv, c10::ScalarType dt) {
    const int64_t S = q.size(2);
    const at::Tensor pos = at::arange(0, S, q.options().dtype(at::kLong)).view({1, 1, S}).to(at::kFloat);
    const at::Tensor freqs = at::matmul(inv.view({1, -1, 1}), pos).transpose(1, 2);
    const at::Tensor emb = at::cat({freqs, freqs}, -1);
    const at::Tensor cos = emb.cos().to(dt).unsqueeze(1), sin = emb.sin().to(dt).unsqueeze(1);
    (void)(q * cos + rotate_half(q) * sin);
    (void)(k * cos + rotate_half(k) * sin);
}

void aten_preprocess(const at::Tensor& context, int64_t p, int64_t N, c10::ScalarType dt) {
    const auto f32 = context.options().dtype(at::kFloat), fdt = context.options().dtype(dt);
    const int64_t B = context.size(0);
    const at::Tensor mask = at::isnan(context).logical_not().to(at::kFloat);
    std::vector<at::Tensor> locs, scales;
    for (int64_t b = 0; b < B; ++b) {
        const at::Tensor row = context.slice(0, b, b + 1);
        const at::Tensor l = at::nan_to_num(at::nanmean(row, -1, true), 0.0);
        locs.push_back(l);
        scales.push_back(at::nan_to_num((row - l).square().nanmean(-1, true).sqrt(), 1.0));
    }
    const at::Tensor loc = at::cat(locs, 0);
    at::Tensor scale = at::cat(scales, 0);
    scale = at::where(scale == 0, at::full({}, 1e-5, f32), scale);
    const at::Tensor z = at::arcsinh((context - loc) / scale).to(dt);
    auto patch = [&](const at::Tensor& x) {
        at::Tensor y = x;
        if (x.size(-1) % p) y = at::cat({at::full({x.size(0), p - x.size(-1) % p}, NAN, x.options()), x}, -1);
        return y.unfold(-1, p, p);
    };
    const at::Tensor pm = at::nan_to_num(patch(mask.to(dt)), 0.0);
    const at::Tensor pc = at::where(pm > 0.0, patch(z), at::zeros({}, fdt));
    const at::Tensor valid = pm.sum(-1) > 0;
    const int64_t P = valid.size(1);
    const at::Tensor t = at::arange(-P * p, 0, f32).view({1, P, p}).expand({B, P, p}).div(8192.0).to(dt);
    const at::Tensor feats = at::cat({t, pc, pm}, -1);
    const at::Tensor ft = at::arange(0, N * p, f32).view({1, N, p}).expand({B, N, p}).div(8192.0).to(dt);
    const at::Tensor ff = at::cat({ft, at::zeros({B, N, p}, fdt), at::zeros({B, N, p}, fdt)}, -1);
    const at::Tensor am = at::cat({valid.to(dt), at::ones({B, 1 + N}, fdt)}, -1);
    (void)((1.0 - am.view({B, 1, 1, -1})) * lowest(dt));
}

at::Tensor aten_postprocess(const at::Tensor& head, const at::Tensor& loc, const at::Tensor& scale, int64_t Q, int64_t p) {
    const int64_t B = head.size(0), N = head.size(1);
    at::Tensor preds = head.view({B, N, Q, p}).permute({0, 2, 1, 3}).reshape({B, Q, N * p}).to(at::kFloat);
    preds = at::sinh(preds);
    return preds * scale.view({B, 1, 1}) + loc.view({B, 1, 1});
}

struct Row {
    std::string op, shape, dtype;
    double aten_us, ours_us, bytes;
};

// rope_attention's kernel at Chronos-2 base's shape (S = 34 tokens at context 512, 12 heads of 64), bf16: bytes = q, k
// and v read once + the output written once.
void attention_table(double copy_gbs) {
    std::printf("\n| rope_attention kernel, bf16, S=34, 12 heads of 64 | µs | GB/s | %% of copy BW |\n|---|---:|---:|---:|\n");
    const auto cuda = at::TensorOptions().device(at::kCUDA);
    for (int64_t B : {1, 16, 64, 128, 256, 1024}) {
        const int64_t S = 34, H = 12, dk = 64;
        const at::Tensor qkv = at::randn({B, S, 3 * H * dk}, cuda.dtype(at::kBFloat16));
        const at::Tensor bias = at::zeros({B, S}, cuda.dtype(at::kBFloat16));
        const at::Tensor inv = 1.0 / at::pow(10000.0, at::arange(0, dk, 2, cuda.dtype(at::kFloat)) / 64.0);
        const at::Tensor table = cn::kernels::rope_table(inv, S, at::kBFloat16);
        const double us = time_us([&] { cn::kernels::rope_attention_cuda(qkv, bias, inv, H, table); });
        const double gbs = 2.0 * B * S * 4 * H * dk / (us * 1e-6) / 1e9;
        std::printf("| B=%lld | %.2f | %.0f | %.1f%% |\n", static_cast<long long>(B), us, gbs, 100.0 * gbs / copy_gbs);
    }
}

// The Kronos decode step's launches (Kronos-small shapes, B=2, fp32) one by one, each in a graph of kReps
// dependent launches: what one launch costs on the GPU, next to a one-element ATen add (the floor of a launch
// in a graph) and the bytes it must move.
void decode_table() {
    const auto f32 = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
    struct D {
        std::string op;
        double us, bytes;
    };
    std::vector<D> rows;
    at::Tensor one = at::zeros({1}, f32);
    rows.push_back({"ATen add_ on one element (floor)", time_us([&] { one.add_(1); }), 8});
    const int64_t N = 2, d = 512, F = 1024, H = 8, hd = 64, M = 512, V = 1024;
    const at::Tensor x = at::randn({N, d}, f32), g = at::rand({d}, f32) + 0.5, res = at::randn({N, d}, f32);
    const at::Tensor wqkv = at::randn({3 * d, d}, f32) * 0.05, w13 = at::randn({2 * F, d}, f32) * 0.05, w2 = at::randn({d, F}, f32) * 0.05;
    const at::Tensor h = at::randn({N, F}, f32);
    cn::kernels::SkinnyOptions norm, glu, plus;
    norm.norm_weight = g;
    glu.norm_weight = g;
    glu.swiglu = true;
    plus.residual = res;
    rows.push_back({"rms_norm [2, 512]", time_us([&] { cn::kernels::rms_norm(x, g, 1e-5); }), 2.0 * N * d * 4});
    rows.push_back({"at::linear 2x512 -> 1536 (cuBLAS)", time_us([&] { at::linear(x, wqkv); }), 4.0 * 3 * d * d});
    rows.push_back({"skinny 2x512 -> 1536", time_us([&] { cn::kernels::skinny_linear(x, wqkv, {}); }), 4.0 * 3 * d * d});
    rows.push_back({"skinny 2x512 -> 1536, norm before", time_us([&] { cn::kernels::skinny_linear(x, wqkv, {}, norm); }), 4.0 * 3 * d * d});
    rows.push_back({"skinny 2x512 -> 2048 -> SwiGLU 1024, norm before", time_us([&] { cn::kernels::skinny_linear(x, w13, {}, glu); }),
                    4.0 * 2 * F * d});
    rows.push_back({"skinny 2x1024 -> 512, residual after", time_us([&] { cn::kernels::skinny_linear(h, w2, {}, plus); }), 4.0 * F * d});
    const at::Tensor qkv = at::randn({N, 3, H, hd}, f32), inv = at::rand({hd / 2}, f32) * 0.5;
    at::Tensor kc = at::randn({N, H, M, hd}, f32), vc = at::randn({N, H, M, hd}, f32);
    for (int64_t p : {int64_t{0}, int64_t{79}, int64_t{511}}) {
        const at::Tensor pos = at::full({1}, p, f32.dtype(at::kLong));
        const double kv_bytes = 2.0 * N * H * (p + 1) * hd * 4;
        rows.push_back({"decode_attention, " + std::to_string(p + 1) + " rows",
                        time_us([&] { cn::kernels::decode_attention(qkv.select(1, 0), kc, vc, pos, 0.125); }), kv_bytes});
        rows.push_back({"rope_kv_append_ + decode_attention (2 launches), " + std::to_string(p + 1) + " rows", time_us([&] {
                            cn::kernels::rope_kv_append_(qkv.select(1, 0), qkv.select(1, 1), qkv.select(1, 2), kc, vc, pos, inv);
                            cn::kernels::decode_attention(qkv.select(1, 0), kc, vc, pos, 0.125);
                        }),
                        kv_bytes});
        rows.push_back({"decode_attention_append, " + std::to_string(p + 1) + " rows", time_us([&] {
                            cn::kernels::decode_attention_append(qkv.select(1, 0), qkv.select(1, 1), qkv.select(1, 2), kc, vc, pos, inv,
                                                                 0.125);
                        }),
                        kv_bytes});
    }
    const at::Tensor logits = at::randn({N, V}, f32) * 3, noise = at::rand({N, V}, f32) + 0.1;
    const at::Tensor probs = at::softmax(logits, -1), hist = at::zeros({N, M + 1}, f32.dtype(at::kLong));
    const at::Tensor pos = at::full({1}, 70, f32.dtype(at::kLong));
    rows.push_back({"exponential_ noise [2, 1024]", time_us([&] { at::empty({N, V}, f32).exponential_(1); }), 8.0 * N * V});
    rows.push_back({"top_p_probs [2, 1024]", time_us([&] { cn::kernels::top_p_probs(logits, 0.9); }), 8.0 * N * V});
    rows.push_back({"draw_token [2, 1024]", time_us([&] { cn::kernels::draw_token(probs, noise, hist, pos); }), 8.0 * N * V});
    rows.push_back({"top_p_draw [2, 1024] (filter + draw)", time_us([&] { cn::kernels::top_p_draw(logits, 1.0, 0.9, noise, hist, pos); }),
                    12.0 * N * V});
    std::printf("\n| Kronos decode-step launch (B=2, fp32, Kronos-small shapes) | µs per launch in a graph | bytes it must move |\n");
    std::printf("|---|---:|---:|\n");
    for (const auto& r : rows) std::printf("| %s | %.2f | %.0f |\n", r.op.c_str(), r.us, r.bytes);
}

}  // namespace

int main(int argc, char** argv) {
    if (!at::hasCUDA()) {
        std::printf("no CUDA device\n");
        return 0;
    }
    if (argc == 3 && std::string(argv[1]) == "attention") {
        // For a profiler (ncu --kernel-name regex:rope_attention --launch-skip 1 --launch-count 1): the kernel twice
        // on B series of Chronos-2 base's shape, nothing else.
        const int64_t B = std::atoll(argv[2]), S = 34, H = 12, dk = 64;
        const auto cuda = at::TensorOptions().device(at::kCUDA);
        const at::Tensor qkv = at::randn({B, S, 3 * H * dk}, cuda.dtype(at::kBFloat16));
        const at::Tensor bias = at::zeros({B, S}, cuda.dtype(at::kBFloat16));
        const at::Tensor inv = 1.0 / at::pow(10000.0, at::arange(0, dk, 2, cuda.dtype(at::kFloat)) / 64.0);
        const at::Tensor table = cn::kernels::rope_table(inv, S, at::kBFloat16);
        for (int i = 0; i < 2; ++i) cn::kernels::rope_attention_cuda(qkv, bias, inv, H, table);
        cudaDeviceSynchronize();
        return 0;
    }
    c10::cuda::CUDAGuard guard(c10::Device(c10::kCUDA, 0));
    if (argc == 2 && std::string(argv[1]) == "attention-table") {
        attention_table(copy_bandwidth_gbs());
        return 0;
    }
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    const double copy_gbs = copy_bandwidth_gbs();
    std::vector<Row> rows;
    const auto cuda = at::TensorOptions().device(at::kCUDA);
    for (auto dt : {at::kBFloat16, at::kFloat}) {
        const char* dn = dt == at::kFloat ? "f32" : "bf16";
        const double es = dt == at::kFloat ? 4 : 2;
        for (int64_t R : {int64_t{34}, int64_t{32 * 34}, int64_t{256 * 34}, int64_t{65536}}) {
            const int64_t D = 768;
            at::Tensor x = at::randn({R, D}, cuda.dtype(dt)), d = at::randn({R, D}, cuda.dtype(dt));
            const at::Tensor w = at::rand({D}, cuda.dtype(dt));
            const std::string shape = "[" + std::to_string(R) + ", 768]";
            rows.push_back({"rms_norm", shape, dn, time_us([&] { aten_rms_norm(x, w, 1e-6); }),
                            time_us([&] { cn::kernels::rms_norm(x, w, 1e-6); }), 2.0 * R * D * es});
            at::Tensor h = x.clone();
            rows.push_back({"residual add + rms_norm", shape, dn, time_us([&] { aten_rms_norm(x + d, w, 1e-6); }),
                            time_us([&] { cn::kernels::add_rms_norm(h, d, w, 1e-6); }), 4.0 * R * D * es});
        }
        for (auto dims : {std::vector<int64_t>{1, 34}, {32, 34}, {64, 512}}) {
            const int64_t B = dims[0], S = dims[1], H = 12, dk = 64;
            const at::Tensor qkv = at::randn({B, S, 3 * H * dk}, cuda.dtype(dt));
            const at::Tensor inv = 1.0 / at::pow(10000.0, at::arange(0, dk, 2, cuda.dtype(at::kFloat)) / 64.0);
            const at::Tensor q = qkv.view({B, S, 3, H, dk}).select(2, 0).permute({0, 2, 1, 3});
            const at::Tensor k = qkv.view({B, S, 3, H, dk}).select(2, 1).permute({0, 2, 1, 3});
            const at::Tensor qk = qkv.view({B, S, 3 * H, dk}).slice(2, 0, 2 * H);
            rows.push_back({"rope (q and k)", "B=" + std::to_string(B) + " S=" + std::to_string(S) + " 12x64", dn,
                            time_us([&] { aten_rope(q, k, inv, dt); }), time_us([&] { cn::kernels::rope_(qk, inv); }),
                            2.0 * 2 * B * S * H * dk * es});
        }
        for (auto dims : {std::vector<int64_t>{1, 512}, {32, 512}, {1024, 2048}}) {
            const int64_t B = dims[0], L = dims[1], p = 16, N = 1;
            at::Tensor ctx = at::randn({B, L}, cuda.dtype(at::kFloat)).cumsum(1);
            ctx = at::where(at::rand({B, L}, cuda.dtype(at::kFloat)) < 0.05, at::full({}, NAN, cuda.dtype(at::kFloat)), ctx);
            cn::kernels::Chronos2PrepParams prm;
            prm.patch = p;
            prm.output_patches = N;
            prm.time_scale = 8192;
            prm.dtype = dt;
            const int64_t P = (L + p - 1) / p;
            rows.push_back({"chronos2 preprocess", "B=" + std::to_string(B) + " L=" + std::to_string(L), dn,
                            time_us([&] { aten_preprocess(ctx, p, N, dt); }),
                            time_us([&] { cn::kernels::chronos2_preprocess(ctx, at::Tensor(), prm); }),
                            4.0 * B * L + es * B * ((P + N) * 3 * p + 2 * (P + 1 + N)) + 8.0 * B});
        }
        for (auto dims : {std::vector<int64_t>{1, 1}, {32, 4}, {4096, 4}}) {
            const int64_t B = dims[0], N = dims[1], Q = 21, p = 16;
            const at::Tensor head = at::randn({B, N, Q * p}, cuda.dtype(dt));
            const at::Tensor loc = at::randn({B}, cuda.dtype(at::kFloat)), scale = at::rand({B}, cuda.dtype(at::kFloat));
            rows.push_back({"chronos2 postprocess", "B=" + std::to_string(B) + " N=" + std::to_string(N) + " Q=21", dn,
                            time_us([&] { aten_postprocess(head, loc, scale, Q, p); }),
                            time_us([&] { cn::kernels::chronos2_postprocess(head, loc, scale, Q, p, true); }),
                            (es + 4.0) * B * N * Q * p + 8.0 * B});
        }
    }
    std::printf("Device: %s; measured copy bandwidth %.0f GB/s (cudaMemcpy D2D, 1 GiB, read + write)\n\n", prop.name, copy_gbs);
    std::printf("| op | shape | dtype | ATen composite (µs) | ours (µs) | speedup | ours GB/s | %% of copy BW |\n");
    std::printf("|---|---|---|---:|---:|---:|---:|---:|\n");
    for (const auto& r : rows) {
        const double gbs = r.bytes / (r.ours_us * 1e-6) / 1e9;
        std::printf("| %s | %s | %s | %.2f | %.2f | %.1fx | %.0f | %.1f%% |\n", r.op.c_str(), r.shape.c_str(), r.dtype.c_str(), r.aten_us,
                    r.ours_us, r.aten_us / r.ours_us, gbs, 100.0 * gbs / copy_gbs);
    }
    attention_table(copy_gbs);
    decode_table();
    return 0;
}
