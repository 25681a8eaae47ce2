#!/usr/bin/env bash
# Print how many Rust tests skipped and why, from the log the tests append to
# when HVIO_SKIP_LOG names it (one "test: reason" line per skip).
set -euo pipefail
log=${1:?usage: skipped.sh LOG}
if [[ ! -s $log ]]; then
  echo "Rust tests: none skipped"
  exit 0
fi
echo "Rust tests: $(wc -l <"$log") skipped (reasons, with how many tests each):"
cut -d: -f2- "$log" | sed 's/^ //' | sort | uniq -c | sort -rn
