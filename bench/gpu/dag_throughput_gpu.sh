#!/usr/bin/env bash
# The device side of bench/dag_throughput.py's GPU run, one device command each (each < 10 min; what a
# command starts under setsid outlives it while the machine is held):
#   bench/gpu/dag_throughput_gpu.sh part FILE        copy one shipped bundle part to /tmp/parts
#   bench/gpu/dag_throughput_gpu.sh start DIR POLL_S  unpack /tmp/parts (+ DIR/b/part*) to /tmp/site, copy DIR/code
#       (bench/ and plugins/) and DIR/models to /tmp, start the queue below (setsid), then poll
#   bench/gpu/dag_throughput_gpu.sh poll POLL_S       wait up to POLL_S s for the queue's DONE; copy results to $OUT
# The queue: warm, one_process, then per_task one task process at a time (--tasks-range i:i+1), each
# merged into /tmp/dag/gpu.json as it ends, so a cut queue still leaves every finished part.
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
  local common=(--shape qwen2_5_vl_7b --model /tmp/models/qwen2_5_vl_7b --out $R/gpu.json
                --lengths bench/results/page_lengths.json --tasks "${K:-5}" --batch-pages "${B:-100}" --overlap "${O:-4}")
  echo "warm+one_process $(date -u +%T)"
  python3 -m bench.dag_throughput "${common[@]}" --modes "${MODES:-warm,one_process}" || { touch $R/DONE; exit 1; }
  for i in $(seq 0 $((${K:-5} - 1))); do
    echo "per_task $i $(date -u +%T)"
    python3 -m bench.dag_throughput "${common[@]}" --modes per_task --tasks-range $i:$((i + 1)) || break
  done
  touch $R/DONE
}
case $1 in
  part) mkdir -p /tmp/parts && cp "$2" /tmp/parts/ && ls -la /tmp/parts && nvidia-smi --query-gpu=name --format=csv,noheader ;;
  start)
    cp "$2"/b/part* /tmp/parts/ 2>/dev/null; cat /tmp/parts/part* >/tmp/site.tgz && rm -rf /tmp/site && mkdir -p /tmp/site \
      && tar xzf /tmp/site.tgz -C /tmp/site && rm -f /tmp/site.tgz || exit 1
    rm -rf /tmp/code /tmp/models $R; mkdir -p $R; cp -a "$2/code" /tmp/code && cp -a "$2/models" /tmp/models || exit 1
    export PYTHONPATH=/tmp/site:/tmp/code/plugins VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
    setsid nohup bash /tmp/code/bench/gpu/dag_throughput_gpu.sh queue >$R/queue.log 2>&1 </dev/null &
    sleep 1; poll "$3" ;;
  queue) queue ;;
  poll) poll "$2" ;;
  *) echo "usage: $0 part FILE | start DIR POLL_S | poll POLL_S" >&2; exit 2 ;;
esac
