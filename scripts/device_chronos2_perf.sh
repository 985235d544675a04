#!/usr/bin/env bash
# On the CUDA machine (issue #19): builds the library, the kernel and C-ABI GPU tests and cn_bench_gemm against that
# machine's torch (incremental in build-gpu/, which scripts/device_test.sh shares), then runs the stages named:
#   tests    the kernel GPU tests, the Chronos-2 C-ABI GPU tests with the attention kernel on (default) and off, the
#            batch-invariance test with rows_gemm's row-count tiers off, and the Chronos-2 GPU tests with one lane
#   gemm     cn_bench_gemm bf16: rows_gemm against at::linear per row count
#   ksplit   cn_bench_gemm ksplit: small calls with rows_gemm's choice, the own kernel, and the own kernel with K split
#            over a cluster (a measuring tool, kernels/rows_gemm_mma.h)
#   f32      rows_gemm's f32 configurations (the kernel test's lines), cn_bench_gemm f32, and the sweep's fused f32
#            row with the default GEMMs and with one per series (CN_ROWS_GEMM=0)
#   sweep    the batch sweep (B = 1..1024, context 512, H=16): the reference and cutenative rows, and fused bf16
#            once more with CN_ROPE_ATTENTION=0
#   sweepfused  the sweep's reference and fused rows only (a shorter run)
#   rows     the sweep's fused bf16 and fused f32 rows alone, default settings, and rows_gemm's configurations
#   profile  torch.profiler tables of fused bf16 at B=1, 256 and 1024 (kernels, the device's idle gaps, the host timeline;
#            $PROFILE_BATCHES names other batch sizes)
#   profile32  the same for fused f32 at B=1, 64 and 1024
#   host     where a small call's wall time goes on the host, without a profiler: scripts/chronos2_host_timeline.py
#            with scripts/chronos2_bench/api_timer.c preloaded, fused bf16 at B = $HOST_BATCHES (default 1 16 64 256)
#   rolling  workload (d): 448 rolling windows x 7 series, sequential calls and one call of 3136 series (rows:
#            $ROLLING_ROWS, default every reference and fused row and graph bf16)
#   fused    the sweep's fused bf16 row alone, with the attention kernel on (default) and off (CN_ROPE_ATTENTION=0)
#   large    the sweep's fused bf16 row with rows_gemm's large-call configurations off (CN_ROWS_GEMM_LARGE=0)
#   small    the sweep's fused bf16 row with rows_gemm's small-call configurations off (CN_ROWS_GEMM_SMALL=0)
#   refrows  the sweep's fused bf16 row with rows_gemm's configurations chosen at 136, 272, 544 and 1088 rows
#            (CN_ROWS_GEMM_REFERENCE_ROWS)
#   kernels  cn_bench_kernels: the kernels against their ATen composites, and rope_attention's kernel alone
#   mma      cn_bench_mma: cycles per step of dependent mma.sync chains and of a dependent ldmatrix, on one warp
#   ncuattn  Nsight Compute's sections for rope_attention's kernel at B = 256 (with kernels)
#   variants the sweep's fused bf16 row once per setting in $VARIANTS (space-separated VAR=value, e.g.
#            "CN_CHRONOS2_LANES=1 CN_CHRONOS2_LANES=2"), two passes alternating
#   ab       the sweep's fused rows (bf16 twice, f32 once) with this tree's library and with a baseline's, alternating,
#            in one lease: the baseline is this tree with $AB_PATCH (a `git diff BASE` saved under .device/, carried)
#            applied in reverse, its library built in /tmp/cn_ab_base; with the kernels stage too, rope_attention's
#            kernel table of both trees, alternating (cn_bench_kernels attention-table; a baseline older than 5df2a64
#            prints its whole table instead); $AB_BATCHES: the sweep's batch sizes for its rows (comma-separated;
#            default the sweep's own)
# Needs .device/ (scripts/device_bundle.sh) and the chronos-forecasting wheel in .whl/; carry both. Every table and
# log goes into $OUT/perf_logs.tgz (the device tool returns at most 8 files); the tables are also printed.
#   [AB_PATCH=.device/x.patch] [AB_BATCHES=2,4] [VARIANTS="..."] scripts/device_chronos2_perf.sh [tests] [gemm] [ksplit] [f32] [sweep] [sweepfused] [rows]
#       [fused] [large] [small] [refrows] [kernels] [mma] [ncuattn] [variants] [ab] [profile] [profile32] [host] [rolling]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
final="${OUT:-$root/build-gpu-logs}"
out=/tmp/cn_perf
rm -rf "$out" && mkdir -p "$out" "$final"
finish() { tar czf "$final/perf_logs.tgz" -C "$out" . 2>/dev/null; }
trap finish EXIT
stages=" $* "
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "$root"/.whl/chronos_forecasting-*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site
build="$root/build-gpu"
export CMAKE_POLICY_VERSION_MINIMUM=3.5
cmake -S "$root" -B "$build" -G Ninja -DCN_PYTHON=python3 -DCN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCN_NLOHMANN_INCLUDE_DIR="$root/.device/include" -DCN_GTEST_SOURCE_DIR="$root/.device/googletest" \
    >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
t0=$(date +%s)
targets="cutenative test_kernels_gpu test_capi_gpu cn_bench_gemm"
[[ "$stages" == *" kernels "* || "$stages" == *" ncuattn "* ]] && targets="$targets cn_bench_kernels"
[[ "$stages" == *" mma "* ]] && targets="$targets cn_bench_mma"
cmake --build "$build" -j "$(nproc)" --target $targets >"$out/build.log" 2>&1 ||
    { grep -E 'error|Error' "$out/build.log" | head -40; exit 1; }
echo "build ok in $(( $(date +%s) - t0 )) s"
rc=0
ck=/tmp/c2base
bench() { python3 "$root/scripts/bench_chronos2.py" --lib "$build/libcutenative.so" --checkpoint "$ck" "$@"; }
if [[ "$stages" == *" tests "* ]]; then
    "$build/tests/test_kernels_gpu" >"$out/test_kernels_gpu.log" 2>&1 || rc=1
    grep -E '^\[  (PASSED|FAILED) |FAILED|Failure' "$out/test_kernels_gpu.log" | head -20
    for ra in 0 1; do
        CN_ROPE_ATTENTION=$ra "$build/tests/test_capi_gpu" >"$out/test_capi_gpu_ra$ra.log" 2>&1 || rc=1
        echo "test_capi_gpu CN_ROPE_ATTENTION=$ra:"; grep -E '^\[  (PASSED|FAILED) |FAILED|Failure|fused' "$out/test_capi_gpu_ra$ra.log" | head -12
    done
    CN_ROWS_GEMM_SMALL=0 CN_ROWS_GEMM_MID=0 CN_ROWS_GEMM_LARGE=0 "$build/tests/test_capi_gpu" --gtest_filter='Chronos2BatchGpu.*' \
        >"$out/test_capi_gpu_notiers.log" 2>&1 || rc=1
    echo "Chronos2BatchGpu, rows_gemm tiers off:"; grep -E '^\[  (PASSED|FAILED) |FAILED|Failure' "$out/test_capi_gpu_notiers.log" | head -8
fi
if [[ "$stages" == *" tests "* ]]; then
    CN_CHRONOS2_LANES=1 "$build/tests/test_capi_gpu" --gtest_filter='Chronos2BatchGpu.*:Chronos2GraphGpu.*:Chronos2Gpu.Fused*' \
        >"$out/test_capi_gpu_lanes1.log" 2>&1 || rc=1
    echo "Chronos-2 C-ABI GPU tests, CN_CHRONOS2_LANES=1:"; grep -E '^\[  (PASSED|FAILED) |FAILED|Failure' "$out/test_capi_gpu_lanes1.log" | head -8
fi
if [[ "$stages" == *" kernels "* ]]; then "$build/tests/cn_bench_kernels" >"$out/kernels.md" 2>&1 || rc=1; cat "$out/kernels.md"; fi
if [[ "$stages" == *" mma "* ]]; then "$build/tests/cn_bench_mma" >"$out/mma.txt" 2>&1 || rc=1; cat "$out/mma.txt"; fi
if [[ "$stages" == *" ncuattn "* ]]; then
    # Nsight Compute on rope_attention's kernel at B = 256 series (the second launch; needs the kernels stage's build).
    ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
    "${ncu_bin:-ncu}" --clock-control none --kernel-name regex:rope_attention_mma --launch-skip 1 --launch-count 1 --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
        --section ComputeWorkloadAnalysis --section InstructionStats "$build/tests/cn_bench_kernels" attention 256 >"$out/ncu_attention.txt" 2>&1 || rc=1
    cat "$out/ncu_attention.txt" | grep -v '^==PROF==' | head -150
fi
if [[ "$stages" == *" variants "* ]]; then
    for pass in 1 2; do
        for v in ${VARIANTS:?VARIANTS: settings to compare}; do
            env "$v" python3 "$root/scripts/bench_chronos2.py" --lib "$build/libcutenative.so" --checkpoint "$ck" --workloads s \
                --rows cn-fused-bf16 --out "$out/variant_${v}_$pass.md" >"$out/variant_${v}_$pass.log" 2>&1 || rc=1
            echo "fused bf16, $v, pass $pass:"; sed -n '/^| B | runs/,/^$/p' "$out/variant_${v}_$pass.md"
        done
    done
fi
if [[ "$stages" == *" gemm "* ]]; then "$build/tests/cn_bench_gemm" bf16 >"$out/gemm_bf16.md"; cat "$out/gemm_bf16.md"; fi
if [[ "$stages" == *" ksplit "* ]]; then "$build/tests/cn_bench_gemm" ksplit >"$out/ksplit.md" 2>&1 || rc=1; cat "$out/ksplit.md"; fi
if [[ "$stages" == *" f32 "* ]]; then
    "$build/tests/test_kernels_gpu" --gtest_filter='RowsGemmGpu.*' >"$out/rows_gemm_configs.log" 2>&1 || rc=1
    echo "rows_gemm configurations (f32 first):"; grep -E 'algo|PASSED|FAILED' "$out/rows_gemm_configs.log" | head -20
    "$build/tests/cn_bench_gemm" f32 >"$out/gemm_f32.md"; cat "$out/gemm_f32.md"
    for rg in 1 0; do
        CN_ROWS_GEMM=$rg bench --workloads s --rows cn-fused-f32 --out "$out/f32_rg$rg.md" >"$out/f32_rg$rg.log" 2>&1 || rc=1
        echo "fused f32, CN_ROWS_GEMM=$rg:"; sed -n '/^| B | runs/,/^$/p' "$out/f32_rg$rg.md"
    done
fi
if [[ "$stages" == *" sweep "* ]]; then
    bench --workloads s --out "$out/sweep.md" >"$out/sweep.log" 2>&1 || rc=1
    CN_ROPE_ATTENTION=0 bench --workloads s --rows cn-fused-bf16 --out "$out/sweep_ra0.md" >"$out/sweep_ra0.log" 2>&1 || rc=1
    echo "sweep:"; sed -n '/^| B | runs/,$p' "$out/sweep.md" | head -60
    echo "sweep, CN_ROPE_ATTENTION=0:"; sed -n '/^| B | runs/,/^$/p' "$out/sweep_ra0.md"
fi
if [[ "$stages" == *" sweepfused "* ]]; then
    bench --workloads s --rows ref-f32,ref-bf16,cn-fused-f32,cn-fused-bf16 --out "$out/sweepfused.md" >"$out/sweepfused.log" 2>&1 || rc=1
    echo "sweep, reference and fused rows:"; sed -n '/^| B | runs/,/^Peak memory/p' "$out/sweepfused.md" | head -40
fi
if [[ "$stages" == *" rows "* ]]; then
    "$build/tests/test_kernels_gpu" --gtest_filter='RowsGemmGpu.*' >"$out/rows_gemm_configs.log" 2>&1 || rc=1
    echo "rows_gemm configurations (f32 first):"; grep -E 'algo|OK|FAILED' "$out/rows_gemm_configs.log" | head -20
    for row in cn-fused-bf16 cn-fused-f32; do
        bench --workloads s --rows $row --out "$out/row_$row.md" >"$out/row_$row.log" 2>&1 || rc=1
        echo "$row:"; sed -n '/^| B | runs/,/^$/p' "$out/row_$row.md"
    done
fi
if [[ "$stages" == *" fused "* ]]; then
    for ra in 1 0; do
        CN_ROPE_ATTENTION=$ra bench --workloads s --rows cn-fused-bf16 --out "$out/fused_ra$ra.md" >"$out/fused_ra$ra.log" 2>&1 || rc=1
        echo "fused bf16, CN_ROPE_ATTENTION=$ra:"; sed -n '/^| B | runs/,/^$/p' "$out/fused_ra$ra.md"
    done
fi
if [[ "$stages" == *" large "* ]]; then
    CN_ROWS_GEMM_LARGE=0 bench --workloads s --rows cn-fused-bf16 --out "$out/large0.md" >"$out/large0.log" 2>&1 || rc=1
    echo "fused bf16, CN_ROWS_GEMM_LARGE=0:"; sed -n '/^| B | runs/,/^$/p' "$out/large0.md"
fi
if [[ "$stages" == *" small "* ]]; then
    CN_ROWS_GEMM_SMALL=0 bench --workloads s --rows cn-fused-bf16 --out "$out/small0.md" >"$out/small0.log" 2>&1 || rc=1
    echo "fused bf16, CN_ROWS_GEMM_SMALL=0:"; sed -n '/^| B | runs/,/^$/p' "$out/small0.md"
fi
if [[ "$stages" == *" refrows "* ]]; then
    for rr in 136 272 544 1088; do
        CN_ROWS_GEMM_REFERENCE_ROWS=$rr bench --workloads s --rows cn-fused-bf16 --out "$out/refrows_$rr.md" >"$out/refrows_$rr.log" 2>&1 || rc=1
        echo "fused bf16, rows_gemm configurations chosen at $rr rows:"; sed -n '/^| B | runs/,/^$/p' "$out/refrows_$rr.md"
    done
fi
if [[ "$stages" == *" ab "* ]]; then
    base_src=/tmp/cn_ab_base
    rm -rf "$base_src" && mkdir -p "$base_src"
    tar -C "$root" --exclude=./build-gpu --exclude=./build --exclude=./.device/base -cf - . | tar -C "$base_src" -xf -
    if (cd "$base_src" && patch -s -R -p1 <"$root/${AB_PATCH:?AB_PATCH: the baseline diff under .device/}") &&
        cmake -S "$base_src" -B "$base_src/build-gpu" -G Ninja -DCN_PYTHON=python3 -DCN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
            -DCN_NLOHMANN_INCLUDE_DIR="$root/.device/include" -DCN_GTEST_SOURCE_DIR="$root/.device/googletest" >"$out/ab_configure.log" 2>&1 &&
        cmake --build "$base_src/build-gpu" -j "$(nproc)" --target cutenative \
            $([[ "$stages" == *" kernels "* ]] && echo cn_bench_kernels) >"$out/ab_build.log" 2>&1; then
        if [[ "$stages" == *" kernels "* ]]; then
            for pass in 1 2; do
                for side in base new; do
                    b="$build"; [[ $side == base ]] && b="$base_src/build-gpu"
                    "$b/tests/cn_bench_kernels" attention-table >"$out/ab_attention_${side}_$pass.md" 2>&1 || rc=1
                    echo "ab attention kernel, $side, pass $pass:"; grep -E '^\| B=' "$out/ab_attention_${side}_$pass.md"
                done
            done
        fi
        for pass in 1 2; do
            for side in base new; do
                lib="$build/libcutenative.so"; [[ $side == base ]] && lib="$base_src/build-gpu/libcutenative.so"
                rows=cn-fused-bf16; [[ $pass == 2 ]] && rows=cn-fused-bf16,cn-fused-f32
                python3 "$root/scripts/bench_chronos2.py" --lib "$lib" --checkpoint "$ck" --workloads s --rows $rows \
                    ${AB_BATCHES:+--sweep-batches "$AB_BATCHES"} --dump-outputs "$out/ab_dump_${side}_$pass" --out "$out/ab_${side}_$pass.md" >"$out/ab_${side}_$pass.log" 2>&1 || rc=1
                echo "ab $side, pass $pass:"; sed -n '/^| B | runs/,/^$/p' "$out/ab_${side}_$pass.md"
            done
        done
        # The two libraries' outputs, bit for bit (pass 2: fused bf16 and f32 at every B).
        python3 - "$out/ab_dump_base_2" "$out/ab_dump_new_2" <<'PY' || rc=1
import os, sys
import numpy as np
a, b = sys.argv[1], sys.argv[2]
for f in sorted(os.listdir(b)):
    x, y = np.load(os.path.join(a, f)), np.load(os.path.join(b, f))
    same = x.shape == y.shape and np.array_equal(x.view(np.uint32), y.view(np.uint32))
    if same:
        verdict = "bit-identical"
    elif x.shape != y.shape:
        verdict = "DIFFER (shapes %s and %s)" % (x.shape, y.shape)
    else:
        verdict = "DIFFER (%d of %d values)" % (int((x.view(np.uint32) != y.view(np.uint32)).sum()), x.size)
    print("ab outputs %-24s %s" % (f[:-4], verdict))
PY
    else
        echo "ab: the baseline did not build"; tail -20 "$out/ab_build.log" 2>/dev/null; rc=1
    fi
fi
if [[ "$stages" == *" profile "* ]]; then
    for b in ${PROFILE_BATCHES:-1 256 1024}; do
        bench --workloads s --sweep-batches $b --rows cn-fused-bf16 --profile cn-fused-bf16 --out "$out/profile_b$b.md" >"$out/profile_b$b.log" 2>&1 || rc=1
        echo "profile B=$b:"; sed -n "/^## Profile/,\$p" "$out/profile_b$b.md" | head -70
    done
fi
if [[ "$stages" == *" profile32 "* ]]; then
    for b in 1 64 1024; do
        bench --workloads s --sweep-batches $b --rows cn-fused-f32 --profile cn-fused-f32 --out "$out/profile32_b$b.md" >"$out/profile32_b$b.log" 2>&1 || rc=1
        echo "profile f32 B=$b:"; sed -n "/^## Profile/,\$p" "$out/profile32_b$b.md" | head -70
    done
fi
if [[ "$stages" == *" host "* ]]; then
    # The checkpoint, made by the benchmark's first row unless an earlier stage made it.
    [ -f "$ck/config.json" ] || bench --workloads s --sweep-batches 1 --rows cn-fused-bf16 --out "$out/host_checkpoint.md" \
        >"$out/host_checkpoint.log" 2>&1 || rc=1
    if gcc -O2 -shared -fPIC -o /tmp/cn_api_timer.so "$root/scripts/chronos2_bench/api_timer.c" -ldl; then
        runs=()
        for b in ${HOST_BATCHES:-1 16 64 256}; do
            if CN_API_TIMER_OUT="$out/host_events_b$b.txt" LD_PRELOAD=/tmp/cn_api_timer.so python3 "$root/scripts/chronos2_host_timeline.py" \
                --lib "$build/libcutenative.so" --checkpoint "$ck" --batch "$b" --events "$out/host_events_b$b.txt" \
                --out "$out/host_b$b.json" >"$out/host_b$b.log" 2>&1; then
                runs+=("$out/host_b$b.json")
            else
                rc=1; tail -5 "$out/host_b$b.log"
            fi
        done
        if [ ${#runs[@]} -gt 0 ]; then
            python3 "$root/scripts/chronos2_host_timeline.py" --table "${runs[@]}" >"$out/host.md" || rc=1
            echo "host timeline:"; cat "$out/host.md"
        fi
    else
        echo "host: the API timer did not build"; rc=1
    fi
fi
if [[ "$stages" == *" rolling "* ]]; then
    bench --workloads d --rows "${ROLLING_ROWS:-ref-f32,ref-bf16,cn-graph-bf16,cn-fused-f32,cn-fused-bf16}" --out "$out/rolling.md" >"$out/rolling.log" 2>&1 || rc=1
    echo "rolling:"; sed -n '/^## (d)/,$p' "$out/rolling.md" | head -40
fi
exit "$rc"
