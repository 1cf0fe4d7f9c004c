# shellcheck shell=bash
# side-by-side.sh: sourced by test scripts whose runs are independent
# processes that check bits, not times, so that they run side by side.
#
#   side_by_side DIR JOBS CMD...
#
# runs each CMD (a command line for bash -c) in turn as a slot of JOBS
# frees, and returns once all have ended: run i's output (stdout and
# stderr) is in DIR/i.out, its exit status in DIR/i.rc and its time in
# seconds in DIR/i.secs.
side_by_side() {
  local dir=$1 jobs=$2 i=0 cmd
  shift 2
  for cmd in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    (
      t0=$(date +%s.%N)
      bash -c "$cmd" >"$dir/$i.out" 2>&1
      echo $? >"$dir/$i.rc"
      awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$dir/$i.secs"
    ) &
    i=$((i + 1))
  done
  wait
}
