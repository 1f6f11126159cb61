#!/usr/bin/env bash
# Replays load-test request bodies against a running cps-extender with curl and reports
# requests/s, p50/p90/p99 latency and errors, per verb.
#
#   test/load/run.sh URL FIXTURE_DIR CONCURRENCY REQUESTS [VERB...]
#
# URL is the extender's base, e.g. http://127.0.0.1:8888 (any deployed instance works).
# FIXTURE_DIR holds <verb>-<n>.json bodies (go run ./test/load/gen). REQUESTS per verb are
# spread over CONCURRENCY workers, each running curl on batches of RUN_BATCH (100) requests
# over one connection; bodies are used in turn. VERBs default to filter prioritize
# volcano-predicate volcano-prioritize; bind is left out by default because replaying it
# binds real pods. SCHED_PREFIX (/scheduler) and VOLCANO_PREFIX (/volcano) are the URL
# prefixes of the two protocols.
set -euo pipefail

if [[ $# -lt 4 ]]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
url=${1%/}; dir=$2; conc=$3; total=$4; shift 4
verbs=("$@")
[[ ${#verbs[@]} -gt 0 ]] || verbs=(filter prioritize volcano-predicate volcano-prioritize)
sched=${SCHED_PREFIX:-/scheduler}; volcano=${VOLCANO_PREFIX:-/volcano}
command -v curl >/dev/null || { echo "run.sh: curl is required" >&2; exit 2; }
[[ $conc -ge 1 && $total -ge 1 ]] || { echo "run.sh: CONCURRENCY and REQUESTS must be positive" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%-20s %8s %9s %9s %9s %9s %7s\n' verb requests 'req/s' 'p50 ms' 'p90 ms' 'p99 ms' errors
status=0
for verb in "${verbs[@]}"; do
  mapfile -t bodies < <(ls "$dir"/"$verb"-*.json 2>/dev/null | sort)
  if [[ ${#bodies[@]} -eq 0 ]]; then
    echo "run.sh: no $verb-*.json in $dir" >&2; status=1; continue
  fi
  case $verb in
    volcano-*) path=$volcano/${verb#volcano-} ;;
    *) path=$sched/$verb ;;
  esac
  # Per worker, curl configs of at most $batch requests each, bodies in turn. curl reads
  # every body of a config into memory before the first transfer: one config of thousands
  # of 60 KB bodies cost it hundreds of MB and most of a core, which showed up as the
  # latency tail. A batch reuses its connection; a new batch opens one.
  batch=${RUN_BATCH:-100}
  rm -f "$work"/cfg.*
  for ((i = 0; i < total; i++)); do
    w=$((i % conc))
    printf -v f '%s/cfg.%d.%06d' "$work" "$w" $(((i / conc) / batch))
    body=${bodies[$((i % ${#bodies[@]}))]}
    {
      [[ -s $f ]] && echo next
      echo "url = \"$url$path\""
      echo "data-binary = \"@$body\""
      echo 'header = "Content-Type: application/json"'
      echo 'output = "/dev/null"'
      echo 'write-out = "%{http_code} %{time_total}\n"'
      echo 'silent'
    } >>"$f"
  done
  start=$(date +%s.%N)
  for ((w = 0; w < conc; w++)); do
    (
      for f in "$work"/cfg.$w.*; do
        [[ -e $f ]] || continue
        curl -K "$f" >>"$work/out.$w" 2>>"$work/err" || true
      done
    ) &
  done
  wait
  end=$(date +%s.%N)
  cat "$work"/out.* | sort -n -k2 >"$work/all"
  rm -f "$work"/out.*
  # Errors: any answer but 200, and requests curl could not make (code 000 or missing).
  awk -v verb="$verb" -v total="$total" -v start="$start" -v end="$end" '
    function pct(q,   k) { if (n == 0) return 0; k = int((q * n + 99) / 100); if (k < 1) k = 1; return t[k] }
    { n++; t[n] = $2 * 1000; if ($1 != "200") err++ }
    END {
      err += total - n
      printf "%-20s %8d %9.1f %9.2f %9.2f %9.2f %7d\n", verb, n, n / (end - start), pct(50), pct(90), pct(99), err
      exit err > 0
    }' "$work/all" || status=1
done
exit $status
