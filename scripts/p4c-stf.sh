#!/usr/bin/env bash
# p4c's STF corpus on both of edgeflow's P4 targets (issue 52, item 4; docs/p4.md, "STF"): every
# NAME.p4 with a NAME.stf in the corpus (../shared/p4c-stf, or P4C_STF_DIR) run by
# `edgeflow p4 stf` on the software target (user) and the kernel back end (kernel), one process
# per test and target. Writes build/p4c-stf.txt: a line `NAME user|kernel PASS|FAIL|REFUSED why`
# per test and target, then a summary line per target. The corpus is read in place, never copied.
set -u
cd "$(dirname "$0")/.."
corpus=${P4C_STF_DIR:-../shared/p4c-stf}
edgeflow=${EDGEFLOW:-target/release/edgeflow}
out=build/p4c-stf.txt
[ -d "$corpus" ] || { echo "p4c-stf: no corpus at $corpus (set P4C_STF_DIR)" >&2; exit 2; }
[ -x "$edgeflow" ] || { echo "p4c-stf: no $edgeflow (cargo build --release)" >&2; exit 2; }
mkdir -p build
started=$EPOCHREALTIME
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for stf in "$corpus"/*.stf; do
    name=$(basename "$stf" .stf)
    program="$corpus/$name.p4"
    for target in user kernel; do
        if [ ! -f "$program" ]; then
            verdict="REFUSED no $name.p4 beside the script"
        else
            # The verdict is the last line `edgeflow p4 stf` prints; an error (exit 2) is on stderr.
            verdict=$("$edgeflow" p4 stf "$program" "$stf" --target "$target" 2>&1 | tail -n 1)
            case "$verdict" in
                PASS* | FAIL* | REFUSED*) ;;
                *) verdict="REFUSED edgeflow p4 stf: $verdict" ;;
            esac
        fi
        # One line per row: the corpus's own path is not part of the reason.
        verdict=${verdict//"$corpus"\//}
        printf '%s %s %s\n' "$name" "$target" "$verdict" >>"$rows"
    done
done
elapsed=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
{
    cat "$rows"
    for target in user kernel; do
        count() { awk -v t="$target" -v v="$1" '$2 == t && $3 == v' "$rows" | wc -l; }
        printf 'summary %s: %d tests, %d PASS, %d FAIL, %d REFUSED (%.1f s for both targets)\n' \
            "$target" "$(awk -v t="$target" '$2 == t' "$rows" | wc -l)" "$(count PASS)" "$(count FAIL)" \
            "$(count REFUSED)" "$elapsed"
    done
} >"$out"
tail -n 2 "$out"
