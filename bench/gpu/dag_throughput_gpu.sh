#!/usr/bin/env bash
# The device side of bench/dag_throughput.py's GPU runs, one device command each (each < 10 min; what a
# command starts under setsid outlives it while the machine is held):
#   bench/gpu/dag_throughput_gpu.sh part FILE        copy one shipped bundle part to /tmp/parts
#   bench/gpu/dag_throughput_gpu.sh start DIR POLL_S  unpack /tmp/parts (+ DIR/b/part*) to /tmp/site, copy DIR/code
#       (bench/ and plugins/) and DIR/models to /tmp, start the queue below (setsid), then poll
#   bench/gpu/dag_throughput_gpu.sh poll POLL_S       wait up to POLL_S s for the queue's DONE; copy results to $OUT
# The queue: QUEUE="SHAPE:MODE ..." (default: the olmOCR-2 shape warm, then one process), one
# bench.dag_throughput command each over K tasks of B pages (default 20 × 100 = 2,000 pages; O: the warm
# design's tasks at once, default the setup's figure from the model's capacity); MODE per_task runs one
# task process per command. Each merges into /tmp/dag/gpu.json as it ends, so a cut queue keeps every
# finished part.
R=/tmp/dag
poll() {
  local t=$((SECONDS + $1))
  while [ $SECONDS -lt "$t" ] && [ ! -f $R/DONE ]; do sleep 5; cp $R/gpu.json "$OUT/" 2>/dev/null; done
  cp $R/gpu.json $R/queue.log "$OUT/" 2>/dev/null; tail -c 4000 $R/queue.log
  tar czf "$OUT/logs.tgz" /tmp/dag_throughput_* 2>/dev/null
  nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
}
queue() {
  cd /tmp/code || exit 1
  local item shape mode i
  for item in ${QUEUE:-qwen2_5_vl_7b:warm qwen2_5_vl_7b:one_process}; do
    shape=${item%%:*} mode=${item#*:}
    local common=(--shape "$shape" --model "/tmp/models/$shape" --out $R/gpu.json
                  --lengths bench/results/page_lengths.json --tasks "${K:-20}" --batch-pages "${B:-100}" ${O:+--overlap "$O"})
    echo "$shape $mode $(date -u +%T)"
    if [ "$mode" = per_task ]; then
      for i in $(seq 0 $((${K:-20} - 1))); do
        python3 -m bench.dag_throughput "${common[@]}" --modes per_task --tasks-range $i:$((i + 1)) || break
      done
    else
      python3 -m bench.dag_throughput "${common[@]}" --modes "$mode" || echo "$item failed"
    fi
  done
  echo "done $(date -u +%T)"
  touch $R/DONE
}
case $1 in
  part) mkdir -p /tmp/parts && cp "$2" /tmp/parts/ && ls -la /tmp/parts && nvidia-smi --query-gpu=name --format=csv,noheader ;;
  start)
    cp "$2"/b/part* /tmp/parts/ 2>/dev/null; cat /tmp/parts/part* >/tmp/site.tgz && rm -rf /tmp/site && mkdir -p /tmp/site \
      && tar xzf /tmp/site.tgz -C /tmp/site && rm -f /tmp/site.tgz || exit 1
    rm -rf /tmp/code /tmp/models $R; mkdir -p $R; cp -a "$2/code" /tmp/code && cp -a "$2/models" /tmp/models || exit 1
    export PYTHONPATH=/tmp/site:/tmp/code/plugins:/tmp/code VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
    setsid nohup bash /tmp/code/bench/gpu/dag_throughput_gpu.sh queue >$R/queue.log 2>&1 </dev/null &
    sleep 1; poll "$3" ;;
  queue) queue ;;
  poll) poll "$2" ;;
  *) echo "usage: $0 part FILE | start DIR POLL_S | poll POLL_S" >&2; exit 2 ;;
esac
