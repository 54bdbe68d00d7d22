#!/usr/bin/env bash
# Scaling on one machine: training throughput of the seed CNN (img/s of 'clnet train', the
# median of ROUNDS alternating runs) for
#   - 1 process x 2 OpenMP threads  vs  2 MPI ranks x 1 thread   (mpirun on loopback)
#   - 1 POCL device                 vs  2 POCL devices in one process (--devices cl:0,cl:1)
#   - omp + POCL in one process (--devices omp,cl:0), with the split it settles on
# Efficiency = throughput ratio. Usage: tools/bench/scaling.sh [BUILD_DIR] [LIMIT] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}/tools/clnet
LIMIT=${2:-16384}
ROUNDS=${3:-3}
MODEL=models/seed_cnn.net
MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp --mca btl_tcp_if_include lo
     --mca oob_tcp_if_include lo)
COMMON=(--limit "$LIMIT" --epochs 1)

ips() { grep -o '[0-9]* img/s' | tail -1 | cut -d' ' -f1; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A R
for round in $(seq "$ROUNDS"); do
  R[omp2]+="$(OMP_NUM_THREADS=2 "$B" train $MODEL "${COMMON[@]}" --device omp | ips) "
  R[mpi2]+="$(timeout 600 "${MPI[@]}" -np 2 -x OMP_NUM_THREADS=1 "$B" train $MODEL "${COMMON[@]}" --device omp | ips) "
  R[pocl1]+="$(POCL_DEVICES=pthread "$B" train $MODEL "${COMMON[@]}" --device cl:0 | ips) "
  R[pocl2]+="$(POCL_DEVICES='pthread pthread' "$B" train $MODEL "${COMMON[@]}" --devices cl:0,cl:1 | ips) "
  line=$(OMP_NUM_THREADS=2 "$B" train $MODEL "${COMMON[@]}" --devices omp,cl:0 | tail -1)
  R[mixed]+="$(echo "$line" | ips) "
  SPLIT=$(echo "$line" | grep -o 'split.*')
done
m() { echo ${R[$1]} | tr ' ' '\n' | grep . | median; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F); limit $LIMIT, $ROUNDS rounds"
printf '| setup | img/s per round | median |\n|---|---|---|\n'
for k in omp2 mpi2 pocl1 pocl2 mixed; do printf '| %s | %s | %s |\n' "$k" "${R[$k]}" "$(m $k)"; done
awk -v a="$(m mpi2)" -v b="$(m omp2)" -v c="$(m pocl2)" -v d="$(m pocl1)" 'BEGIN {
  printf "2 ranks x 1 thread / 1 process x 2 threads: %.2f\n2 POCL devices / 1 POCL device: %.2f\n", a / b, c / d }'
echo "omp + POCL settled on: $SPLIT"
