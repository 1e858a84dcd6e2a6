#!/usr/bin/env bash
# The H200 runs behind bench/results/gpu_h200.json, in two commands on a two-GPU machine (each < 10 min).
#   one: GPU 0 the Qwen2.5-VL-7B shape in-process (bench/gpu_h200.py engine), then the same shape behind
#        `vllm serve` (serve --dp 1); GPU 1 the Chandra 2 then the LightOnOCR-2 shape in-process
#   two: both GPUs: the operator's multi-GPU mode (one engine per GPU), then `vllm serve --data-parallel-size 2`
#   three: GPU 0 the Chandra 2 shape again (Triton GDN prefill); GPU 1 a max_num_batched_tokens sweep
#   single: a one-GPU machine: the Qwen2.5-VL-7B shape, then Chandra 2
# Usage (repo root, vLLM importable): bench/gpu_h200.sh one|two|three|single OUTDIR
# Model folders: bench/models/build.py bench/.work/h200/models; PDFs: a handful of corpus files in bench/.work/h200/pdfs.
set -u
PHASE=$1 OUTDIR=$2 W=${W:-/tmp/h200} M=bench/.work/h200/models SRC=bench/.work/h200/pdfs
mkdir -p "$W" "$OUTDIR"
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

job() {  # NAME GPUS LIMIT_S ARGS... : one bench job, its JSON and log copied to OUTDIR when it ends
  local name=$1 gpus=$2 limit=$3; shift 3
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$gpus timeout -k 15 "$limit" python3 bench/gpu_h200.py "$@" --out "$OUTDIR/$name.json" \
    >"$OUTDIR/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0)) s"
}

shape() { echo "--shape $1 --model $M/$1 --source $SRC"; }

case $PHASE in
  one)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUTDIR/gpus.csv"
    (job qwen 0 360 engine $(shape qwen2_5_vl_7b) --pages 256 --sweep 128,192 --barrier-pages 84
     job serve1 0 190 serve $(shape qwen2_5_vl_7b) --dp 1 --pages 256) &
    (job chandra 1 320 engine $(shape chandra_ocr_2) --pages 256 --sweep "" --barrier-pages 84
     job lighton 1 220 engine $(shape lightonocr_2_1b) --pages 256 --sweep "" --barrier-pages 84) &
    wait ;;
  single)  # a one-GPU machine: the Qwen2.5-VL-7B shape, then Chandra 2 while time lasts
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUTDIR/gpus.csv"
    job qwen 0 330 engine $(shape qwen2_5_vl_7b) --pages 256 --sweep 128 --barrier-pages 84
    job chandra 0 250 engine $(shape chandra_ocr_2) --pages 256 --sweep "" --barrier-pages 84 ;;
  three)  # GPU 0 the Chandra 2 shape; GPU 1 the sizer's max_num_batched_tokens against larger ones (Qwen shape)
    (job chandra 0 480 engine $(shape chandra_ocr_2) --pages 256 --sweep "" --barrier-pages 84) &
    (for t in 8192 16384; do
       job "mnbt$t" 1 200 engine $(shape qwen2_5_vl_7b) --pages 256 --sweep "" --modes b0 --paging max_num_batched_tokens=$t
     done) &
    wait ;;
  two)
    job multi 0,1 230 multi $(shape qwen2_5_vl_7b) --gpus 0,1 --pages 512
    job serve2 0,1 300 serve $(shape qwen2_5_vl_7b) --dp 2 --pages 512 ;;
esac
