"""Every CUDA compiler process a sandbox node starts, recorded as it starts: its pid, nice, parents and span.

The rolling redeploy's cases hold that nothing but the server runs at the server's priority on a node that serves, and
that nothing compiles on a node out of rotation (issue 36; issue 58: a node ran ``nvcc`` at nice 0 and the check saw
it only when a 0.2 s sample fell on it). A sampler can miss a 20 ms ``nvcc --version``; a record cannot: each compiler
binary of the node's CUDA toolkit (``COMPILERS`` under every ``/usr/local/cuda*``: ``bin/`` and ``nvvm/bin/``, where
nvcc runs its stages from) is moved aside to ``<name>.recorded`` and replaced by a POSIX sh wrapper that appends one
line before it runs the real binary (its own pid, its nice, its parent's command line and the chain of ancestors with
their nice) and one when it ends (the exit status). A child inherits its parent's nice, so the wrapper's nice is the
compiler's. FlashInfer's JIT (``get_cuda_path``: CUDA_HOME's nvcc), the stand-in builds (torch's CUDA_HOME) and every
``nvcc --version`` of the product run through these paths.

``install_script``/``restore_script`` are the shell run inside a node (``podman exec NODE sh -c``); ``parse`` reads
the log back; ``figures`` judges it against the node's windows out of rotation. Stdlib only.
"""

# CUDA's compiler driver and the programs it runs (a FlashInfer JIT module or a kernel build compiles through them).
COMPILERS = ("nvcc", "cicc", "ptxas", "fatbinary", "nvlink", "cudafe++")
SUFFIX = ".recorded"
LOG = "/run/compiler-record.tsv"

# The wrapper: the same text for every binary, which finds the real one beside itself ($0 is the path the binary was
# run by: nvcc runs its stages by path, FlashInfer and ninja run CUDA_HOME's nvcc by path, PATH look-ups hand the
# kernel the full path). /proc/<pid>/stat: "pid (comm) state ppid ... nice ..." - after the comm's closing parenthesis,
# field 2 is the ppid and field 17 the nice. A record that cannot be written must not pass silently: the wrapper then
# exits 97 after the run, so the compile fails and the case with it.
WRAPPER = r"""#!/bin/sh
# Written by tests/sandbox/compiler_record.py for the sandbox's checks: records each start of the real binary beside it.
log=@LOG@
# in a function: its set -- leaves the compiler's own arguments alone
record() {
  name=$1
  read -r stat < /proc/$$/stat
  set -- ${stat##*) }
  ppid=$2 nice=${17} chain="" p=$2 n=0
  while [ "$p" -gt 1 ] && [ "$n" -lt 10 ]; do
    read -r pstat < /proc/$p/stat 2>/dev/null || break
    comm=${pstat#*(}; comm=${comm%)*}
    set -- ${pstat##*) }
    chain="$chain $comm[$p,nice=${17}]"
    p=$2 n=$((n + 1))
  done
  parent=$(tr '\0' ' ' < /proc/$ppid/cmdline 2>/dev/null | cut -c1-300)
  printf 'start\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date +%s.%N)" "$$" "$name" "$nice" "$ppid" "$parent" "$chain" >> "$log"
}
ok=0
record "${0##*/}" || ok=97
"$0@SUFFIX@" "$@"
rc=$?
printf 'end\t%s\t%s\t%s\n' "$(date +%s.%N)" "$$" "$rc" >> "$log" || ok=97
[ "$ok" = 0 ] || exit 97
exit $rc
"""


def wrapper(log=LOG):
    """The wrapper's text, writing its records to ``log``."""
    return WRAPPER.replace("@LOG@", log).replace("@SUFFIX@", SUFFIX)


def install_script(log=LOG, roots="/usr/local/cuda*"):
    """Shell (run as root in the node) that wraps every compiler binary under ``roots``' bin/ and nvvm/bin/ not wrapped
    yet, empties ``log`` (0666: the unit's user compiles too) and prints each wrapped path."""
    return """set -e
: > {log}; chmod 0666 {log}
for dir in {roots}/bin {roots}/nvvm/bin; do
  [ -d "$dir" ] || continue
  for name in {names}; do
    path="$dir/$name"
    [ -f "$path" ] && [ ! -L "$path" ] || continue
    [ -e "$path{suffix}" ] || mv "$path" "$path{suffix}"
    cat > "$path.tmp" <<'WRAPPER'
{wrapper}WRAPPER
    chmod 0755 "$path.tmp"; mv "$path.tmp" "$path"
    echo "$path"
  done
done
""".format(log=log, roots=roots, names=" ".join(COMPILERS), suffix=SUFFIX, wrapper=wrapper(log))


def restore_script(roots="/usr/local/cuda*"):
    """Shell that puts every real binary back where the product installed it."""
    return """for real in {roots}/bin/*{suffix} {roots}/nvvm/bin/*{suffix}; do
  [ -f "$real" ] && mv -f "$real" "${{real%{suffix}}}"
done
true
""".format(roots=roots, suffix=SUFFIX)


def parse(text):
    """The log's lines -> [{'pid', 'name', 'nice', 'ppid', 'parent', 'ancestors', 'start', 'end', 'rc'}], in start
    order; 'end' and 'rc' are None for a compiler still running (or killed) when the log was read."""
    procs, order = {}, []
    for line in text.splitlines():
        fields = line.split("\t")
        if fields[0] == "start" and len(fields) >= 8:
            pid = int(fields[2])
            procs[pid] = {"pid": pid, "name": fields[3], "nice": int(fields[4]), "ppid": int(fields[5]),
                          "parent": fields[6].strip(), "ancestors": fields[7].strip(), "start": float(fields[1]),
                          "end": None, "rc": None}
            order.append(procs[pid])
        elif fields[0] == "end" and len(fields) >= 4 and int(fields[2]) in procs:
            procs[int(fields[2])].update(end=float(fields[1]), rc=int(fields[3]))
    return order


def describe(proc):
    return "%s(pid %d, nice %d, started by %s;%s)" % (proc["name"], proc["pid"], proc["nice"],
                                                     proc["parent"] or "?", proc["ancestors"])


def figures(procs, windows, until, server_nice=0):
    """One node's compilers judged: how many, their names and nice values; those at the server's priority (a nice of
    ``server_nice``, the unit's default 0, or below) and those whose span [start, end or ``until``] overlaps a window ``(start, end)`` out of rotation, described with
    what started them."""
    spans = [(p, p["start"], p["end"] if p["end"] is not None else until) for p in procs]
    return {
        "processes": len(procs), "names": sorted({p["name"] for p in procs}),
        "nice": sorted({p["nice"] for p in procs}),
        "at_server_priority": [describe(p) for p in procs if p["nice"] <= server_nice],
        "out_of_rotation": [describe(p) for p, a, b in spans if any(s <= b and a <= e for s, e in windows)],
    }
