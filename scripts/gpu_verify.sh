#!/usr/bin/env bash
# torchlint verify's GPU session as one command (docs/verify.md, "Measuring every rule in one command").
#
#   bash scripts/gpu_verify.sh RESULTS_DIR                  # on the GPU machine: RESULTS_DIR is $OUT
#   bash scripts/gpu_verify.sh --smoke RESULTS_DIR          # a dry run on this CPU (smoke sizes, 1 repeat)
#   ... [--fixtures DIR]                                    # other fixtures (tests)
#
# Run from the repository root with a Python that has torch and click (no LibCST needed).
# Within GPU_VERIFY_LIMIT_S (default 540 s: 9 minutes) it records the environment, runs the
# session's parts (python -m torchlint.verify.session: least certain rules first) under one
# shared deadline, each part writing RESULTS_DIR/<part>.json as it goes, merges them into
# RESULTS_DIR/verify.json and verify.md (a rule no part reached is NOT-RUN, with why), then
# (on the GPU, within GPU_VERIFY_CUDA_RUNS_S of its own, default 45 s, kept back from the parts)
# runs `torchlint run --device cuda` on a few bad fixtures (RESULTS_DIR/run-cuda-<rule>.json and
# .log; a failure is recorded, never fatal; --smoke skips them), prints the merged table and
# lists RESULTS_DIR. Exit: the merge's (0 all passed, 1 a verdict failed,
# 3 rules not run), 2 when no part wrote a report.
set -u

usage() {
    echo "usage: bash scripts/gpu_verify.sh [--smoke] RESULTS_DIR [--fixtures DIR]" >&2
    exit 2
}
smoke=0
if [ "${1:-}" = "--smoke" ]; then
    smoke=1
    shift
fi
[ $# -ge 1 ] || usage
out=$1
shift
fixtures=()
if [ "${1:-}" = "--fixtures" ] && [ $# -ge 2 ]; then
    fixtures=(--fixtures "$2")
    shift 2
fi
[ $# -eq 0 ] || usage

start=$(date +%s)
limit=${GPU_VERIFY_LIMIT_S:-540}
end=$((start + limit))
merge_s=20    # kept back at the end for the merge
probe_s=15    # a part's own start (import torch, the CUDA probe) before its --time-budget starts
min_part_s=30 # a part starts only with this much left
cuda_rules="TL401 TL403 TL302" # `torchlint run --device cuda` on these bad fixtures, after the parts
cuda_s=${GPU_VERIFY_CUDA_RUNS_S:-45} # their budget, kept back from the parts (none with --smoke)

mkdir -p "$out" || exit 2
log="$out/session.log"
say() { echo "[gpu_verify +$(($(date +%s) - start))s] $*" | tee -a "$log"; }

if ! command -v timeout >/dev/null 2>&1; then # coreutils missing: run without a per-command cap
    timeout() {
        while [ "${1#-}" != "$1" ]; do shift 2; done
        shift
        "$@"
    }
fi

# The interpreter: $PYTHON, else the first of python3 / python that has torch.
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    for candidate in python3 python; do
        if "$candidate" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" 2>/dev/null; then
            PY=$candidate
            break
        fi
    done
fi
PY=${PY:-python3}

if [ "$smoke" = 1 ]; then
    mode=(--dry-run)
    repeats_override=${GPU_VERIFY_REPEATS:-1}
    cuda_s=0
else
    mode=(--require-gpu)
    repeats_override=${GPU_VERIFY_REPEATS:-}
fi

# capture SECONDS FILE COMMAND...: COMMAND's output, capped in time, appended to FILE.
capture() {
    local seconds=$1 file=$2
    shift 2
    { echo "\$ $*"; timeout -k 5 "$seconds" "$@" </dev/null 2>&1; echo "(exit $?)"; echo; } >>"$file"
}

all_rules=""
finished=0
finish() { # merge whatever the parts wrote, print the table, list the results
    [ "$finished" = 1 ] && return
    finished=1
    local merge=() f rc
    for f in "$out"/part*.json; do
        [ -f "$f" ] && merge+=(--merge "$f")
    done
    if [ ${#merge[@]} -eq 0 ]; then
        say "no part wrote a report: see $log and $out/*.log"
        rc=2
    else
        local rules=()
        [ -n "$all_rules" ] && rules=(--rules "$all_rules")
        timeout -k 5 60 "$PY" -m torchlint.verify "${merge[@]}" ${rules[@]+"${rules[@]}"} \
            ${fixtures[@]+"${fixtures[@]}"} --output "$out/verify.json" --markdown "$out/verify.md" \
            </dev/null >"$out/merge.log" 2>&1
        rc=$?
        say "merge: exit $rc ($out/verify.json, $out/verify.md)"
        echo
        cat "$out/verify.md" 2>/dev/null || cat "$out/merge.log"
    fi
    echo
    say "done in $(($(date +%s) - start)) s; results in $out:"
    ls -l "$out"
    return $rc
}
trap 'finish; exit 143' TERM INT

say "torchlint GPU session$([ "$smoke" = 1 ] && echo ' (smoke: a dry run on the CPU)'): limit ${limit} s, python: $PY"

# 1. The environment: GPU, clocks, driver, versions, start-up costs, the doctor, the plan.
env_file="$out/environment.txt"
capture 10 "$env_file" date -u
capture 20 "$env_file" nvidia-smi
capture 20 "$env_file" nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw,power.limit --format=csv
capture 20 "$env_file" nvidia-smi -q -d CLOCK,PERFORMANCE
capture 60 "$out/doctor.txt" "$PY" -m torchlint.verify doctor
capture 60 "$env_file" "$PY" -c '
import importlib.metadata, platform, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import torch._dynamo  # what a script'"'"'s first optimizer imports
t2 = time.perf_counter()
print("python", platform.python_version(), "| torch", torch.__version__, "| CUDA", torch.version.cuda,
      "| cuDNN", torch.backends.cudnn.version(), "| click", importlib.metadata.version("click"))
print("TF32: matmul", torch.backends.cuda.matmul.allow_tf32, "| cuDNN", torch.backends.cudnn.allow_tf32)
print(f"start-up: import torch {t1 - t0:.2f} s, import torch._dynamo {t2 - t1:.2f} s")
if torch.cuda.is_available():
    t3 = time.perf_counter()
    x = torch.ones(256, 256, device="cuda")
    (x @ x).sum().item()
    t4 = time.perf_counter()
    print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0),
          f"| CUDA context + first matmul {t4 - t3:.2f} s")
'
capture 30 "$env_file" "$PY" -m torchlint.verify --plan ${fixtures[@]+"${fixtures[@]}"}
say "environment: $env_file, $out/doctor.txt"

# 2. The parts, least certain first, under one deadline.
if ! timeout -k 5 60 "$PY" -m torchlint.verify.session ${fixtures[@]+"${fixtures[@]}"} </dev/null >"$out/parts.tsv" 2>>"$log"; then
    say "cannot list the session's parts (python -m torchlint.verify.session failed)"
fi
all_rules=$(cut -f2 "$out/parts.tsv" 2>/dev/null | paste -sd, -)
while IFS=$'\t' read -r name rules repeats; do
    [ -n "$name" ] || continue
    repeats=${repeats_override:-$repeats}
    left=$((end - merge_s - cuda_s - $(date +%s)))
    if [ "$left" -lt "$min_part_s" ]; then
        say "$name (--rules $rules): not started, ${left} s left; its rules are NOT-RUN"
        continue
    fi
    budget=$((left - probe_s))
    say "$name: --rules $rules --repeats $repeats --time-budget $budget"
    timeout -k 10 "$left" "$PY" -m torchlint.verify "${mode[@]}" --rules "$rules" --repeats "$repeats" \
        --time-budget "$budget" --output "$out/$name.json" ${fixtures[@]+"${fixtures[@]}"} \
        </dev/null >"$out/$name.log" 2>&1
    rc=$?
    case $rc in
    0) what="all measured, nothing failed" ;;
    1) what="a verdict failed" ;;
    2) what="usage error or no usable GPU (see $out/doctor.txt)" ;;
    3) what="rules left out by the deadline" ;;
    124 | 137) what="stopped by its time limit (the report keeps what finished)" ;;
    *) what="see $out/$name.log" ;;
    esac
    say "$name: exit $rc: $what"
done <"$out/parts.tsv"

# 3. `torchlint run --device cuda` (experimental: docs/run.md) on a few bad fixtures, each with an
#    equal share of what is left before the merge (cuda_s, or more when the parts ended early);
#    failures are recorded, never fatal.
run_cuda() {
    local fixtures_dir=fixtures rule bad left cap rc what remaining
    [ ${#fixtures[@]} -eq 2 ] && fixtures_dir=${fixtures[1]}
    remaining=$(echo $cuda_rules | wc -w)
    for rule in $cuda_rules; do
        bad=$(ls -d "$fixtures_dir/$rule"-*/bad.py 2>/dev/null | head -1)
        left=$((end - merge_s - $(date +%s)))
        cap=$((left / remaining))
        remaining=$((remaining - 1))
        if [ -z "$bad" ]; then
            say "run-cuda-$rule: no fixture $fixtures_dir/$rule-*/bad.py"
            continue
        fi
        if [ "$cap" -lt 15 ]; then
            say "run-cuda-$rule: not started, ${left} s left"
            continue
        fi
        say "run-cuda-$rule: torchlint run --device cuda --steps 20 $bad (at most ${cap} s)"
        timeout -k 5 "$cap" "$PY" -m torchlint run --device cuda --steps 20 --timeout $((cap - 5)) \
            --output-format json -o "$out/run-cuda-$rule.json" "$bad" </dev/null >"$out/run-cuda-$rule.log" 2>&1
        rc=$?
        case $rc in
        0) what="nothing reported" ;;
        1) what="findings reported" ;;
        2) what="no CUDA device or a usage error" ;;
        124) what="stopped by --timeout (the report keeps what was observed)" ;;
        137) what="killed at its time limit" ;;
        *) what="the script failed" ;;
        esac
        say "run-cuda-$rule: exit $rc: $what (see $out/run-cuda-$rule.log)"
        grep -h "^GPU timings" "$out/run-cuda-$rule.log" 2>/dev/null | tee -a "$log"
    done
}
if [ "$smoke" = 1 ]; then
    say "torchlint run --device cuda ($cuda_rules): skipped (smoke: a dry run on the CPU, no GPU)"
else
    run_cuda
fi

# 4. The merged table.
finish
exit $?
