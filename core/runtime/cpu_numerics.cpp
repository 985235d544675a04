#include "core/runtime/cpu_numerics.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <ATen/Version.h>

#include "kernels/series_linear.h"

// MKL's service functions, exported by libtorch_cpu.so when the wheel links MKL (x86-64). Weak: a LibTorch
// without MKL leaves them null.
extern "C" {
int mkl_serv_cbwr_set(int settings) __attribute__((weak));
int mkl_serv_cbwr_get(int option) __attribute__((weak));
void MKL_Get_Version_String(char* buffer, int len) __attribute__((weak));
}

namespace cn::runtime {
namespace {

// mkl_service.h
constexpr int kCbwrAll = ~0;
constexpr int kCbwrBranch = 1;
constexpr int kCbwrBranchOff = 1;
constexpr int kCbwrAuto = 2;
constexpr int kCbwrStrict = 0x10000;  // reported when the environment asks for it

const char* branch_name(int b) {
    switch (b) {
        case 0: return "OFF";
        case 1: return "BRANCH_OFF";
        case 2: return "AUTO";
        case 3: return "COMPATIBLE";
        case 4: return "SSE2";
        case 6: return "SSSE3";
        case 7: return "SSE4_1";
        case 8: return "SSE4_2";
        case 9: return "AVX";
        case 10: return "AVX2";
        case 11: return "AVX512_MIC";
        case 12: return "AVX512";
        case 13: return "AVX512_MIC_E1";
        case 14: return "AVX512_E1";
        default: return "?";
    }
}

// "model name" of /proc/cpuinfo (Linux), else "unknown processor".
std::string processor_name() {
    std::string name = "unknown processor";
    if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
        char line[512];
        while (std::fgets(line, sizeof line, f)) {
            if (std::strncmp(line, "model name", 10) == 0) {
                if (const char* colon = std::strchr(line, ':')) {
                    name = colon + 1;
                    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.erase(0, 1);
                    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
                }
                break;
            }
        }
        std::fclose(f);
    }
    return name;
}

CpuNumerics compute() {
    CpuNumerics n;
    std::string blas;
    if (mkl_serv_cbwr_set && mkl_serv_cbwr_get) {
        std::string how;
        if (const char* env = std::getenv("MKL_CBWR"); env && *env) {
            how = std::string("from MKL_CBWR=") + env;
        } else if (mkl_serv_cbwr_get(kCbwrBranch) != kCbwrBranchOff) {
            how = "set before cutenative";
        } else {
            const int rc = mkl_serv_cbwr_set(kCbwrAuto);
            how = rc == 0 ? "set by cutenative"
                          : "cutenative could not set AUTO (status " + std::to_string(rc) +
                                ": MKL had already run in this process; set MKL_CBWR=AUTO before starting it)";
        }
        const int all = mkl_serv_cbwr_get(kCbwrAll), branch = mkl_serv_cbwr_get(kCbwrBranch);
        n.batch_invariant = branch != 0 && branch != kCbwrBranchOff;
        n.thread_invariant = n.batch_invariant && kernels::series_linear_thread_invariant();
        char version[256] = "MKL";
        if (MKL_Get_Version_String) {
            MKL_Get_Version_String(version, sizeof version);
            version[sizeof version - 1] = '\0';
        }
        blas = std::string(version) + "; CNR " + branch_name(branch) + ((all & kCbwrStrict) ? ",STRICT" : "") + " (" + how + ")";
    } else {
        blas = "BLAS without MKL's reproducibility controls (not MKL): batch invariance not guaranteed";
    }
    n.description = "processor: " + processor_name() + "; ATen CPU kernels: " + at::get_cpu_capability() + "; " + blas +
                    "; Chronos-2 results " +
                    (n.thread_invariant  ? "independent of the batch, alignment and thread count"
                     : n.batch_invariant ? "independent of the batch and alignment, not of the thread count"
                                         : "may depend on the batch, alignment and thread count");
    return n;
}

}  // namespace

const CpuNumerics& cpu_numerics() {
    static std::once_flag once;
    static CpuNumerics state;
    std::call_once(once, [] {
        try {
            state = compute();
        } catch (...) {
            state.description = "CPU numerics unknown (inspection failed)";
        }
    });
    return state;
}

}  // namespace cn::runtime
