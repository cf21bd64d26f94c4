#!/usr/bin/python3
"""Summarise `perf script -F ip,sym --no-inline` output of a `memplan analyze` run.

    perf record -F 1999 --call-graph dwarf,16384 -o perf.data -- memplan analyze G --json /dev/null -q
    perf script -i perf.data -F ip,sym --no-inline | /usr/bin/python3 bench/perf_breakdown.py

Prints (1) inclusive time per pipeline phase (each sample charged to the innermost
memplan phase function on its stack), (2) self time by leaf category (allocator,
hash tables, JSON lexer/DOM, ...), (3) allocator time by the phase that called it,
(4) samples under hash-table calls by phase, (5) the top self symbols. Percentages are of all samples.
"""
import collections
import re
import sys

# Phase functions, matched on the demangled frame name; the innermost match wins,
# printed as the path of all matches from the root.
PHASES = [
    ("LoadGraphFile", r"memplan::LoadGraphFile\b"),
    ("ReadFile", r"memplan::ReadFile\b"),
    ("CheckJsonDepth", r"memplan::CheckJsonDepth\b"),
    ("json::parse (DOM build)", r"nlohmann::.*::parser<.*>::parse\b|sax_parse_internal"),
    ("GraphParser::Parse", r"GraphParser::Parse\b"),
    ("ParseTensors", r"GraphParser::ParseTensors\b"),
    ("ParseOps", r"GraphParser::ParseOps\b"),
    ("ResolveTensorRefs", r"GraphParser::ResolveTensorRefs\b"),
    ("CheckOps", r"GraphParser::CheckOps\b"),
    ("Graph::Finalize", r"memplan::Graph::Finalize\b"),
    ("DOM destruction", r"basic_json<.*>::~basic_json|json_value::destroy"),
    ("LowerToJoint", r"memplan::LowerToJoint\b"),
    ("Lowering::Run", r"Lowering::Run\b"),
    ("PropagateRequiresGrad", r"Lowering::PropagateRequiresGrad\b"),
    ("EmitForward", r"Lowering::EmitForward\b"),
    ("EmitBackward", r"Lowering::EmitBackward\b"),
    ("EmitSeeds", r"Lowering::EmitSeeds\b"),
    ("~Lowering", r"Lowering::~Lowering\b"),
    ("~Graph", r"memplan::Graph::~Graph\b"),
    ("~JointGraph", r"memplan::JointGraph::~JointGraph\b"),
    ("AnalyzeBaseline", r"memplan::AnalyzeBaseline\b"),
    ("BuildBaselineProgram", r"memplan::BuildBaselineProgram\b"),
    ("Simulate", r"memplan::Simulate\b"),
    ("PeakLowerBound", r"memplan::PeakLowerBound\b"),
    ("AnalyzeReportJson", r"memplan::AnalyzeReportJson\b"),
    ("GraphToJson", r"memplan::GraphToJson\b"),
    ("WriteFile", r"WriteFile\b"),
]
PHASES = [(n, re.compile(p)) for n, p in PHASES]

LEAF = [
    ("allocator (malloc/free/consolidate)", r"malloc|_int_free|cfree|unlink_chunk|^free$|"
     r"operator new|operator delete|tcache|sysmalloc|brk"),
    ("std::unordered_map/set (hash, probe, insert)", r"_Hashtable|_Hash_bytes|_Prime_rehash"),
    ("nlohmann lexer/parser", r"nlohmann::.*(lexer|parser|json_sax)"),
    ("nlohmann DOM (map nodes, destroy)", r"nlohmann|_Rb_tree"),
    ("memcpy/memmove/memcmp/strlen", r"mem(move|cpy|cmp|set)|strlen|__memcmp"),
    ("std::string", r"basic_string"),
    ("fmt::format", r"fmt::"),
    ("kernel (page faults, mmap)", r"^\[k\]"),
]
LEAF = [(n, re.compile(p)) for n, p in LEAF]


def samples(lines):
    cur = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if cur:
                yield cur
            cur = []
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        ip, sym = parts
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        if ip.startswith("ffffffff"):
            sym = "[k]" + sym
        cur.append(sym)
    if cur:
        yield cur


def leaf_category(sym):
    s = sym[3:] if sym.startswith("[k]") else sym
    if sym.startswith("[k]"):
        return "kernel (page faults, mmap)"
    for name, rx in LEAF:
        if rx.search(s):
            return name
    return "memplan code / other"


def short(sym, n=110):
    sym = sym.replace("std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >", "string")
    sym = re.sub(r"nlohmann::json_abi_v[0-9_]+::basic_json<[^>]*<[^>]*>[^>]*>", "json", sym)
    sym = re.sub(r"nlohmann::json_abi_v[0-9_]+::", "nl::", sym)
    return sym if len(sym) <= n else sym[: n - 3] + "..."


def main():
    total = 0
    phase = collections.Counter()
    leaf = collections.Counter()
    alloc_by_phase = collections.Counter()
    hash_by_phase = collections.Counter()
    self_sym = collections.Counter()
    for frames in samples(sys.stdin):
        total += 1
        path = []
        for sym in reversed(frames):  # root first
            for name, rx in PHASES:
                if rx.search(sym):
                    if not path or path[-1] != name:
                        path.append(name)
                    break
        key = " > ".join(path) if path else "(outside the pipeline: startup, exit, CLI)"
        for i in range(1, len(path) + 1):
            phase[" > ".join(path[:i])] += 1
        if not path:
            phase[key] += 1
        cat = leaf_category(frames[0])
        leaf[cat] += 1
        if cat.startswith("allocator"):
            alloc_by_phase[key] += 1
        # Hash-table work, wherever the leaf is (hashing, probing, node malloc).
        if any("_Hashtable" in f or "unordered_" in f for f in frames):
            hash_by_phase[key] += 1
        self_sym[short(frames[0])] += 1
    if not total:
        print("no samples")
        return 1
    pct = lambda n: 100.0 * n / total
    print("samples: %d\n" % total)
    print("== inclusive time by phase (path from the root; >= 0.5%) ==")
    for k in sorted(phase, key=lambda k: k.split(" > ")):
        if pct(phase[k]) >= 0.5:
            depth = k.count(" > ")
            print("%6.1f%%  %s%s" % (pct(phase[k]), "  " * depth, k.split(" > ")[-1]))
    print("\n== self time by leaf category ==")
    for k, n in leaf.most_common():
        print("%6.1f%%  %s" % (pct(n), k))
    print("\n== allocator self time by calling phase (>= 0.5%) ==")
    for k, n in alloc_by_phase.most_common():
        if pct(n) >= 0.5:
            print("%6.1f%%  %s" % (pct(n), k))
    print("\n== samples under a std::unordered_map/set call, by phase (>= 0.5%) ==")
    for k, n in hash_by_phase.most_common():
        if pct(n) >= 0.5:
            print("%6.1f%%  %s" % (pct(n), k))
    print("\n== top self symbols ==")
    for k, n in self_sym.most_common(25):
        print("%6.1f%%  %s" % (pct(n), k))
    return 0


if __name__ == "__main__":
    sys.exit(main())
