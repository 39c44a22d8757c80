#!/usr/bin/python3
"""The HTML report of `headroom load` as a browser shows it.

Starts `headroom serve --port 0`, runs `headroom load` against it with --json and --html, opens
the page in headless Chromium twice (--dump-dom, --screenshot) and checks that
(a) the script ran without error and drew every series the JSON asks for: the throughput step
    line has two points per bucket, one dot per request and kind, one CDF step per request;
(b) the screenshot shows them: the series colours fill the chart boxes the page reported.

usage: html_report_test.py HEADROOM_BINARY
Exits 77 (ctest SKIP_RETURN_CODE) when /usr/bin/chromium (or $HEADROOM_CHROMIUM) is absent, 1 on a failed check.
"""
import html.parser
import json
import os
import re
import subprocess
import sys
import tempfile
import time

CHROMIUM = os.environ.get("HEADROOM_CHROMIUM", "/usr/bin/chromium")  # override to test the skip
SKIP = 77
BLUE, ORANGE, RED = (0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0xD6, 0x27, 0x28)
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def start_server(binary, log_path):
    """headroom serve on any free port; returns (process, url)."""
    log = open(log_path, "wb")
    proc = subprocess.Popen([binary, "serve", "--port", "0"], stdout=log, stderr=log)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        with open(log_path, "rb") as f:
            m = re.search(rb"serving .* on (http://127\.0\.0\.1:[0-9]+)", f.read())
        if m:
            return proc, m.group(1).decode()
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    sys.exit("headroom serve did not start:\n" + open(log_path, errors="replace").read())


class Svgs(html.parser.HTMLParser):
    """Each chart <svg id=...>: its attributes and the elements drawn inside it."""

    def __init__(self):
        super().__init__()
        self.body, self.charts, self.current = {}, {}, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "svg" and a.get("id", "").startswith("chart-"):
            self.current = a["id"]
            self.charts[self.current] = {"attrs": a, "children": []}
        elif self.current:
            self.charts[self.current]["children"].append((tag, a))

    def handle_endtag(self, tag):
        if tag == "svg":
            self.current = None


def polylines(chart, color):
    return [len(a["points"].split()) for t, a in chart["children"] if t == "polyline" and a.get("stroke") == color]


def circles(chart, color):
    return sum(1 for t, a in chart["children"] if t == "circle" and a.get("fill") == color)


def check_dom(dom, report):
    p = Svgs()
    p.feed(dom)
    check("data-error" not in p.body, f"the page's script failed: {p.body.get('data-error')}")
    check(p.body.get("data-charts-drawn") == "3", f"charts drawn: {p.body.get('data-charts-drawn')} (want 3)")
    check(set(p.charts) == {"chart-throughput", "chart-latency", "chart-cdf"}, f"charts: {sorted(p.charts)}")
    if failures:
        return {}
    hex_ = lambda c: "#%02x%02x%02x" % c
    # Throughput: one step line, a point at each end of every bucket.
    buckets = len(report["series"]["start_s"])
    check(polylines(p.charts["chart-throughput"], hex_(BLUE)) == [2 * buckets],
          f"throughput line points {polylines(p.charts['chart-throughput'], hex_(BLUE))}, want [{2 * buckets}]")
    # Latency: a blue dot per successful request, an orange one per first token; no failures, no red.
    ok = [s for s in report["samples"] if s["error"] == ""]
    lat = p.charts["chart-latency"]
    check(circles(lat, hex_(BLUE)) == len(ok), f"E2E dots {circles(lat, hex_(BLUE))}, want {len(ok)}")
    with_ttft = sum(1 for s in ok if s["ttft_s"] >= 0)
    check(circles(lat, hex_(ORANGE)) == with_ttft, f"TTFT dots {circles(lat, hex_(ORANGE))}, want {with_ttft}")
    # CDF: from the origin, a horizontal and a vertical step per measured successful request.
    measured = [s for s in ok if s["measured"]]
    cdf = p.charts["chart-cdf"]
    check(polylines(cdf, hex_(BLUE)) == [1 + 2 * len(measured)],
          f"E2E CDF points {polylines(cdf, hex_(BLUE))}, want [{1 + 2 * len(measured)}]")
    n_ttft = sum(1 for s in measured if s["ttft_s"] >= 0)
    check(polylines(cdf, hex_(ORANGE)) == [1 + 2 * n_ttft],
          f"TTFT CDF points {polylines(cdf, hex_(ORANGE))}, want [{1 + 2 * n_ttft}]")
    rects = {}
    for name, chart in p.charts.items():
        rect = chart["attrs"].get("data-rect", "")
        check(re.fullmatch(r"-?\d+,-?\d+,\d+,\d+", rect) is not None, f"{name} has no data-rect: {rect!r}")
        if not failures:
            rects[name] = [int(v) for v in rect.split(",")]
    return rects


def near(pixel, color, tolerance=60):
    return sum(abs(a - b) for a, b in zip(pixel[:3], color)) <= tolerance


def check_screenshot(png, rects, report):
    from PIL import Image  # Debian python3-pil (scripts/setup.sh)

    image = Image.open(png).convert("RGB")
    width, height = image.size
    check((width, height) == (1200, 2000), f"screenshot is {width}x{height}, want 1200x2000")
    pixels = image.load()

    def count(rect, color):
        x, y, w, h = rect
        return sum(1 for i in range(max(0, x), min(width, x + w)) for j in range(max(0, y), min(height, y + h))
                   if near(pixels[i, j], color))

    for name, rect in rects.items():
        x, y, w, h = rect
        check(x >= 0 and y >= 0 and x + w <= width and y + h <= height, f"{name} at {rect} is off the screenshot")
    # The page's margin above the first chart holds text only: no series colour (a control that
    # shows the counting can say zero).
    top = rects["chart-throughput"][1]
    check(count([0, 0, width, top], BLUE) < 20, "series blue outside the charts")
    # A 2 px line across the plot's ~800 px width is well over 1000 pixels; take a quarter.
    blue = count(rects["chart-throughput"], BLUE)
    check(blue > 400, f"throughput chart: {blue} blue pixels")
    n = sum(1 for s in report["samples"] if s["error"] == "")
    # Dots of radius 3 are ~28 px each; overlaps allowed for, at least 5 px per request.
    lat_blue, lat_orange = count(rects["chart-latency"], BLUE), count(rects["chart-latency"], ORANGE)
    check(lat_blue >= 5 * n, f"latency chart: {lat_blue} blue pixels for {n} requests")
    check(lat_orange >= 5 * n, f"latency chart: {lat_orange} orange pixels for {n} requests")
    lat_red = count(rects["chart-latency"], RED)
    check(lat_red == 0, f"latency chart: {lat_red} red pixels but no request failed")
    cdf_blue, cdf_orange = count(rects["chart-cdf"], BLUE), count(rects["chart-cdf"], ORANGE)
    check(cdf_blue > 400, f"CDF chart: {cdf_blue} blue pixels")
    # When the first-token times cluster, the TTFT curve is a near-vertical 2 px step about as tall
    # as the plot, half of whose pixels antialiasing can take off the exact colour: seen at 295
    # under ASan. A hundred still shows a curve drawn in the box.
    check(cdf_orange > 100, f"CDF chart: {cdf_orange} orange pixels")
    print(f"pixels: throughput blue {blue}; latency blue {lat_blue}, orange {lat_orange}, red {lat_red}; "
          f"CDF blue {cdf_blue}, orange {cdf_orange}")


def chromium(args, work):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + work + "/profile",
                           "--force-device-scale-factor=1", "--hide-scrollbars", "--window-size=1200,2000"] + args,
                          capture_output=True, text=True, timeout=120)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if not os.path.exists(CHROMIUM):
        print(f"SKIP: {CHROMIUM} is not installed (Debian package chromium); the HTML report was not checked in a browser")
        sys.exit(SKIP)
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="headroom-html-") as work:
        server, url = start_server(binary, work + "/serve.log")
        try:
            # A count of requests, not a time window: under the sanitizers, beside other tests, the
            # warm-up's requests can outlast a 3 s window and leave nothing measured.
            load = subprocess.run([binary, "load", "--endpoint", url, "-c", "4", "--requests", "12", "--warmup", "1",
                                   "--json", work + "/report.json", "--html", work + "/report.html"],
                                  capture_output=True, text=True, timeout=300)
        finally:
            server.kill()
            server.wait()
        if load.returncode != 0:
            sys.exit(f"headroom load failed ({load.returncode}):\n{load.stdout}{load.stderr}")
        report = json.load(open(work + "/report.json"))
        page = "file://" + work + "/report.html"

        dom = chromium(["--dump-dom", page], work)
        check(dom.returncode == 0 and "<svg" in dom.stdout, f"chromium --dump-dom failed ({dom.returncode}): {dom.stderr[-2000:]}")
        rects = check_dom(dom.stdout, report) if not failures else {}

        shot = chromium(["--screenshot=" + work + "/shot.png", page], work)
        check(shot.returncode == 0 and os.path.exists(work + "/shot.png"),
              f"chromium --screenshot failed ({shot.returncode}): {shot.stderr[-2000:]}")
        if rects and not failures:
            check_screenshot(work + "/shot.png", rects, report)
        if failures and os.environ.get("HEADROOM_KEEP"):
            import shutil
            shutil.copytree(work, os.environ["HEADROOM_KEEP"], dirs_exist_ok=True)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("ok: the HTML report draws every series, in Chromium")


if __name__ == "__main__":
    main()
