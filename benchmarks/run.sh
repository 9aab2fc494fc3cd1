#!/bin/sh
# Reproduce the numbers in BENCHMARKS.md. Run from the repository root; the traces are read from
# ../shared/traces (override with TRACES=...). Each command is independent; outputs go to $OUT.
# Replays run one at a time (--jobs 1), as they were measured; drop it to use every CPU.
set -e
TRACES=${TRACES:-../shared/traces}
OUT=${OUT:-/tmp/nodemanager-benchmarks}
mkdir -p "$OUT"
LPC="$TRACES/LPC-EGEE-2004-1.2-cln.swf.gz"
HPC="$TRACES/HPC2N-2002-2.2-cln.swf.gz"
SWEEP="--compare --sweep idle_grace=60,120,600,1200 --jobs 1"

case "${1:-all}" in
  lpc30|all)  nodemanager simulate --trace "$LPC" --days 30 $SWEEP --report "$OUT/lpc30" ;;
esac
case "${1:-all}" in
  lpc30h|all) nodemanager simulate --trace "$LPC" --days 30 $SWEEP --billing hourly --report "$OUT/lpc30h" ;;
esac
case "${1:-all}" in
  hpc30|all)  nodemanager simulate --trace "$HPC" --skip-days 300 --days 30 $SWEEP --report "$OUT/hpc30" ;;
esac
case "${1:-all}" in
  hpc30h|all) nodemanager simulate --trace "$HPC" --skip-days 300 --days 30 $SWEEP --billing hourly --report "$OUT/hpc30h" ;;
esac
case "${1:-all}" in
  lpc30h-cycle|all)
    # our default under hourly billing with the controller cycle at 10 (the default), 30 and 60 s
    nodemanager simulate --trace "$LPC" --days 30 --billing hourly --sweep cycle_interval=10,30,60 --jobs 1 ;;
esac
case "${1:-all}" in
  cost-target|all) python benchmarks/cost_target.py --traces "$TRACES" ;;   # the cost target vs clairvoyance
esac
case "${1:-all}" in
  spot|all) python benchmarks/spot_table.py --traces "$TRACES" ;;   # the spot table
  sizes|all)
    # one size and 2,4,8,16 cores, breadth- and depth-first placement, per-second billing
    for w in "--trace $LPC --days 30" "--trace $HPC --skip-days 300 --days 30"; do
      for extra in "" "--placement depth" "--sizes 2,4,8,16" "--sizes 2,4,8,16 --placement depth"; do
        nodemanager simulate $w --compare --jobs 1 $extra
      done
    done ;;
esac
case "${1:-all}" in
  lpcfull|all) nodemanager simulate --trace "$LPC" --jobs 1 ;;
esac
case "${1:-all}" in
  startup|all) python benchmarks/bench_startup.py ;;
esac
case "${1:-all}" in
  http|all) python benchmarks/bench_http.py --requests 50 ;;
esac
case "${1:-all}" in
  bench|all)  nodemanager bench --repeat 11; python benchmarks/bench_cycle.py 1000 10000 50000 ;;
esac
case "${1:-all}" in
  logescape|all) python benchmarks/bench_log_escape.py ;;
esac
case "${1:-all}" in
  snapshot|all) python benchmarks/bench_snapshot_http.py ;;
esac
case "${1:-all}" in
  poll|all)   python benchmarks/bench_poll.py --repeat 3 ;;
esac
case "${1:-all}" in
  match|all)  python benchmarks/bench_match.py ;;
  placement|all) python benchmarks/bench_placement.py --repeat 5 ;;
  replay|all) python benchmarks/bench_replay.py --days 3 ;;   # --days 30 for the whole window
esac
case "${1:-all}" in
  reuse|all) PYTHONPATH=. python benchmarks/plan_reuse_equivalence.py ;;   # 350 worlds x 40 cycles, each kind
esac
