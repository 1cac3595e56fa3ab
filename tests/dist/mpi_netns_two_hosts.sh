#!/usr/bin/env bash
# Multi-node data parallelism without a second machine: two "hosts" are two network namespaces
# joined by a veth pair (10.231.7.1 and .2); mpirun runs in the first and starts the second
# rank's daemon in the second through a plm_rsh_agent that is `ip netns exec` instead of ssh;
# OpenMPI talks TCP only (btl tcp,self; oob and btl restricted to the veth subnet). A 2-rank
# training across the two hosts must log exactly the losses and gradient norms of the ordinary
# 2-rank run in one namespace (shared memory), and the second host's veth must have carried the
# gradients (received bytes > 4 MB).
# Needs root with CAP_NET_ADMIN (ip netns add, veth). Where the container forbids that, the
# check cannot run: a failure under CI=true, else a loud skip (exit 77), like a missing mpirun
# (tests/oracle_skip.sh); the reason printed is the failing command's own message.
set -euo pipefail
stretch="$1"; data="$2"
. "$(dirname "${BASH_SOURCE[0]}")/../oracle_skip.sh"
oracle_require_cmd mpirun "apt-get install openmpi-bin, i.e. bash scripts/setup.sh"
oracle_require_cmd ip "apt-get install iproute2, i.e. bash scripts/setup.sh"
work="$(mktemp -d)"
nsa="stretch_a$$"; nsb="stretch_b$$"; va="sva$$"; vb="svb$$"
cleanup() { ip netns del "$nsa" 2>/dev/null || true; ip netns del "$nsb" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
netns() {  # run a setup command; on failure the two-host check is impossible here
  local out
  if ! out="$("$@" 2>&1)"; then
    oracle_missing "network namespaces (root with CAP_NET_ADMIN)" \
      "run the tests as root in a container allowed to create network namespaces (docker --cap-add NET_ADMIN, or --privileged)" \
      "'$*' failed: $out"
  fi
}
netns ip netns add "$nsa"
netns ip netns add "$nsb"
netns ip link add "$va" type veth peer name "$vb"
netns ip link set "$va" netns "$nsa"
netns ip link set "$vb" netns "$nsb"
netns ip -n "$nsa" addr add 10.231.7.1/24 dev "$va"
netns ip -n "$nsb" addr add 10.231.7.2/24 dev "$vb"
for ns in "$nsa" "$nsb"; do netns ip -n "$ns" link set lo up; done
netns ip -n "$nsa" link set "$va" up
netns ip -n "$nsb" link set "$vb" up
# OpenMPI's rsh launcher calls AGENT HOST COMMAND...: run COMMAND in the second host's namespace.
cat > "$work/agent.sh" <<AGENT
#!/bin/sh
echo "\$1" >> "$work/agent.log"
shift
exec ip netns exec "$nsb" /bin/sh -c "\$*"
AGENT
chmod +x "$work/agent.sh"

require_data_file "$data/ptb/ptb.valid.txt" "$data/ptb/ptb.test.txt"
"$stretch" preprocess --only-source --trainpref "$data/ptb/ptb.valid.txt" --validpref "$data/ptb/ptb.test.txt" \
  --destdir "$work/bin" >/dev/null 2>&1
common=("$work/bin" --arch transformer_lm_tiny --tokens-per-sample 32 --max-tokens 256
        --required-batch-size-multiple 1 --optimizer adam --lr 0.003 --max-update 4 --log-interval 1
        --no-save --disable-validation --dropout 0.1 --log-format json --log-full-precision --threads 1
        --no-progress-bar --seed 3)
rx() { ip netns exec "$nsb" cat "/sys/class/net/$vb/statistics/rx_bytes"; }
rx0="$(rx)"
ip netns exec "$nsa" mpirun --allow-run-as-root -np 2 --host 10.231.7.1:1,10.231.7.2:1 \
  --mca plm_rsh_agent "$work/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
  --mca btl tcp,self --mca btl_tcp_if_include 10.231.7.0/24 --mca oob_tcp_if_include 10.231.7.0/24 \
  "$stretch" train "${common[@]}" 2>"$work/hosts.err" >"$work/hosts.jsonl" \
  || { echo "FAIL: the two-namespace mpirun exited non-zero:"; tail -20 "$work/hosts.err"; exit 1; }
rx1="$(rx)"
mpirun --allow-run-as-root --oversubscribe -np 2 "$stretch" train "${common[@]}" 2>"$work/one.err" >"$work/one.jsonl" \
  || { echo "FAIL: the one-namespace mpirun exited non-zero:"; tail -20 "$work/one.err"; exit 1; }
grep -qx 10.231.7.2 "$work/agent.log" || { echo "FAIL: the second host's daemon was not started through the agent"; exit 1; }
python3 - "$work" "$rx0" "$rx1" <<'PY'
import json, sys
work, rx0, rx1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tag = " | train_inner | "
def rows(name):
    r = [json.loads(l.split(tag, 1)[1]) for l in open(f"{work}/{name}.jsonl") if tag in l]
    assert len(r) == 4, (name, len(r))
    return [(x["num_updates"], repr(x["loss"]), repr(x["gnorm"]), x["wpb"], x["bsz"]) for x in r]
a, b = rows("hosts"), rows("one")
assert a == b, f"two hosts differ from one host:\n{a}\n{b}"
got = rx1 - rx0
assert got > 4_000_000, f"the second host received only {got} bytes over the veth: the gradients did not cross it"
print(f"ok: 2 ranks in 2 network namespaces over TCP == 2 ranks in one (4 updates; {got / 1e6:.1f} MB received over the veth)")
PY
