#!/usr/bin/env bash
# Mutation testing of the packages that decide a verdict: the pure core (pkg/indexset,
# pkg/account), the worker's message format (pkg/result) and the judging of results by
# the acceptance rule (pkg/acceptance, the CEL code). gremlins (pinned by the wrapper
# module hack/tools/gremlins, built from Go module sources into the batchledger cache by
# hack/build-install-tools.sh, as helm is) mutates each package's code one change at a
# time and runs the package's tests against every covered mutant. A mutant the tests
# let live is a bug they would let through, or an equivalent mutant (docs/testing.md
# lists the known ones).
#
# The run works on a copy of go.mod, go.sum and pkg/ in a temporary directory, so the
# checkout is never touched (gremlins copies its module once per worker as well).
#
#   hack/mutate.sh                        pkg/indexset pkg/account pkg/result pkg/acceptance
#   hack/mutate.sh pkg/account            one package
#   MUTATE_DRY_RUN=true hack/mutate.sh    list the mutants of each package without running
#                                         them: checks that the package list resolves
#
# Environment:
#   MUTATE_WORKERS    parallel mutant runs (default 1: the machine is shared)
#   MUTATE_THRESHOLD  minimum efficacy, killed / (killed + lived), in percent (default 90)
#   MUTATE_OUT        where each package's JSON report goes (default _output/mutate,
#                     _output/mutate-dry-run for a dry run)
#   MUTATE_DRY_RUN    "true": gremlins --dry-run (coverage and the mutant list only)
#
# Exit status: non-zero if any package's efficacy is below the threshold.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WORKERS=${MUTATE_WORKERS:-1}
THRESHOLD=${MUTATE_THRESHOLD:-90}
DRY_RUN=${MUTATE_DRY_RUN:-false}
if [ "$DRY_RUN" = true ]; then OUT=${MUTATE_OUT:-$ROOT_DIR/_output/mutate-dry-run}; else OUT=${MUTATE_OUT:-$ROOT_DIR/_output/mutate}; fi
# DEFAULT_PKGS: every package whose tests the mutation run holds to the threshold.
DEFAULT_PKGS=(pkg/indexset pkg/account pkg/result pkg/acceptance)

# gremlins_bin builds (or reuses) the pinned gremlins and prints its path.
gremlins_bin() {
  "$HACK_DIR/build-install-tools.sh" gremlins >&2 || die "building gremlins failed"
  echo "$BIN_DIR/gremlins"
}

main() {
  command -v go >/dev/null || die "go is not on PATH"
  local pkgs=("$@")
  [ ${#pkgs[@]} -gt 0 ] || pkgs=("${DEFAULT_PKGS[@]}")
  local mode=(--threshold-efficacy "$THRESHOLD") what="efficacy threshold $THRESHOLD%"
  # A dry run executes no mutant, so it has no efficacy to hold to the threshold.
  if [ "$DRY_RUN" = true ]; then mode=(--dry-run); what="dry run: mutants listed, none run"; fi
  local gremlins; gremlins=$(gremlins_bin)
  mkdir -p "$OUT"
  local work; work=$(mktemp -d "${TMPDIR:-/tmp}/batchledger-mutate-XXXXXX")
  trap "rm -rf '$work'" EXIT
  cp "$ROOT_DIR/go.mod" "$ROOT_DIR/go.sum" "$work/"
  cp -a "$ROOT_DIR/pkg" "$work/"

  local start=$SECONDS failed=() p name
  for p in "${pkgs[@]}"; do
    p=${p#./}; p=${p%/}; name=$(basename "$p")
    log "mutating $p ($WORKERS worker(s), $what)"
    local t0=$SECONDS
    [ -d "$work/$p" ] || die "$p: no such package under pkg/ (the run copies only go.mod, go.sum and pkg/)"
    # -S lc: list only the mutants that lived or were not covered, the ones to read.
    if ! (cd "$work" && "$gremlins" unleash --workers "$WORKERS" \
      "${mode[@]}" -S lc -o "$OUT/$name.json" "./$p"); then
      failed+=("$p")
    fi
    log "  $p: $((SECONDS - t0))s, report in $OUT/$name.json"
  done
  log "mutation testing took $((SECONDS - start))s"
  [ ${#failed[@]} -eq 0 ] || die "efficacy below $THRESHOLD% (or gremlins failed) in: ${failed[*]}"
}

main "$@"
