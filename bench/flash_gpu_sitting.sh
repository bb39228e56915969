#!/usr/bin/env bash
# One GPU sitting for AlayaRenderer-Flash at full size (random weights): FPS and per-stage ms of one stream,
# batched sessions, and with torch.compile. Each step has its own time limit, so one stuck step leaves the others'
# figures. Run from the repository root on a CUDA machine:
#     OUT=results bash bench/flash_gpu_sitting.sh
# Results: $OUT/flash_gpu.json, $OUT/flash_batch.json, $OUT/flash_gpu_compile.json and $OUT/sitting.log.
set -u
OUT=${OUT:-bench-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log="$OUT/sitting.log"
step() {   # step NAME SECONDS COMMAND...
    local name=$1 limit=$2; shift 2
    echo "== $name ($(date -u +%H:%M:%S), limit ${limit}s)" | tee -a "$log"
    timeout "$limit" "$@" 2>&1 | tail -n 40 | tee -a "$log"
    echo "== $name exit ${PIPESTATUS[0]}" | tee -a "$log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$log"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$log"
step "one stream, full, 832x448, bf16" 150 \
    python3 -m bench.flash_gpu --frames 160 --json "$OUT/flash_gpu.json"
step "batched sessions 1,2,4" 180 \
    python3 -m bench.flash_batch_bench --config full --device cuda --width 832 --height 448 \
        --sessions 1,2,4 --chunks 5 --repeats 2 --json "$OUT/flash_batch.json"
step "one stream with torch.compile" 150 \
    python3 -m bench.flash_gpu --frames 160 --compile --json "$OUT/flash_gpu_compile.json"
step "profile: one stream and two batched sessions" 150 \
    python3 -m bench.flash_gpu_profile --json "$OUT/flash_gpu_profile.json"
