# Session 58 call g: ncu on the plan's 64 x 2 down kernel and its split-tail twin where nothing is cut
# (scripts/kcut_profile.py; kernels in .dev/s58f/cache58f.tar.xz). SM clocks left alone (--clock-control none).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache58f
tar -C .dev -xJf .dev/s58f/cache58f.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv
timeout 150 ncu --clock-control none --profile-from-start off -k regex:wgmma --section SpeedOfLight --section WarpStateStats \
  --section InstructionStats --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  --page details python3 docs/results/h200-2026-12-05-s58/scripts/kcut_profile.py > $OUT/kcut_ncu.txt 2>&1; echo ncu rc=$?
date -u
grep -E "indexed_wgmma|Duration|Executed Instructions |Issue Slots Busy|Stall|Warp Cycles Per Issued|Registers Per|Issued Warp|No Eligible|SM Busy|Compute \(SM\) Throughput|profiled" $OUT/kcut_ncu.txt | cut -c1-150 | head -50
