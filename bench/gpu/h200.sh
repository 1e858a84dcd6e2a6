#!/usr/bin/env bash
# The H200 runs behind bench/results/gpu_h200.json, in two commands on a two-GPU machine (each < 10 min).
#   one: GPU 0 the Qwen2.5-VL-7B shape in-process (bench/gpu/h200.py engine), then the same shape behind
#        `vllm serve` (serve --dp 1); GPU 1 the Chandra 2 then the LightOnOCR-2 shape in-process
#   two: both GPUs: the operator's multi-GPU mode (one engine per GPU), then `vllm serve --data-parallel-size 2`
#   three: GPU 0 the Chandra 2 shape again (Triton GDN prefill); GPU 1 a max_num_batched_tokens sweep
#   single: a one-GPU machine: the Qwen2.5-VL-7B shape, then Chandra 2
# Issue 22, one H200, one command each, pages with the corpus's heavy-tailed lengths (bench/page_lengths.py):
#   olmocr: the olmOCR-2 shape (Qwen2.5-VL-7B) in bf16, modes b a c on 1024 pages (> 2 x max_num_seqs)
#   olmocr_fp8: the same with vLLM's online FP8 (--quantization fp8), modes b a (KV=fp8: FP8 KV cache too)
#   lighton: LightOnOCR-2 on 704 pages (> 2 x max_num_seqs) at exactly 1,000 output tokens with the Pixtral
#            per-image plugin (needs transformers 5.16.1 first on PYTHONPATH: TF516=DIR); PROFILE=N first
#            splits N pages' time (prefill-only vs full) and profiles decode; KV=fp8 the FP8 KV cache;
#            MICRO=1 the encoder-attention micro-benchmark (bench/gpu/lighton_profile.py) first
#   chandra: Chandra 2, modes b a c (one 10-minute command holds the ~260 s start and one mode: MODES=b, then a,c)
#   queue: one machine session's jobs back to back until QUEUE_END (epoch seconds), each started only while its
#          usual time still fits and cut at QUEUE_END: Chandra 2 c a b (varied lengths, one engine; b last, so
#          a cut loses only the mode session3 measured; CHANDRA_MODES=c,a leaves it out), the olmOCR-2 shape
#          at exactly 1,000 output tokens (FIXED_PAGES, default 1024) in bf16 and in FP8 + FP8 KV (b), then
#          FP8 + FP8 KV at max_num_seqs 1024 and the shape behind `vllm serve` while time is left;
#          QUEUE_SKIP=name,... leaves jobs out. Start it with
#          setsid so it outlives the device command that starts it (10 minutes at most); later commands
#          wait for OUTDIR/DONE and copy what is there.
#   fp8: the same kind of queue for where FP8's gain goes (see the phase)
#   attn: the same kind of queue for the decoder's attention backend: bf16 and FP8 + FP8 KV under vLLM's default
#         (FlashAttention 3) and under its Triton backend, then FP8 with CUDA graphs over the vision encoder
#   flashinfer: the same kind of queue for FlashInfer (FI=DIR): FP8 + FP8 KV on it, bf16 and FP8 + FP8 KV on the
#         default backend, bf16 on FlashInfer
# MODES=m,m,... picks and orders the modes of any of these phases.
# Usage (repo root, vLLM importable): bench/gpu/h200.sh PHASE OUTDIR
# Model folders: bench/models/build.py bench/.work/h200/models; PDFs: a handful of corpus files in bench/.work/h200/pdfs.
set -u
PHASE=$1 OUTDIR=$2 W=${W:-/tmp/h200} M=bench/.work/h200/models SRC=bench/.work/h200/pdfs
LENGTHS="--lengths bench/results/page_lengths.json"
mkdir -p "$W" "$OUTDIR"
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

job() {  # NAME GPUS LIMIT_S ARGS... : one bench job, its JSON and log copied to OUTDIR when it ends
  local name=$1 gpus=$2 limit=$3; shift 3
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$gpus timeout -k 15 "$limit" python3 -m bench.gpu.h200 "$@" --out "$OUTDIR/$name.json" \
    >"$OUTDIR/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0)) s"
  gpu_free "$gpus"
}

gpu_free() {  # GPUS: wait up to 20 s for a job's engine processes to free these GPUs, then kill what holds them
  local t=$((SECONDS + 20)) held  # (a job cut by its limit can leave its engine core process behind)
  while held=$(nvidia-smi -i "$1" --query-compute-apps=pid --format=csv,noheader) && [ -n "$held" ]; do
    [ $SECONDS -lt $t ] || { echo "killing $held"; kill -9 $held; sleep 3; return; }
    sleep 1
  done
}

shape() { echo "--shape $1 --model $M/$1 --source $SRC"; }

queued() {  # NAME MIN_S LIMIT_S ARGS...: the job when MIN_S still fit before QUEUE_END, its limit cut there
  local name=$1 min=$2 limit=$3 left=$((${QUEUE_END:?epoch seconds} - $(date +%s) - 10)); shift 3
  case ",${QUEUE_SKIP:-}," in *",$name,"*) echo "$name skipped"; return ;; esac
  if [ "$left" -lt "$min" ]; then echo "$name not started: ${left} s left, needs ${min} s"; return; fi
  job "$name" 0 $((limit < left ? limit : left)) "$@"
}

plugin_path() {  # a dist-info declaring this project's vLLM plugin, for a tree run without `pip install`
  local d=$W/plugin/chandra_ocr_airflow-0.1.0.dist-info
  mkdir -p "$d"
  printf 'Metadata-Version: 2.1\nName: chandra-ocr-airflow\nVersion: 0.1.0\n' >"$d/METADATA"
  printf '[vllm.general_plugins]\npixtral_per_image = chandra_ocr.ocr.vllm_pixtral:register\n' >"$d/entry_points.txt"
  echo "$W/plugin"
}

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
  olmocr)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUTDIR/gpus.csv"
    job olmocr2_bf16 0 ${LIMIT:-560} engine $(shape qwen2_5_vl_7b) --pages 1024 $LENGTHS --modes ${MODES:-b,a,c} \
      --repeats ${REPEATS:-1} --c-budget-s 60 ;;
  olmocr_fp8)
    job olmocr2_fp8${KV:+_kv$KV} 0 ${LIMIT:-560} engine $(shape qwen2_5_vl_7b) --pages 1024 $LENGTHS \
      --modes ${MODES:-b,a} --repeats ${REPEATS:-1} --quantization fp8 --kv-cache-dtype ${KV:-auto} ;;
  lighton)  # KV=fp8: FP8 KV cache; PROFILE=N: time N pages prefill-only vs full, vLLM's profiler over decode
    if [ -n "${MICRO:-}" ]; then
      PYTHONPATH=${TF516:?transformers 5.16.1 folder}:$PYTHONPATH timeout 120 python3 -m bench.gpu.lighton_profile \
        --model $M/lightonocr_2_1b --source $SRC --out "$OUTDIR/lighton_profile.json" >"$OUTDIR/lighton_profile.log" 2>&1
      echo "lighton_profile rc=$?"
    fi
    PYTHONPATH=${TF516:?transformers 5.16.1 folder}:$(plugin_path):$PYTHONPATH job lightonocr2${KV:+_kv$KV} 0 ${LIMIT:-430} \
      engine $(shape lightonocr_2_1b) --pages ${PAGES:-704} --output-tokens 1000 --modes ${MODES:-b,a,c} \
      --repeats ${REPEATS:-1} --c-budget-s 50 --kv-cache-dtype ${KV:-auto} ${PROFILE:+--profile-pages $PROFILE} ;;
  chandra)
    job chandra2 0 ${LIMIT:-580} engine $(shape chandra_ocr_2) --pages 1024 $LENGTHS --modes ${MODES:-b,a,c} \
      --repeats ${REPEATS:-1} --c-budget-s 50 ;;
  queue)
    fixed="--pages ${FIXED_PAGES:-1024} --output-tokens 1000 --modes b --repeats 1"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUTDIR/gpus.csv"
    queued chandra2 570 1000 engine $(shape chandra_ocr_2) --pages 1024 $LENGTHS --modes ${CHANDRA_MODES:-c,a,b} --repeats 1 \
      --c-budget-s 50
    queued olmocr2_bf16_fixed 200 420 engine $(shape qwen2_5_vl_7b) $fixed --split-pages 128
    queued olmocr2_fp8_kvfp8_fixed 190 420 engine $(shape qwen2_5_vl_7b) $fixed --split-pages 128 \
      --quantization fp8 --kv-cache-dtype fp8
    queued olmocr2_fp8_kvfp8_fixed_seqs1024 260 420 engine $(shape qwen2_5_vl_7b) $fixed --quantization fp8 \
      --kv-cache-dtype fp8 --paging max_num_seqs=1024
    queued serve1_fixed 300 420 serve $(shape qwen2_5_vl_7b) --dp 1 --pages 1024 --output-tokens 1000
    echo done >"$OUTDIR/DONE" ;;
  fp8)  # where FP8's gain goes, queued like `queue`: the image processor alone; on the corpus lengths (mode b, each
        # engine step timed by batch size) bf16 and vLLM's online FP8 + FP8 KV (vision tower FP8 too), the
        # vision encoder compiled and pages rendered ahead of the engine loop (both the defaults on a GPU);
        # both again with pages rendered on the loop (--render-threads 0: session9's engine); last the
        # published FP8 checkpoint's layout (shape olmocr2_7b_fp8: compressed-tensors, vision tower bf16)
        # + FP8 KV. Session9 measured the encoder eager (--compile-encoder off), max_num_seqs 1024 and
        # max_num_batched_tokens 16384 (bench/results/gpu_h200.json).
        # KPROF=PAGES,TOKENS,DELAY,STEPS adds vLLM's profiler over one such pass (session7 profiled decode with
        # 512,600,400,100; a prefill window, 512,600,20,60, took ~2 min to stop). QUEUE_SKIP leaves jobs out.
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUTDIR/gpus.csv"
    varied="--pages 1024 $LENGTHS --modes b --repeats 1 --step-times ${KPROF:+--kernel-profile $KPROF}"
    queued preprocess 30 60 preprocess $(shape qwen2_5_vl_7b) --pages 32
    queued olmocr2_bf16 380 480 engine $(shape qwen2_5_vl_7b) $varied
    queued olmocr2_fp8_kvfp8 360 470 engine $(shape qwen2_5_vl_7b) $varied --quantization fp8 --kv-cache-dtype fp8
    queued olmocr2_bf16_looprender 380 480 engine $(shape qwen2_5_vl_7b) $varied --render-threads 0
    queued olmocr2_fp8_kvfp8_looprender 360 470 engine $(shape qwen2_5_vl_7b) $varied --quantization fp8 \
      --kv-cache-dtype fp8 --render-threads 0
    queued olmocr2_7b_fp8_kvfp8 360 470 engine $(shape olmocr2_7b_fp8) $varied --kv-cache-dtype fp8
    echo done >"$OUTDIR/DONE" ;;
  attn)  # the decoder attention backend, queued like `queue`, on the corpus lengths (mode b, steps timed): session7's
         # profile had FlashAttention 3 over an FP8 KV cache at ~55 % of HBM bandwidth (bf16 ~85 %), 60 % of an FP8
         # decode step. bf16 (default backend), FP8 + FP8 KV on TRITON_ATTN, bf16 on TRITON_ATTN, FP8 + FP8 KV on
         # the default, then FP8 + FP8 KV with the vision encoder under CUDA graphs (cudagraph_mm_encoder).
         # Session11 ran it (its fifth job as a separate command after the fourth: bench/results/gpu_h200.json).
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUTDIR/gpus.csv"
    varied="--pages 1024 $LENGTHS --modes b --repeats 1 --step-times"
    fp8="--quantization fp8 --kv-cache-dtype fp8" triton="--engine-arg attention_backend=TRITON_ATTN"
    queued olmocr2_bf16 360 480 engine $(shape qwen2_5_vl_7b) $varied
    queued olmocr2_fp8_kvfp8_triton 340 470 engine $(shape qwen2_5_vl_7b) $varied $fp8 $triton
    queued olmocr2_bf16_triton 330 480 engine $(shape qwen2_5_vl_7b) $varied $triton
    queued olmocr2_fp8_kvfp8 300 470 engine $(shape qwen2_5_vl_7b) $varied $fp8
    queued olmocr2_fp8_kvfp8_cgenc 300 470 engine $(shape qwen2_5_vl_7b) $varied $fp8 \
      --engine-arg 'compilation_config={"cudagraph_mm_encoder":true}'
    echo done >"$OUTDIR/DONE" ;;
  flashinfer)  # FP8 KV on vLLM's FLASHINFER backend, queued like `queue`, on the corpus lengths (mode b, steps timed):
         # session11's FlashAttention 3 and Triton runs left the long-context decode plateau attention-bound. On
         # Hopper with an FP8 cache vLLM decodes with FlashInfer's XQA kernel and prefills with its FA3 template.
         # FI=DIR holds flashinfer-python 0.6.13 (its kernels pre-built by bench/gpu/flashinfer_aot.py); it is put on
         # PYTHONPATH for the FlashInfer jobs only, with VLLM_HAS_FLASHINFER_CUBIN=1 standing in for the
         # flashinfer-cubin package a pip-installed vLLM 0.25 has (XQA is compiled, not a cubin). FP8 + FP8 KV
         # on FlashInfer, bf16 and FP8 + FP8 KV on the default backend, then bf16 on FlashInfer (after a
         # FlashInfer job that ran).
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUTDIR/gpus.csv"
    varied="--pages 1024 $LENGTHS --modes b --repeats 1 --step-times"
    fp8="--quantization fp8 --kv-cache-dtype fp8" fi="--engine-arg attention_backend=FLASHINFER"
    fi_path=${FI:?FI=DIR with flashinfer}:$PYTHONPATH
    PYTHONPATH=$fi_path python3 -m bench.gpu.flashinfer_aot check >"$OUTDIR/flashinfer_check.log" 2>&1
    PYTHONPATH=$fi_path VLLM_HAS_FLASHINFER_CUBIN=1 queued olmocr2_fp8_kvfp8_flashinfer 360 560 \
      engine $(shape qwen2_5_vl_7b) $varied $fp8 $fi
    queued olmocr2_bf16 330 480 engine $(shape qwen2_5_vl_7b) $varied
    queued olmocr2_fp8_kvfp8 300 470 engine $(shape qwen2_5_vl_7b) $varied $fp8
    if python3 -c 'import json, sys; sys.exit("b" not in json.load(open(sys.argv[1])))' \
        "$OUTDIR/olmocr2_fp8_kvfp8_flashinfer.json" 2>/dev/null; then
      PYTHONPATH=$fi_path VLLM_HAS_FLASHINFER_CUBIN=1 queued olmocr2_bf16_flashinfer 330 480 \
        engine $(shape qwen2_5_vl_7b) $varied $fi
    fi
    echo done >"$OUTDIR/DONE" ;;
  two)
    job multi 0,1 230 multi $(shape qwen2_5_vl_7b) --gpus 0,1 --pages 512
    job serve2 0,1 300 serve $(shape qwen2_5_vl_7b) --dp 2 --pages 512 ;;
esac
