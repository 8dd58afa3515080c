#!/usr/bin/env bash
# Every GPU check of errkb on a fresh GPU machine, in one go: well under 5 minutes,
# no network. Expects torch and Triton installed (vLLM + flashinfer + 2 GPUs for the
# NCCL reproducer, which is skipped with its reason otherwise).
#
#   scripts/gpu-check.sh [REPORT.json] [gpu_check.py options, e.g. --proofs-out DIR]
#                                           (default report: gpu-check-report.json)
#
# Exit status: 0 when every check passed or was skipped with a reason, 1 otherwise.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
report="${1:-gpu-check-report.json}"
shift $(( $# > 0 ? 1 : 0 ))
python="${ERRKB_GPU_PYTHON:-python3}"
export PYTHONUNBUFFERED=1 PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}"
# Offline: nothing here may reach a hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
else
  echo "nvidia-smi not found: the checks will report 'needs CUDA'"
fi
# The hard cap keeps a hung NCCL rendezvous from holding the runner; the report is
# written after every check, so what finished before the cap is kept.
timeout --kill-after=10 290 "$python" "$here/gpu_check.py" --out "$report" "$@"
status=$?
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "gpu-check: stopped at the 290 s cap; partial report in $report" >&2
  exit 1
fi
exit "$status"
