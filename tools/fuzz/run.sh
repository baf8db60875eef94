#!/usr/bin/env bash
# Runs the ortlite model-loading fuzzer (see docs/fuzzing.md).
#   tools/fuzz/run.sh SECONDS [extra libFuzzer flags...]
# Expects build/fuzz/fuzz_model (make -f tools/fuzz/fuzz.mk) and the seeds
# (tools/fuzz/make_corpus.py). The growing corpus lives in build/fuzz/corpus, crash /
# timeout / OOM inputs land in build/fuzz/artifacts/, the log in build/fuzz/fuzz.log.
# Fork mode with -ignore_crashes: one finding does not end the run; each is saved.
set -euo pipefail
SECONDS_TO_RUN=${1:-60}
shift || true
OUT=build/fuzz
mkdir -p "$OUT/corpus" "$OUT/artifacts"
# Past findings (tests/data/fuzz) seed the run too; git keeps no empty folder, so the
# folder is only passed when it exists.
SEED_DIRS=("$OUT/seeds")
[ -d tests/data/fuzz ] && SEED_DIRS+=(tests/data/fuzz)
# Triage aid: re-running one input is `build/fuzz/fuzz_model FILE`.
exec "$OUT/fuzz_model" "$OUT/corpus" "${SEED_DIRS[@]}" \
  -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
  -max_total_time="$SECONDS_TO_RUN" \
  -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
  -dict=tools/fuzz/onnx.dict -use_value_profile=1 \
  -artifact_prefix="$OUT/artifacts/" -print_final_stats=1 -print_funcs=0 "$@" 2>&1 | tee "$OUT/fuzz.log"
