#!/usr/bin/env bash
# Scaling on one machine, 2 workers against 1 worker with the same 2 cores: training throughput
# of the seed CNN (img/s of 'clnet train', the median of ROUNDS alternating runs) for
#   omp2      1 process, OpenMP backend, 2 threads
#   mpi2      2 MPI ranks (loopback) x 1 thread; the all-reduce overlapped with the backward pass
#   mpi2-seq  the same with CLNET_MPI_OVERLAP=0 (the all-reduce after the backward pass)
#   pocl1     1 POCL device with 2 threads
#   pocl2     2 POCL devices in one process (--devices cl:0,cl:1), 1 thread each
#   mixed     omp (1 thread) + POCL (1 thread) in one process, with the split it settles on
# Efficiency = throughput ratio (mpi2 / omp2, pocl2 / pocl1); the exposed communication per
# step comes from rank 0's 'MPI:' log line.
# Usage: tools/bench/scaling.sh [BUILD_DIR] [LIMIT] [ROUNDS]   (defaults: build 16384 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}/tools/clnet
LIMIT=${2:-16384}
ROUNDS=${3:-3}
MODEL=models/seed_cnn.net
MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp --mca btl_tcp_if_include lo
     --mca oob_tcp_if_include lo --tag-output -x OMP_NUM_THREADS=1)
COMMON=(--limit "$LIMIT" --epochs 1)
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT

ips() { grep -o '[0-9]* img/s' | tail -1 | cut -d' ' -f1; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
exposed() { grep '^\[[0-9]*,0\]<stderr>' "$LOG" | grep -m1 -o 'exposed [0-9.]* ms per step, of which [0-9.]* ms waiting' || echo '?'; }

declare -A R
for round in $(seq "$ROUNDS"); do
  R[omp2]+="$(OMP_NUM_THREADS=2 "$B" train $MODEL "${COMMON[@]}" --device omp | ips) "
  R[mpi2]+="$(timeout 900 "${MPI[@]}" -np 2 "$B" train $MODEL "${COMMON[@]}" --device omp -v 2>"$LOG" | ips) "
  EXPOSED=$(exposed)
  R[mpi2-seq]+="$(timeout 900 "${MPI[@]}" -np 2 -x CLNET_MPI_OVERLAP=0 "$B" train $MODEL "${COMMON[@]}" --device omp -v 2>"$LOG" | ips) "
  EXPOSED_SEQ=$(exposed)
  R[pocl1]+="$(POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=2 "$B" train $MODEL "${COMMON[@]}" --device cl:0 | ips) "
  R[pocl2]+="$(POCL_DEVICES='pthread pthread' POCL_MAX_PTHREAD_COUNT=1 "$B" train $MODEL "${COMMON[@]}" --devices cl:0,cl:1 | ips) "
  line=$(OMP_NUM_THREADS=1 POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=1 "$B" train $MODEL "${COMMON[@]}" --devices omp,cl:0 | tail -1)
  R[mixed]+="$(echo "$line" | ips) "
  SPLIT=$(echo "$line" | grep -o 'split.*' || echo '?')
done
m() { echo ${R[$1]} | tr ' ' '\n' | grep . | median; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u '+%F %H:%M UTC');" \
     "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); limit $LIMIT, $ROUNDS rounds; load average before: $LOAD"
printf '| setup | img/s per round | median |\n|---|---|---|\n'
for k in omp2 mpi2 mpi2-seq pocl1 pocl2 mixed; do printf '| %s | %s | %s |\n' "$k" "${R[$k]}" "$(m $k)"; done
awk -v a="$(m mpi2)" -v s="$(m mpi2-seq)" -v b="$(m omp2)" -v c="$(m pocl2)" -v d="$(m pocl1)" 'BEGIN {
  printf "efficiency, 2 ranks x 1 thread / 1 process x 2 threads: %.2f (overlapped), %.2f (not)\n", a / b, s / b
  printf "efficiency, 2 POCL devices x 1 thread / 1 POCL device x 2 threads: %.2f\n", c / d }'
echo "rank 0, last round: overlapped: $EXPOSED; not overlapped: $EXPOSED_SEQ"
echo "omp + POCL settled on: $SPLIT"
