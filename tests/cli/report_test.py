#!/usr/bin/env python3
"""CLI tests of `memplan report --html`: exit 0 for the baseline, a plan and a
profile report, exit 2 naming the file and JSON pointer for bad --plan and
--profile input, byte-identical pages from identical input, and (with
--screenshot) a headless Chromium screenshot that is not blank.

Usage: report_test.py --memplan PATH [--screenshot]
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Runner, describe, load, read_bytes  # noqa: E402

GRAPH = "examples/gpt_tiny.graph.json"
MLP = "examples/mlp.graph.json"


def write(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def png_pixels(path):
    """(width, height, distinct pixel values) of an 8-bit RGB/RGBA PNG."""
    width, height, colors = png_colors(path)
    return width, height, len(colors)


def png_colors(path):
    """(width, height, the set of RGB values seen) of an 8-bit RGB/RGBA PNG."""
    data = read_bytes(path)
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "unexpected PNG format"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    bpp = 3 if ctype == 2 else 4
    stride = width * bpp
    prev = bytearray(stride)
    colors = set()
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        if y % 4 == 0:  # a sample of the rows is enough
            for x in range(0, stride, bpp * 2):
                colors.add(bytes(line[x:x + 3]))
        prev = line
    return width, height, colors


def screenshot(r, html, colors_wanted=()):
    """Screenshots `html`; checks it is a real page, and that each (name, "#rrggbb") of
    `colors` is drawn somewhere (lines drawn with shape-rendering crispEdges)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not r.check("chromium is installed (scripts/install-deps.sh --test)", chromium is not None):
        return
    png = r.path("page.png")
    p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--screenshot=" + png, "--window-size=1200,900",
                        "file://" + os.path.abspath(html)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                       cwd=r.tmp)
    ok = r.check("chromium screenshot: exit 0 and a PNG", p.returncode == 0 and
                 os.path.exists(png), p.stdout.decode("utf-8", "replace")[-2000:])
    if not ok:
        return
    size = os.path.getsize(png)
    r.check("screenshot over 20 KB", size > 20000, "%d bytes" % size)
    width, height, colors = png_pixels(png)
    r.check("screenshot 1200x900", (width, height) == (1200, 900), (width, height))
    r.check("screenshot not blank (%d colors)" % colors, colors >= 8, colors)
    _, _, seen = png_colors(png)
    for name, hexcolor in colors_wanted:
        rgb = bytes.fromhex(hexcolor.lstrip("#"))
        r.check("screenshot shows the %s (%s)" % (name, hexcolor), rgb in seen)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--screenshot", action="store_true",
                    help="also render the page with headless Chromium")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = Runner(os.path.abspath(args.memplan), tmp)
        page = r.path("a.html")
        rc, out, err = r.run("report", GRAPH, "--html", page)
        r.check("baseline: exit 0", rc == 0, describe(rc, out, err))
        r.check("baseline: summary names the page", ("wrote " + page) in out, out)
        rc, out, err = r.run("analyze", GRAPH, "--json", r.path("an.json"), "-q")
        peak = load(r.path("an.json"))
        html = read_bytes(page).decode("utf-8")
        m = re.search(r'<g id="peak" data-step="(-?\d+)" data-op="([^"]*)" data-bytes="(\d+)"',
                      html)
        r.check("page peak is analyze's", m is not None and
                (int(m.group(1)), m.group(2), int(m.group(3))) ==
                (peak["peak_step"], peak["peak_op"], peak["peak_bytes"]), m and m.groups())
        r.check("page lists the largest live tensor",
                "<td>%s</td>" % peak["live_at_peak"][0]["tensor"] in html)
        r.check("no URLs, no scripts", "http" not in html and "<script" not in html)

        # Determinism.
        rc, _, _ = r.run("report", GRAPH, "--html", r.path("b.html"), "-q")
        r.check("byte-identical pages", rc == 0 and read_bytes(page) == read_bytes(r.path("b.html")))
        rc, out, _ = r.run("report", GRAPH, "--html", r.path("c.html"), "--quiet")
        r.check("--quiet: nothing on stdout", rc == 0 and out == "", out)

        # A plan: its recompute list.
        plan = r.path("gpt.plan.json")
        rc, out, err = r.run("plan", GRAPH, "--budget", "110MiB", "-o", plan, "-q")
        r.check("plan: exit 0", rc == 0, describe(rc, out, err))
        rc, out, err = r.run("report", GRAPH, "--plan", plan, "--html", r.path("plan.html"))
        r.check("--plan: exit 0", rc == 0, describe(rc, out, err))
        plan_html = read_bytes(r.path("plan.html")).decode("utf-8")
        recomputed = load(plan)["recomputed"]
        r.check("--plan: recompute list", '<table id="recomputed">' in plan_html and
                all("<td>%s</td>" % t in plan_html for t in recomputed), recomputed)
        pm = re.search(r'<g id="peak" data-step="-?\d+" data-op="[^"]*" data-bytes="(\d+)"',
                       plan_html)
        pdoc = load(plan)
        r.check("--plan: the budget line at the plan's budget",
                '<g id="budget" data-bytes="%d">' % pdoc["budget_bytes"] in plan_html)
        r.check("--plan: the baseline curve behind, peaking at the baseline peak",
                '<polyline id="baseline" data-peak-bytes="%d"'
                % pdoc["predicted"]["baseline_peak_bytes"] in plan_html)
        r.check("--plan: the legend names both", "baseline (without the plan" in plan_html
                and ">budget" in plan_html)
        base_html = read_bytes(r.path("a.html")).decode("utf-8") \
            if os.path.exists(r.path("a.html")) else ""
        r.check("baseline page: no budget, no baseline curve",
                'id="budget"' not in base_html and 'id="baseline"' not in base_html)
        cost = load(plan)["predicted"]["recompute_cost"]
        r.check("--plan: the recompute cost is rounded to 4 significant digits",
                "recompute cost %s time_us" % ("%.4g" % cost) in plan_html
                and not re.search(r"\d\.\d{5,}", plan_html), "%r" % cost)
        r.check("--plan: the plan's predicted peak",
                pm and int(pm.group(1)) == load(plan)["predicted"]["peak_bytes"])

        # A profile report (CPU backend: always available).
        prof = r.path("profile.json")
        rc, out, err = r.run("profile", MLP, "--backend", "cpu", "--json", prof, "-q")
        r.check("profile: exit 0", rc == 0, describe(rc, out, err))
        rc, out, err = r.run("report", MLP, "--profile", prof, "--html", r.path("mlp.html"))
        r.check("--profile: exit 0", rc == 0, describe(rc, out, err))
        mlp_html = read_bytes(r.path("mlp.html")).decode("utf-8")
        measured = load(prof)["measured_peak_bytes"]
        r.check("--profile: measured peak line",
                '<g id="measured-peak" data-bytes="%d"' % measured in mlp_html)
        r.check("--profile: says only the peak is drawn", 'id="measured-note"' in mlp_html)
        rc, _, _ = r.run("report", MLP, "--profile", prof, "--html", r.path("mlp2.html"), "-q")
        r.check("--profile: byte-identical pages",
                rc == 0 and read_bytes(r.path("mlp.html")) == read_bytes(r.path("mlp2.html")))
        rc, out, err = r.run("report", GRAPH, "--profile", prof, "--html", r.path("other.html"))
        r.check("--profile of another program: exit 0 with a warning",
                rc == 0 and "the profile measured a program of" in err, describe(rc, out, err))

        # Bad input: exit 2, naming the file, the pointer and what was expected.
        def bad(name, argv, *needles):
            rc, out, err = r.run("report", GRAPH, "--html", r.path("bad.html"), *argv)
            r.check("%s: exit 2" % name, rc == 2, describe(rc, out, err))
            r.check("%s: message" % name, all(n in err for n in needles), err)

        doc = load(prof)
        bad_prof = write(r.path("bad_profile.json"), dict(doc, measured_peak_bytes="many"))
        bad("--profile bad peak", ["--profile", bad_prof], bad_prof,
            "/measured_peak_bytes", "found \"many\"", "expected")
        an_report = r.path("an.json")
        bad("--profile not a profile report", ["--profile", an_report], an_report, "/command",
            "expected \"profile\"")
        bad("--profile not JSON", ["--profile", write(r.path("nj.json"), "{")], "nj.json",
            "not JSON")
        bad("--profile missing", ["--profile", r.path("missing.json")], "missing.json")
        pdoc = load(plan)
        pdoc["budget_bytes"] = "lots"
        bad_plan = write(r.path("bad_plan.json"), pdoc)
        bad("--plan bad budget", ["--plan", bad_plan], bad_plan, "/budget_bytes", "expected")
        bad("--plan missing", ["--plan", r.path("nope.json")], "nope.json")
        rc, out, err = r.run("report", GRAPH)
        r.check("no --html: exit 2", rc == 2, describe(rc, out, err))

        # plan --sweep --html: the curve, floor, baseline peak and chosen budget.
        sweep_html, sweep_json = r.path("sweep.html"), r.path("sweep.json")
        rc, out, err = r.run("plan", GRAPH, "--budget", "110MiB", "--sweep", "6", "--html",
                             sweep_html, "--json", sweep_json, "-q")
        r.check("plan --sweep --html: exit 0", rc == 0, describe(rc, out, err))
        page = read_bytes(sweep_html).decode("utf-8")
        sdoc = load(sweep_json)
        points = {p["budget_bytes"]: p for p in sdoc["sweep"]}
        points.setdefault(sdoc["budget_bytes"], {
            "budget_bytes": sdoc["budget_bytes"], "feasible": sdoc["feasible"],
            "recompute_cost": sdoc["predicted"]["recompute_cost"]})
        want = " ".join("%d:%.6g" % (b, p["recompute_cost"])
                        for b, p in sorted(points.items()) if p["feasible"])
        m = re.search(r'<path id="curve" data-points="([^"]*)"', page)
        r.check("sweep page: the curve's points are the sweep's (and --budget's)",
                m and m.group(1) == want, (m and m.group(1), want))
        r.check("sweep page: floor and baseline peak marked",
                '<g id="floor" data-bytes="%d">' % sdoc["lower_bound_bytes"] in page and
                '<g id="baseline-peak" data-bytes="%d">' % sdoc["predicted"]["baseline_peak_bytes"]
                in page, sdoc.get("lower_bound_bytes"))
        r.check("sweep page: the chosen budget highlighted",
                '<g id="chosen" data-budget-bytes="%d"' % sdoc["budget_bytes"] in page
                and 'tr class="chosen"' in page)
        rc, out, err = r.run("plan", GRAPH, "--budget", "110MiB", "--html", sweep_html)
        r.check("plan --html without --sweep: exit 2 naming both",
                rc == 2 and "--html " + sweep_html + ": needs --sweep N" in err,
                describe(rc, out, err))
        # Reserved and device totals: lines of their own, the numbers analyze reports.
        dev_html = r.path("device.html")
        rc, out, err = r.run("report", GRAPH, "--html", dev_html, "--device", "h100",
                             "--device-conf", "cuda_context=20MiB")
        r.check("report --device: exit 0", rc == 0, describe(rc, out, err))
        rc, out, err = r.run("analyze", GRAPH, "--device", "h100", "--device-conf",
                             "cuda_context=20MiB", "--json", r.path("dev.json"), "-q")
        ddoc = load(r.path("dev.json"))
        page = read_bytes(dev_html).decode("utf-8")
        r.check("device page: reserved curve peaks at analyze's reserved peak",
                '<g id="reserved" data-peak-bytes="%d">' % ddoc["reserved"]["peak_bytes"] in page,
                ddoc["reserved"]["peak_bytes"])
        r.check("device page: device total line at analyze's total",
                '<g id="device" data-bytes="%d" data-device="h100">' %
                ddoc["device_memory"]["total_peak_bytes"] in page,
                ddoc["device_memory"]["total_peak_bytes"])
        page = read_bytes(r.path("plan.html")).decode("utf-8")
        r.check("plan page: a reserved curve, no device line without --device",
                '<g id="reserved" data-peak-bytes=' in page and '<g id="device"' not in page)
        if args.screenshot:
            screenshot(r, r.path("plan.html"),
                       [("budget line", "#ff7f0e"), ("baseline curve", "#b39ddb"),
                        ("reserved line", "#d81b60")])
            screenshot(r, dev_html, [("reserved line", "#d81b60"), ("device total", "#17becf")])
            screenshot(r, sweep_html,
                       [("sweep curve", "#1f77b4"), ("chosen budget", "#ff7f0e"),
                        ("floor", "#2ca02c"), ("baseline peak", "#d62728")])

        print("report_test: %d passed, %d failed" % (r.passed, len(r.failed)))
        return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
