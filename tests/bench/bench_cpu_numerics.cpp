// What cutenative's CPU reproducibility measures cost, on Chronos-2 base's linear layers (d_model 768, d_ff 3072;
// 36 tokens per series: context 512 in patches of 16, the REG token and 3 output patches, H=48): the previous
// code (at::linear once per series, MKL threaded over all intra-op threads) against kernels::series_linear
// (64-column blocks, each a single-threaded GEMM, blocks in parallel), with MKL's conditional numerical
// reproducibility at MKL's default or AUTO (what the library sets; core/runtime/cpu_numerics.h).
//   cn_bench_cpu [--cnr] [--threads N] [--blocks 32,64,256]   (--cnr: set AUTO first, as loading libcutenative
//                                                             does; --blocks: other block widths, for comparison)
// Prints a Markdown table: milliseconds per call (median of 5 runs of >= 0.2 s each) and the model's linear
// layers per forward pass (12 layers x (6 x 768->768 + 768->3072 + 3072->768)).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/stack.h>

#include "core/runtime/cpu_numerics.h"
#include "kernels/series_linear.h"

extern "C" int mkl_serv_cbwr_get(int option) __attribute__((weak));

namespace {

double ms_per_call(const std::function<void()>& fn) {
    fn();  // warm-up
    std::vector<double> runs;
    for (int r = 0; r < 5; ++r) {
        int calls = 0;
        const auto t0 = std::chrono::steady_clock::now();
        double s = 0;
        do {
            fn();
            ++calls;
            s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        } while (s < 0.2);
        runs.push_back(1e3 * s / calls);
    }
    std::sort(runs.begin(), runs.end());
    return runs[2];
}

at::Tensor per_series_linear(const at::Tensor& x, const at::Tensor& w) {  // the code before series_linear
    std::vector<at::Tensor> parts;
    for (int64_t i = 0; i < x.size(0); ++i) parts.push_back(at::linear(x.select(0, i), w));
    return at::stack(parts, 0);
}

}  // namespace

int main(int argc, char** argv) {
    bool cnr = false;
    int threads = 0;
    std::vector<int64_t> widths = {cn::kernels::kSeriesLinearBlock};
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--cnr") == 0) {
            cnr = true;
        } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = std::atoi(argv[++i]);
        } else if (std::strcmp(argv[i], "--blocks") == 0 && i + 1 < argc) {
            for (const char* p = argv[++i]; *p;) {
                widths.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
                if (*p == ',') ++p;
            }
        }
    }
    std::string desc = "MKL default (no CNR)";
    if (cnr) desc = cn::runtime::cpu_numerics().description;  // sets AUTO before the first MKL call
    if (threads > 0) at::set_num_threads(threads);
    const int mode = mkl_serv_cbwr_get ? mkl_serv_cbwr_get(~0) : -1;
    std::printf("threads %d; MKL CBWR mode 0x%x; %s\n\n", at::get_num_threads(), mode, desc.c_str());
    std::printf("| linear | B | per-series at::linear (ms) |");
    for (int64_t w : widths) std::printf(" series_linear, %lld-column blocks (ms) | ratio |", static_cast<long long>(w));
    std::printf("\n|---|---:|---:|");
    for (size_t k = 0; k < widths.size(); ++k) std::printf("---:|---:|");
    std::printf("\n");
    const int64_t S = 36;
    struct Shape {
        int64_t k, n, per_layer;
    };
    const Shape shapes[] = {{768, 768, 6}, {768, 3072, 1}, {3072, 768, 1}};
    for (int64_t B : {1, 8, 32}) {
        double old_total = 0;
        std::vector<double> totals(widths.size(), 0.0);
        for (const Shape& s : shapes) {
            at::manual_seed(1);
            const at::Tensor x = at::randn({B, S, s.k}), w = at::randn({s.n, s.k});
            const double a = ms_per_call([&] { per_series_linear(x, w); });
            std::printf("| %lld->%lld | %lld | %.3f |", static_cast<long long>(s.k), static_cast<long long>(s.n), static_cast<long long>(B),
                        a);
            old_total += 12 * s.per_layer * a;
            for (size_t k = 0; k < widths.size(); ++k) {
                const double b = ms_per_call([&] { cn::kernels::series_linear_blocked(x, w, {}, 0, widths[k]); });
                std::printf(" %.3f | %.2f |", b, b / a);
                totals[k] += 12 * s.per_layer * b;
            }
            std::printf("\n");
        }
        std::printf("| **model's linears** | %lld | %.1f |", static_cast<long long>(B), old_total);
        for (double t : totals) std::printf(" %.1f | %.2f |", t, t / old_total);
        std::printf("\n");
    }
    return 0;
}
