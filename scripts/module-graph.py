#!/usr/bin/env python3
"""The module graph of each crate of the workspace, read from its sources:
which module names which (`crate::a::b` in a `use` or a path, `super::`),
and every cycle among them (a module that imports, directly or around a
loop, one that imports it back). A module is a file (`src/a/b.rs`,
`src/a/mod.rs` is `a`); inline `mod tests` blocks are their file's, but
their own imports are left out (a test may reach anywhere).

    scripts/module-graph.py [--dot] [--expect FILE] [CRATE_DIR ...]
                                              (default: crates/*)

Exits 1 when a crate has a cycle, printing each (the strongly connected
components of more than one module). With `--expect FILE`, the cycles
FILE lists (one per line: `CRATE_DIR: module, module, ...`; `#` starts a
comment) are known: it exits 1 only for a cycle that is not within one of
them, and says when a known one shrank or went (so that the list only
shrinks).
"""
import os, re, sys, glob

def modules(src):
    mods = {}
    for path in glob.glob(os.path.join(src, "**", "*.rs"), recursive=True):
        rel = os.path.relpath(path, src)[:-3].split(os.sep)
        if rel[-1] == "mod":
            rel = rel[:-1]
        if rel in (["lib"], ["main"]):
            rel = []
        if rel and rel[0] == "bin":
            continue
        mods["::".join(rel)] = path
    return mods

def strip_tests(text):
    # Drop `#[cfg(test)] mod x { ... }` blocks (balanced braces).
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)

def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)

def inline_ranges(text):
    """The spans of inline modules (`mod x { ... }`)."""
    spans = []
    for m in re.finditer(r"\bmod\s+\w+\s*\{", text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        spans.append((m.start(), j))
    return spans

def paths_in(text):
    """Every `crate::...`/`super::...` path, with `use` groups expanded; a
    `use` of a child module's items (`use run::x`, `pub use run::x`) as
    `self::run::x`. A path inside an inline module (`mod x { ... }`) has
    its `super`s and `self`s taken from that module first (one `super`
    leaves it), so that it names what it names from the file's module."""
    spans = inline_ranges(text)
    def depth(at):
        return sum(1 for a, b in spans if a <= at < b)
    def lift(path, at):
        d = depth(at)
        segs = path.split("::")
        while d and segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                d -= 1
            segs = segs[1:]
        if d and segs and segs[0] not in ("crate",):
            return None  # a name of the inline module itself
        return "::".join(segs) if segs else None
    def rooted(path):
        # A path that starts at neither the crate nor a module: from here.
        if path.split("::")[0] in ("crate", "super", "self"):
            return path
        return "self::" + path
    found = []
    for m in re.finditer(r"\buse\s+(\w+(?:::[^;]*));", text, re.S):
        # `x as y` names x; then the spaces go.
        u = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", m.group(1)))
        for p in expand(rooted(u)):
            q = lift(p, m.start())
            if q:
                found.append(rooted(q))
    for m in re.finditer(r"\b((?:crate|super)(?:::\w+)+)", text):
        q = lift(m.group(1), m.start())
        if q:
            found.append(rooted(q))
    return found

def expand(u):
    if "{" not in u:
        return [u]
    head, rest = u.split("{", 1)
    inner = rest[: rest.rfind("}")]
    parts, depth, cur = [], 0, ""
    for c in inner:
        if c == "," and depth == 0:
            parts.append(cur); cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(c, 0)
        cur += c
    parts.append(cur)
    out = []
    for p in parts:
        if p:
            out += expand(head + p)
    return out

def resolve(path, here, mods):
    segs = path.split("::")
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    else:
        base = here.split("::") if here else []
        # `super` from a file module: its parent
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    full = base + segs
    # the longest prefix that is a module
    for n in range(len(full), -1, -1):
        name = "::".join(full[:n])
        if name in mods:
            return name
    return None

def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1
        stack.append(v); on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            out.append(comp)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out

def crate_graph(crate_dir):
    src = os.path.join(crate_dir, "src")
    mods = modules(src)
    graph = {}
    for name, path in mods.items():
        text = strip_comments(strip_tests(open(path, encoding="utf-8").read()))
        deps = set()
        for p in paths_in(text):
            t = resolve(p, name, mods)
            # a module naming itself or the crate root is no edge; a child
            # naming its parent module's items is (`super::x`)
            if t is not None and t != name and t != "":
                deps.add(t)
        # a parent module declares its children (`mod x;`): not an import
        graph[name] = deps
    return graph

def main():
    argv = sys.argv[1:]
    dot = "--dot" in argv
    expect = None
    if "--expect" in argv:
        i = argv.index("--expect")
        expect = argv[i + 1]
        del argv[i:i + 2]
    args = [a for a in argv if a != "--dot"]
    known = []
    if expect:
        for line in open(expect, encoding="utf-8"):
            line = line.split("#", 1)[0].strip()
            if line:
                c, mods = line.split(":", 1)
                known.append((c.strip(), {m.strip() for m in mods.split(",")}))
    crates = args or sorted(glob.glob("crates/*"))
    bad = False
    found = []
    for c in crates:
        if not os.path.isdir(os.path.join(c, "src")):
            continue
        g = crate_graph(c)
        if dot:
            print(f"digraph \"{os.path.basename(c)}\" {{")
            for a, bs in sorted(g.items()):
                for b in sorted(bs):
                    print(f'  "{a or "crate"}" -> "{b}";')
            print("}")
        cycles = [sorted(s) for s in sccs(g) if len(s) > 1]
        for s in sorted(cycles):
            found.append((c, set(s)))
            within = any(kc == c and set(s) <= km for kc, km in known)
            bad |= not within
            tag = "a known cycle" if within else "a cycle"
            print(f"{c}: {tag} of {len(s)} modules: {', '.join(s)}")
            for a in s:
                print(f"    {a} -> {', '.join(sorted(b for b in g[a] if b in s))}")
        if not cycles:
            print(f"{c}: {len(g)} modules, no cycle")
    for kc, km in known:
        if not any(fc == kc and fm == km for fc, fm in found):
            print(f"{kc}: the known cycle of {', '.join(sorted(km))} shrank or went: "
                  f"list what is left in {expect}")
    sys.exit(1 if bad else 0)

main()
