#!/bin/sh
# ctest: examples/c/simple.c (cn_simple) on a fixture checkpoint prints the same quantiles as the CSV tool
# (cn_forecast_csv) given the same series, the first 24 months of examples/data/airpassengers.csv.
#   check_simple.sh <cn_simple> <cn_forecast_csv> <model_dir> <airpassengers.csv>
set -eu
simple=$1 csvtool=$2 model=$3 csv=$4
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
head -n 25 "$csv" >"$d/series.csv"
"$simple" "$model" 12 >"$d/simple.out"
"$csvtool" "$model" "$d/series.csv" 12 0.1,0.5,0.9 >"$d/csv.out"
cat "$d/simple.out"
[ "$(head -n 1 "$d/simple.out")" = "step q0.1 q0.5 q0.9" ] || { echo "unexpected header" >&2; exit 1; }
[ "$(wc -l <"$d/simple.out")" -eq 13 ] || { echo "expected 12 steps" >&2; exit 1; }
tail -n +2 "$d/csv.out" | cut -d' ' -f2- >"$d/csv.cut"
tail -n +2 "$d/simple.out" >"$d/simple.cut"
if ! diff "$d/csv.cut" "$d/simple.cut"; then
    echo "cn_simple and cn_forecast_csv disagree on the same series" >&2
    exit 1
fi
echo "cn_simple agrees with cn_forecast_csv (12 steps, 3 levels)"
