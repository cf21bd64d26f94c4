#!/usr/bin/env python3
"""Renders memplan's predicted snapshot in PyTorch's own memory_viz viewer, headless.

PyTorch's viewer is torch/utils/viz/MemoryViz.js. It is not in the torch wheel, on PyPI or in
Debian: torch.cuda._memory_viz's pages import it from a CDN at view time, and CI reaches
neither. So this is a bench tool, not a test: give it MemoryViz.js from a PyTorch checkout
(--memory-viz-js) and d3 v5 (Debian's node-d3, the version MemoryViz.js imports).

Three pages, each rendered with headless Chromium (DOM dump and screenshot):
  raw        memplan's pickle bytes as they are, handed to the viewer as a dropped file is
             (the viewer's own JavaScript unpickler reads them: the https://pytorch.org/memory_viz
             path);
  trace      torch.cuda._memory_viz.trace_plot(snapshot) (Python re-pickles it);
  segments   torch.cuda._memory_viz.segment_plot(snapshot).
A consistency and compatibility check, not a measurement: every byte figure the viewer shows
is memplan's own prediction read back (the JSON's "kind" says so).
Checks: each page drew (the timeline's polygons, one per allocation drawn plus the
summarized band, or the segment view's rectangles, and its "reserved" line is the bytes of
the snapshot's segments), no JavaScript error, and the screenshot shows the viewer's palette. Writes OUT/{raw,trace,segments}.png and OUT/memory_viz.json.

Usage: memory_viz_screenshot.py --memplan build/cli/memplan --memory-viz-js PATH --out DIR
"""
import argparse
import base64
import functools
import http.server
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import threading

from torch.cuda import _memory_viz

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
from report_test import png_colors  # noqa: E402
CDN_IMPORT = re.compile(r'import \{add_local_files\} from "[^"]*MemoryViz\.js"')
# What this is (written into memory_viz.json): no figure here is measured.
KIND = ("consistency check, not a measurement: PyTorch's viewer draws memplan's own predicted "
        "snapshot; every byte figure in it (allocations, peak, reserved segments) is memplan's "
        "prediction read back, and reserved_shown == reserved_in_segments compares memplan's "
        "snapshot with itself. What it shows is that the viewer reads memplan's pickle and draws "
        "it.")
TABLEAU10 = ["#4e79a7", "#f28e2c", "#e15759", "#76b7b2", "#59a14f", "#edc949"]

PAGE = """<!DOCTYPE html>
<html><head><script src="d3.min.js"></script></head><body>
<script>window.addEventListener('error', e => document.title = 'ERROR: ' + e.message);</script>
<script type="module">
import {add_local_files} from "./MemoryViz.js"
const local_files = %s
add_local_files(local_files, %r)
</script></body></html>
"""


def local_viewer(memory_viz_js):
    """MemoryViz.js with its five CDN imports of d3 v5 and its modules taken from window.d3."""
    text = open(memory_viz_js).read()
    imports = re.findall(r'^import .* from "https://[^"]*";\n', text, re.M)
    if len(imports) != 5 or "d3@5" not in imports[0]:
        sys.exit("%s: expected MemoryViz.js's five d3 v5 imports, found %r" %
                 (memory_viz_js, imports))
    for line in imports:
        text = text.replace(line, "")
    shim = ("const d3 = window.d3;\n"
            "const {axisLeft, scaleLinear, zoom, zoomIdentity, brushX} = window.d3;\n")
    return text.replace("'use strict';\n", "'use strict';\n" + shim, 1)


def png_size_and_colors(path):
    """(width, height, set of '#rrggbb') of an 8-bit RGB(A) PNG (the CLI tests' decoder)."""
    width, height, colors = png_colors(path)
    return width, height, {"#" + c.hex() for c in colors}


def render(chromium, url, png):
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--window-size=1400,900", "--virtual-time-budget=20000"]
    dom = subprocess.run(args + ["--dump-dom", url], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, timeout=180, text=True).stdout
    subprocess.run(args + ["--screenshot=" + png, url], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=180, check=True)
    return dom


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--memory-viz-js", required=True,
                    help="torch/utils/viz/MemoryViz.js from a PyTorch checkout")
    ap.add_argument("--d3", default="/usr/share/nodejs/d3/dist/d3.min.js",
                    help="d3 v5 (apt-get install node-d3)")
    ap.add_argument("--graph", default=os.path.join(ROOT, "examples", "gpt_tiny.graph.json"))
    ap.add_argument("--set", default="batch=32")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        sys.exit("chromium is not installed (scripts/install-deps.sh --test)")
    if not os.path.exists(args.d3) or "v5." not in open(args.d3).read(200):
        sys.exit("%s: d3 v5 not found (apt-get install node-d3)" % args.d3)
    os.makedirs(args.out, exist_ok=True)

    site = tempfile.mkdtemp(prefix="memviz.")
    shutil.copy(args.d3, os.path.join(site, "d3.min.js"))
    with open(os.path.join(site, "MemoryViz.js"), "w") as f:
        f.write(local_viewer(args.memory_viz_js))
    pickle_path = os.path.join(site, "predicted.pickle")
    subprocess.run([args.memplan, "snapshot", args.graph, "--set", args.set, "-o", pickle_path,
                    "-q"], check=True)
    raw = open(pickle_path, "rb").read()
    snap = pickle.loads(raw)
    trace = snap["device_traces"][0]
    allocs = sum(1 for e in trace if e["action"] == "alloc")

    padded = raw + b"\x00" * (3 - len(raw) % 3)  # as _memory_viz pads before base64
    files = json.dumps([{"name": "predicted.pickle",
                         "base64": base64.b64encode(padded).decode()}])
    pages = {"raw": PAGE % (files, "Active Memory Timeline")}
    for name, html in (("trace", _memory_viz.trace_plot(snap)),
                       ("segments", _memory_viz.segment_plot(snap))):
        html, n = CDN_IMPORT.subn('import {add_local_files} from "./MemoryViz.js"', html)
        assert n == 1, "torch's memory_viz page no longer imports MemoryViz.js as expected"
        pages[name] = html.replace("<head>", '<head><script src="d3.min.js"></script>\n'
                                   "<script>window.addEventListener('error', e => "
                                   "document.title = 'ERROR: ' + e.message);</script>", 1)
    for name, html in pages.items():
        with open(os.path.join(site, name + ".html"), "w") as f:
            f.write(html)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_):
            pass

    handler = functools.partial(Quiet, directory=site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    results, failed = {"graph": os.path.relpath(args.graph, ROOT), "set": args.set,
                       "pickle_bytes": len(raw), "trace_entries": len(trace),
                       "allocs": allocs, "kind": KIND, "pages": {}}, 0
    for name in pages:
        png = os.path.join(args.out, name + ".png")
        dom = render(chromium, "http://127.0.0.1:%d/%s.html" % (port, name), png)
        width, height, colors = png_size_and_colors(png)
        palette = sorted(c for c in TABLEAU10 if c in colors)
        title = re.search(r"<title>(.*?)</title>", dom)
        page = {"polygons": dom.count("<polygon"), "rects": dom.count("<rect"),
                "error": title.group(1) if title else None, "png": os.path.basename(png),
                "png_size": [width, height], "colors": len(colors), "palette_seen": palette}
        if name == "segments":  # the last event selected: its reserved line is the segments'
            shown = re.search(r"allocated / [0-9.]+MiB \((\d+) bytes\) reserved", dom)
            page["reserved_shown"] = int(shown.group(1)) if shown else None
            page["reserved_in_segments"] = sum(s["total_size"] for s in snap["segments"])
            ok = (page["rects"] > len(snap["segments"]) and
                  page["reserved_shown"] == page["reserved_in_segments"])
        else:  # one polygon per allocation drawn, the summarized band, the minimap
            ok = page["polygons"] >= min(allocs, 15000) + 2
        ok = ok and page["error"] is None and len(palette) >= 3
        page["ok"] = ok
        failed += not ok
        results["pages"][name] = page
        print("%-8s %s: %d polygons, %d rects, %d colors, palette %s%s" %
              (name, "ok" if ok else "FAILED", page["polygons"], page["rects"], len(colors),
               ",".join(palette), ", " + page["error"] if page["error"] else ""))
    server.shutdown()
    with open(os.path.join(args.out, "memory_viz.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
