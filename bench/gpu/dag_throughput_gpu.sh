#!/usr/bin/env bash
# The device side of bench/dag_throughput.py's GPU runs, one device command each (each < 10 min; what a
# command starts under setsid outlives it while the machine is held):
#   bench/gpu/dag_throughput_gpu.sh part FILE...      copy shipped bundle parts to /tmp/parts
#   bench/gpu/dag_throughput_gpu.sh start DIR POLL_S  unpack /tmp/parts (+ DIR/b/part*) to /tmp/site, copy DIR/code
#       (bench/ and plugins/) and DIR/models to /tmp, start the queue below (setsid), then poll
#   bench/gpu/dag_throughput_gpu.sh poll POLL_S       wait up to POLL_S s for the queue's DONE; copy results to $OUT
#   bench/gpu/dag_throughput_gpu.sh next ITEMS POLL_S replace the items not begun yet (e.g. a smaller last
#       one once the device time left is known; "" drops them), then poll
# The queue: QUEUE="SHAPE:MODE[:K] ..." (default: the olmOCR-2 shape warm, then one process), one
# bench.dag_throughput command each over K tasks of B pages (default 20 × 100 = 2,000 pages; O: the warm
# design's tasks at once, default the setup's figure from the model's capacity); MODE per_task runs one
# task process per command; MODE warmup runs one process over one task of WB pages (default 20) into
# warmup.json, only to fill vLLM's compile cache for the shape (it pays the cold cache, the runs after it
# find it warm). Each merges into gpu.json (warmup.json) as it ends, so a cut queue keeps every finished
# part. SPAN_S (the device time the queue may use, from its start): before each item bench.gpu.queue_fit
# cuts K to what ends in the time left, or skips the item (estimates from the items already run).
# Locally (a check on the CPU): CODE=. R=DIR EXTRA=--tiny bash bench/gpu/dag_throughput_gpu.sh queue
R=${R:-/tmp/dag}
CODE=${CODE:-/tmp/code}
poll() {
  local t=$((SECONDS + $1))
  while [ $SECONDS -lt "$t" ] && [ ! -f $R/DONE ]; do sleep 5; cp $R/*.json "$OUT/" 2>/dev/null; done
  cp $R/*.json $R/queue.log "$OUT/" 2>/dev/null; tail -c 4000 $R/queue.log
  echo "--- not begun: $(tr '\n' ' ' <$R/items 2>/dev/null)"
  tar czf "$OUT/logs.tgz" /tmp/dag_throughput_* 2>/dev/null
  nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
}
pop() {  # the first item not begun, removed from the list (under a lock: `next` may rewrite it)
  flock $R/items.lock sh -c "head -n1 $R/items; sed -i 1d $R/items"
}
run_item() {
  local shape=${1%%:*} rest=${1#*:} mode k i
  mode=${rest%%:*} k=${rest#*:}; [ "$k" = "$rest" ] && k=${K:-20}
  if [ -f $R/END ]; then
    k=$(python3 -m bench.gpu.queue_fit "$shape" "$mode" "$k" "${B:-100}" $(($(cat $R/END) - $(date +%s))) $R/*.json)
    [ "$k" = 0 ] && { echo "$1 skipped: too little time left"; return; }
  fi
  local common=(--shape "$shape" --model "/tmp/models/$shape" --lengths bench/results/page_lengths.json
                --batch-pages "${B:-100}" ${O:+--overlap "$O"} $EXTRA)
  echo "$1 begins $(date -u +%T) ($k tasks)"
  case $mode in
    warmup) python3 -m bench.dag_throughput "${common[@]}" --batch-pages "${WB:-20}" --tasks 1 \
              --modes one_process --out $R/warmup.json || echo "$1 failed" ;;
    per_task)
      for i in $(seq 0 $((k - 1))); do
        python3 -m bench.dag_throughput "${common[@]}" --tasks "$k" --out $R/gpu.json --modes per_task \
          --tasks-range $i:$((i + 1)) || { echo "$1 failed"; break; }
      done ;;
    *) python3 -m bench.dag_throughput "${common[@]}" --tasks "$k" --out $R/gpu.json --modes "$mode" \
         || echo "$1 failed" ;;
  esac
  echo "$1 ends $(date -u +%T)"
}
queue() {
  cd "$CODE" || exit 1
  local item
  rm -f $R/END; [ -n "$SPAN_S" ] && echo $(($(date +%s) + SPAN_S)) >$R/END
  for item in ${QUEUE:-qwen2_5_vl_7b:warm qwen2_5_vl_7b:one_process}; do echo "$item"; done >$R/items
  while item=$(pop) && [ -n "$item" ]; do run_item "$item"; done
  echo "done $(date -u +%T)"
  touch $R/DONE
}
case $1 in
  part) mkdir -p /tmp/parts && cp "${@:2}" /tmp/parts/ && ls -la /tmp/parts && nvidia-smi --query-gpu=name --format=csv,noheader ;;
  start)
    cp "$2"/b/part* /tmp/parts/ 2>/dev/null; cat /tmp/parts/part* >/tmp/site.tgz && rm -rf /tmp/site && mkdir -p /tmp/site \
      && tar xzf /tmp/site.tgz -C /tmp/site && rm -f /tmp/site.tgz || exit 1
    rm -rf $CODE /tmp/models $R; mkdir -p $R; cp -a "$2/code" $CODE && cp -a "$2/models" /tmp/models || exit 1
    export PYTHONPATH=/tmp/site:$CODE/plugins:$CODE VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
    setsid nohup bash $CODE/bench/gpu/dag_throughput_gpu.sh queue >$R/queue.log 2>&1 </dev/null &
    sleep 1; poll "$3" ;;
  queue) mkdir -p $R && queue ;;
  poll) poll "$2" ;;
  next)
    flock $R/items.lock sh -c "for i in $2; do echo \$i; done >$R/items"
    poll "$3" ;;
  *) echo "usage: $0 part FILE... | start DIR POLL_S | poll POLL_S | next ITEMS POLL_S" >&2; exit 2 ;;
esac
