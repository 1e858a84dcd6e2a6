#!/usr/bin/env bash
# The device side of one machine lease for bench/gpu/h200.sh's queue phases, one device command each
# (each < 10 min; the machine is released after ~30 s idle, so they follow each other at once):
#   bench/gpu/remote_queue.sh start PHASE SPAN_S POLL_S  unpack the shipped bundle parts (/tmp/parts, the last one
#       shipped with this command as gpu_bundle/b/part04) into /tmp/site and, where shipped,
#       gpu_bundle/fi.tgz (FlashInfer, bench/gpu/flashinfer_aot.py) into /tmp/fi; copy bench/ and plugins/ to
#       /tmp/code; start the PHASE queue with a deadline SPAN_S seconds away (setsid: it outlives this
#       command); then poll as below
#   bench/gpu/remote_queue.sh poll POLL_S  wait up to POLL_S s for the queue's DONE (or its deadline), copying its
#       records to $OUT/res.tgz every 10 s; print the queue log and the tail of every FlashInfer log.
#       STOP_ON_FI_FAIL=1 returns at once when a FlashInfer job failed.
R=/tmp/i22
poll() {
  local t=$((SECONDS + $1)) E; E=$(cat $R/END)
  while [ $SECONDS -lt "$t" ] && [ ! -f $R/DONE ] && [ "$(date +%s)" -lt $((E + 20)) ]; do
    sleep 10; tar czf "$OUT/res.tgz" -C $R .
    if [ "${STOP_ON_FI_FAIL:-0}" = 1 ] && grep -q "flashinfer rc=[1-9]" $R/queue.log; then echo "a FlashInfer job failed"; break; fi
  done
  tar czf "$OUT/res.tgz" -C $R .
  echo "--- queue.log"; cat $R/queue.log
  for f in $R/flashinfer_check.log $R/*flashinfer.log; do
    [ -f "$f" ] && { echo "--- $f"; grep -v -E "it/s|s/it" "$f" | tail -c 2500; }
  done
  nvidia-smi --query-gpu=memory.used --format=csv,noheader
}
case $1 in
  start)
    cp gpu_bundle/b/part04 /tmp/parts/ && cat /tmp/parts/part0* >/tmp/site.tgz && mkdir -p /tmp/site \
      && tar xzf /tmp/site.tgz -C /tmp/site && rm -f /tmp/site.tgz || exit 1
    if [ -f gpu_bundle/fi.tgz ]; then rm -rf /tmp/fi && mkdir -p /tmp/fi && tar xzf gpu_bundle/fi.tgz -C /tmp/fi || exit 1; fi
    rm -rf /tmp/code $R; mkdir -p /tmp/code $R; cp -a bench plugins /tmp/code/
    cd /tmp/code || exit 1
    export PYTHONPATH=/tmp/site:/tmp/code/plugins FI=/tmp/fi QUEUE_END=$(($(date +%s) + $3))
    echo $QUEUE_END >$R/END
    setsid nohup bash bench/gpu/h200.sh "$2" $R >$R/queue.log 2>&1 </dev/null &
    sleep 1; poll "$4" ;;
  poll) poll "$2" ;;
  *) echo "usage: bench/gpu/remote_queue.sh start PHASE SPAN_S POLL_S | poll POLL_S" >&2; exit 2 ;;
esac
