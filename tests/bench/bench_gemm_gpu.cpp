// The batch-invariant GEMM on Chronos-2 base's linear layers, per row count: kernels/rows_gemm (one pinned cuBLASLt
// configuration, ReLU in its epilogue) against at::linear (cuBLAS's heuristic per shape, not batch-invariant: the
// yardstick) followed by an in-place ReLU where the layer has one; the residual layers: rows_gemm_accumulate (the
// add in the epilogue) against at::linear and an in-place add. Each call is captured 20 times in one CUDA graph;
// GPU µs per call, median of 15 replays. Not a test: run by hand on a GPU (docs/benchmarks.md).
//   cn_bench_gemm [bf16|f16|f32]    # prints a Markdown table, then each weight's rows_gemm configurations
//   cn_bench_gemm ksplit            # small calls (34 and 68 rows, bf16): rows_gemm's choice, the own kernel, and the
//                                   # own kernel with K split over a cluster (rows_gemm_mma.h's measuring tool), each
//                                   # with its largest error against fp64 (docs/benchmarks.md #19 eleventh step)
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/rows_gemm.h"
#include "kernels/rows_gemm_mma.h"
#include "tests/support/gpu_timing.h"

namespace {

constexpr int kReps = 20;

double time_us(const std::function<void()>& fn) { return cn::test::graph_us_per_call(fn, kReps); }

// cn_bench_gemm ksplit: what a K split buys the small calls. Each variant's output once, its largest |error| against
// fp64 (x W^T, plus the residual for the accumulating layer) over the largest |fp64 value|, then its time.
int ksplit_table() {
    namespace rg = cn::kernels::rows_gemm_detail;
    struct Layer {
        const char* name;
        int64_t N, K;
        bool accumulate;
    };
    const Layer layers[] = {{"ff wo + residual", 768, 3072, true},
                            {"ff wo", 768, 3072, false},
                            {"time qkv", 2304, 768, false},
                            {"ff wi (no ReLU)", 3072, 768, false},
                            {"attention o", 768, 768, false}};
    const at::ScalarType dt = at::kBFloat16;
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dt);
    std::printf(
        "device: %s, bf16; GPU us per call (CUDA graph of %d calls, median of 15 replays); error: max |out - fp64| / max |fp64|\n\n",
        at::cuda::getCurrentDeviceProperties()->name, kReps);
    std::printf("| layer | rows | variant | us | error |\n|---|---:|---|---:|---:|\n");
    for (const Layer& l : layers) {
        at::manual_seed(7);  // the same operands in every run (with and without CN_PDL, say)
        const at::Tensor w = (at::randn({l.N, l.K}, opts.dtype(at::kFloat)) * 0.03).to(dt);
        for (int64_t m : {int64_t{34}, int64_t{68}}) {
            const at::Tensor x = at::randn({m, l.K}, opts.dtype(at::kFloat)).to(dt);
            const at::Tensor base = l.accumulate ? at::randn({m, l.N}, opts.dtype(at::kFloat)).to(dt) : at::zeros({m, l.N}, opts);
            at::Tensor ref = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t());
            if (l.accumulate) ref = ref + base.to(at::kDouble);
            const double scale = ref.abs().max().item<double>();
            const rg::MmaAdd add = l.accumulate ? rg::MmaAdd::kAddRounded : rg::MmaAdd::kNone;
            // run(out) writes the variant's output into out (accumulating into it for the residual layer); timed: run,
            // or `timed` where writing into out would add a copy.
            auto row = [&](const std::string& variant, const std::function<void(const at::Tensor&)>& run,
                           const std::function<void()>& timed = {}) {
                const at::Tensor out = base.clone();
                run(out);
                const double err = (out.to(at::kDouble) - ref).abs().max().item<double>() / scale;
                const at::Tensor scratch = base.clone();  // the timed calls accumulate into their own copy
                const double us = timed ? time_us(timed) : time_us([&] { run(scratch); });
                std::printf("| %s (%lld x %lld) | %lld | %s | %.1f | %.2e |\n", l.name, static_cast<long long>(l.N),
                            static_cast<long long>(l.K), static_cast<long long>(m), variant.c_str(), us, err);
                std::fflush(stdout);
            };
            if (l.accumulate) {
                row("rows_gemm (its tier's choice)", [&](const at::Tensor& out) { cn::kernels::rows_gemm_accumulate(x, w, out); });
            } else {
                row(
                    "rows_gemm (its tier's choice)",
                    [&](const at::Tensor& out) { out.copy_(cn::kernels::rows_gemm(x, w, at::Tensor(), false)); },
                    [&] { cn::kernels::rows_gemm(x, w, at::Tensor(), false); });
            }
            for (int cols : rg::kMmaColVariants) {
                if (!rg::mma_takes(dt, m, l.N, l.K, cols, x.const_data_ptr(), w.const_data_ptr(), base.const_data_ptr())) continue;
                row("own, " + std::to_string(cols) + " columns", [&](const at::Tensor& out) {
                    rg::mma_gemm(dt, x.const_data_ptr(), w.const_data_ptr(), nullptr, out.data_ptr(), m, l.N, l.K, false, add, cols,
                                 at::cuda::getCurrentCUDAStream());
                });
            }
            for (int split : {2, 4}) {
                for (int cols : rg::kMmaColVariants) {
                    if (!rg::mma_ksplit_takes(dt, m, l.N, l.K, cols, split, x.const_data_ptr(), w.const_data_ptr(), base.const_data_ptr()))
                        continue;
                    row("own, " + std::to_string(cols) + " columns, K split " + std::to_string(split), [&](const at::Tensor& out) {
                        rg::mma_gemm_ksplit(dt, x.const_data_ptr(), w.const_data_ptr(), out.data_ptr(), m, l.N, l.K, add, cols, split,
                                            at::cuda::getCurrentCUDAStream());
                    });
                }
            }
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (!at::hasCUDA()) {
        std::printf("no CUDA device\n");
        return 1;
    }
    const std::string which = argc > 1 ? argv[1] : "bf16";
    if (which == "ksplit") return ksplit_table();
    const at::ScalarType dt = which == "f32" ? at::kFloat : which == "f16" ? at::kHalf : at::kBFloat16;
    struct Layer {
        const char* name;
        int64_t N, K;
        bool bias, relu;
        bool accumulate = false;  // out += x W^T (rows_gemm_accumulate: the residual add in the epilogue)
    };
    const Layer layers[] = {{"time qkv", 2304, 768, false, false},
                            {"attention o", 768, 768, false, false},
                            {"ff wi + relu", 3072, 768, false, true},
                            {"ff wo", 768, 3072, false, false},
                            {"embed hidden + relu", 3072, 48, true, true},
                            {"embed/head out", 768, 3072, true, false},
                            {"head out", 336, 3072, true, false},
                            {"attention o + residual", 768, 768, false, false, true},
                            {"ff wo + residual", 768, 3072, false, false, true}};
    const int64_t rows[] = {34, 68, 136, 544, 2176, 8704, 34816};
    const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
    std::printf("device: %s, dtype %s; GPU us per call (CUDA graph of %d calls, median of 15 replays)\n\n", prop->name, which.c_str(),
                kReps);
    std::printf("| layer | rows | rows_gemm (us) | at::linear (us) | ratio | rows_gemm TFLOP/s |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dt);
    std::vector<std::string> configs;
    for (const Layer& l : layers) {
        const at::Tensor w = (at::randn({l.N, l.K}, opts.dtype(at::kFloat)) * 0.03).to(dt);
        const at::Tensor b = l.bias ? at::randn({l.N}, opts.dtype(at::kFloat)).to(dt) : at::Tensor();
        for (int64_t m : rows) {
            const at::Tensor x = at::randn({m, l.K}, opts.dtype(at::kFloat)).to(dt);
            const at::Tensor acc = l.accumulate ? at::zeros({m, l.N}, opts) : at::Tensor();
            const double rg = time_us([&] {
                if (l.accumulate) return cn::kernels::rows_gemm_accumulate(x, w, acc);
                cn::kernels::rows_gemm(x, w, b, l.relu);
            });
            const double lin = time_us([&] {
                at::Tensor y = at::linear(x, w, b);
                if (l.relu) y.relu_();
                if (l.accumulate) acc.add_(y);
            });
            const double tflops = 2.0 * static_cast<double>(m) * l.N * l.K / (rg * 1e-6) / 1e12;
            std::printf("| %s (%lld x %lld) | %lld | %.1f | %.1f | %.2f | %.1f |\n", l.name, static_cast<long long>(l.N),
                        static_cast<long long>(l.K), static_cast<long long>(m), rg, lin, rg / lin, tflops);
            std::fflush(stdout);
        }
        configs.push_back(std::string(l.name) + ": " + cn::kernels::rows_gemm_config(w, l.bias, l.relu, l.accumulate));
    }
    std::printf("\nrows_gemm's configurations:\n");
    for (const std::string& c : configs) std::printf("- %s\n", c.c_str());
    return 0;
}
