# The shipped alert rules parse and behave: `promtool check rules` and the
# rule unit tests in deploy/prometheus/strata-rules.test.yml.
source "$(dirname "$0")/lib.sh"
command -v promtool >/dev/null || skip "promtool not installed (Debian package prometheus)"
cd "$ROOT/deploy/prometheus"
promtool check rules strata-rules.yml || fail "promtool check rules"
promtool test rules strata-rules.test.yml || fail "promtool test rules"
echo "ok: rules checked and tested"
