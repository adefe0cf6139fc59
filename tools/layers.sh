#!/usr/bin/env bash
# Checks that the runtime is in layers and that no two of its files call each other, from the
# compiled objects (what the linker will resolve, macros and inline code already expanded), not
# from the sources' #includes, which say what a file may see rather than what it uses.
#
#   tools/layers.sh OBJDIR [OBJECT...]
#     OBJDIR   the runtime's CMake object folder, e.g. build/CMakeFiles/clattn_objects.dir;
#              files are named by their path under it, less .o (runtime/plan/plan.c)
#     OBJECT   the objects to read, all under OBJDIR (CMake: $<TARGET_OBJECTS:clattn_objects>);
#              without them every *.o under OBJDIR, which after a source has moved includes
#              its old object, left behind by the build (the check then stops on the
#              duplicate definitions and says so)
#
# Layers, lowest first; a file may use only symbols defined in its own layer or below:
#   runtime/core/ < runtime/kernels/ < runtime/plan/ < runtime/ops/ < runtime/tune/
#   < runtime/*.c (the files directly in runtime/, the context lifecycle: "top")
# Objects outside OBJDIR/runtime/ (the generated embedded-kernels object) count as core: they
# are generated data that any layer may read, and counting them (rather than ignoring them)
# still catches one that starts to call up into the runtime. An object in a folder of runtime/
# that is not a layer fails the check: a new folder needs a place in the order first.
# Symbols that no runtime object defines (libc, OpenCL, CLBlast, cJSON) are not edges.
#
# Then the graph "A uses a symbol defined in B" must have no cycle at all, inside a layer too:
# layers keep calls pointing down, but two files of one layer that call each other still cannot
# be understood, tested or moved apart one at a time. Each knot (a strongly connected set of
# files) is reported with one shortest cycle through it and the symbol behind each step.
#
# Exit status: 0 clean (one summary line), 1 violations or cycles (or an unknown folder),
# 2 usage errors (no objects, an object outside OBJDIR, nm failing, two objects defining one
# symbol). NM names another nm (CMake's CMAKE_NM).
set -euo pipefail

FOLDERS="core kernels plan ops tune"   # lowest first; runtime/ itself, "top", is above
LAYERS="$FOLDERS top"
nm=${NM:-nm}
usage() { echo "usage: $0 OBJDIR [OBJECT...]   (OBJDIR: the runtime's object folder, e.g." \
               "build/CMakeFiles/clattn_objects.dir)" >&2; exit 2; }
[ $# -ge 1 ] || usage
[ -d "$1" ] || { echo "layers.sh: $1: not a folder" >&2; usage; }
objdir=$(cd "$1" && pwd -P); shift
command -v "$nm" >/dev/null || { echo "layers.sh: $nm not found" >&2; exit 2; }
table=$(mktemp)
trap 'rm -f "$table"' EXIT

# Sorted, so that the edges, and with them the cycle reported, are the same on every run.
if [ $# -gt 0 ]; then
  for o in "$@"; do
    [ -f "$o" ] || { echo "layers.sh: $o: no such object" >&2; exit 2; }
    o=$(realpath -- "$o")
    [[ $o == "$objdir"/* ]] || { echo "layers.sh: $o: not under $objdir" >&2; exit 2; }
    echo "$o"
  done | LC_ALL=C sort -u >"$table"
  mapfile -t objects <"$table"
  : >"$table"
else
  mapfile -t objects < <(find "$objdir" -name '*.o' -type f | LC_ALL=C sort)
fi
[ ${#objects[@]} -gt 0 ] || { echo "layers.sh: no objects (*.o) under $objdir" >&2; exit 2; }

# One stream for awk: F <file> <layer>, then D <file> <symbol> for each global definition and
# U <file> <symbol> for each undefined reference. Files are named as sources, relative to
# OBJDIR (runtime/plan/plan.c), as they are read and edited.
unknown=0 in_runtime=0
for o in "${objects[@]}"; do
  rel=${o#"$objdir"/}; name=${rel%.o}
  case $rel in
    runtime/*/*) layer=${rel#runtime/}; layer=${layer%%/*}; in_runtime=1
                 if [[ " $FOLDERS " != *" $layer "* ]]; then
                   echo "$name: runtime/$layer/ is not a layer (folders, lowest first: $FOLDERS)"
                   unknown=1; continue
                 fi ;;
    runtime/*)   layer=top; in_runtime=1 ;;
    *)           layer=core ;;
  esac
  echo "F $name $layer" >>"$table"
  # -g: only globals; statics cannot be used from another file, and their names repeat.
  "$nm" -P -g --defined-only "$o" | awk -v f="$name" 'NF >= 2 { print "D", f, $1, $2 }' \
    >>"$table" || { echo "layers.sh: $nm failed on $o" >&2; exit 2; }
  "$nm" -P -u "$o" | awk -v f="$name" 'NF >= 2 { print "U", f, $1 }' \
    >>"$table" || { echo "layers.sh: $nm failed on $o" >&2; exit 2; }
done
[ $in_runtime = 1 ] || [ $unknown = 1 ] \
  || { echo "layers.sh: no objects under $objdir/runtime/" >&2; exit 2; }
[ $unknown = 0 ] || exit 1

awk -v layers="$LAYERS" '
  $1 == "F" { n++; name[n] = $2; id[$2] = n; layer[n] = $3; next }
  $1 == "D" {
    # Two strong definitions of one name cannot both be linked: most likely the object of a
    # source that has moved, still in OBJDIR. Weak and common ones: the first stands.
    strong = $4 !~ /^[WVwvC]$/
    if (!($3 in def)) { def[$3] = id[$2]; dstrong[$3] = strong }
    else if (strong && dstrong[$3] && !((def[$3], id[$2]) in twice)) {
      twice[def[$3], id[$2]] = $3; dups++
      print "layers.sh: " name[def[$3]] " and " $2 " both define " $3 " (and perhaps more)" \
        > "/dev/stderr"
    }
    next }
  $1 == "U" { nu++; ufile[nu] = id[$2]; usym[nu] = $3 }

  # Tarjan: each knot (strongly connected set of files) comes out once, whole.
  function tarjan(v,   i, w, size) {
    num[v] = low[v] = ++counter; stack[++sp] = v; onstack[v] = 1
    for (i = 1; i <= deg[v]; i++) {
      w = adj[v, i]
      if (!(w in num)) { tarjan(w); if (low[w] < low[v]) low[v] = low[w] }
      else if (onstack[w] && num[w] < low[v]) low[v] = num[w]
    }
    if (low[v] != num[v]) return
    ncomp++; size = 0
    do { w = stack[sp--]; onstack[w] = 0; comp[w] = ncomp; size++ } while (w != v)
    csize[ncomp] = size
  }

  # Shortest cycle through s inside its knot (breadth first), printed as a chain of files,
  # then the symbol that makes each step.
  function cycle(s,   c, head, tail, q, v, w, i, k, path, chain, seen, parent) {
    c = comp[s]; head = 1; tail = 1; q[1] = s; seen[s] = 1
    while (head <= tail) {
      v = q[head++]
      for (i = 1; i <= deg[v]; i++) {
        w = adj[v, i]
        if (comp[w] != c) continue
        if (w == s) {
          k = 0; for (; v != s; v = parent[v]) path[++k] = v
          path[++k] = s; chain = name[s]
          for (i = k - 1; i >= 1; i--) chain = chain " -> " name[path[i]]
          print "cycle: " chain " -> " name[s]
          path[0] = s
          for (i = k; i >= 1; i--)
            print "  " name[path[i]] " uses " esym[path[i], path[i - 1]] " from " name[path[i - 1]]
          return
        }
        if (!(w in seen)) { seen[w] = 1; parent[w] = v; q[++tail] = w }
      }
    }
  }

  END {
    if (dups) {
      print "layers.sh: an old object of a moved source? Name the objects after OBJDIR" \
        " ($<TARGET_OBJECTS:clattn_objects>) or rebuild in a clean folder" > "/dev/stderr"
      exit 2
    }
    nl = split(layers, order, " ")
    for (i = 1; i <= nl; i++) rank[order[i]] = i
    for (u = 1; u <= nu; u++) {
      a = ufile[u]; s = usym[u]
      if (!(s in def) || def[s] == a) continue     # outside the runtime, or its own
      b = def[s]
      if (!((a, b) in esym)) { esym[a, b] = s; adj[a, ++deg[a]] = b; edges++ }
      if (rank[layer[a]] < rank[layer[b]]) {
        print name[a] " (" layer[a] ") uses " s " from " name[b] " (" layer[b] ")"; bad++
      }
    }
    for (v = 1; v <= n; v++) if (!(v in num)) tarjan(v)
    # Knots in file order, each from its first file (the files came sorted).
    for (v = 1; v <= n; v++) {
      c = comp[v]
      if (csize[c] < 2 || (c in done)) continue
      done[c] = 1; knots++; members = ""
      for (w = 1; w <= n; w++) if (comp[w] == c) members = members " " name[w]
      cycle(v)
      print "  (a knot of " csize[c] " files that reach each other:" members ")"
    }
    for (i = 1; i <= nl; i++) used[order[i]] = 0
    for (v = 1; v <= n; v++) used[layer[v]] = 1
    for (i = 1; i <= nl; i++) nused += used[order[i]]
    if (bad || knots) {
      printf "layers.sh: %d upward reference(s), %d knot(s) of files in cycles\n", bad, knots
      exit 1
    }
    printf "layers.sh: clean: %d files in %d layer(s), %d edges between files, no cycles\n",
      n, nused, edges + 0
  }' "$table"
