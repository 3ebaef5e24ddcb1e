#!/usr/bin/env python3
"""check_html_view: the HTML report as a person uses it, in headless Chromium driven over
the DevTools protocol (--remote-debugging-pipe; python's stdlib only), on a real recording
of the four-site workload (tests/workloads/four_sites.c, built here with cc, --alloc exact):
- the top-contexts table shows file:line for each frame, its tooltip one frame a line,
  samples and the at-exit column; the "Live at exit" section lists site_leak;
- sorting: a click on a header sorts by it (descending, then ascending);
- flame graph: search highlights the matching frames and says their share; a click on a
  frame zooms into it and a second click zooms out; bottom-up puts allocation sites first;
- heap over time: bars and the top contexts' lines on a time axis whose labels are times;
- at 1280 and at 480 pixels wide: no chart label outside the chart or overlapping another,
  no flame-graph label cut without an ellipsis; a screenshot of each into the log folder;
- the page fetches nothing from the network.
Exits 0 pass, 1 fail, 77 skip (no BPF, no cc, no chromium)."""
import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import mpdtest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--remote-debugging-pipe"]
WIDTHS = (1280, 480)


class Browser:
    """Chromium over --remote-debugging-pipe: it reads commands on fd 3 and writes replies
    on fd 4, each a JSON message ending in NUL."""

    def __init__(self, exe, profile):
        self.to_r, self.to_w = os.pipe()
        self.from_r, self.from_w = os.pipe()
        to_r, from_w = self.to_r, self.from_w

        def fds():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)
        self.p = subprocess.Popen([exe] + FLAGS + ["--user-data-dir=" + profile, "about:blank"],
                                  pass_fds=(3, 4, to_r, from_w), preexec_fn=fds,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf, self.id, self.session = b"", 0, None

    def call(self, method, params=None, session=True, timeout=30):
        self.id += 1
        msg = {"id": self.id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        end = time.time() + timeout
        while time.time() < end:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                m = json.loads(raw)
                if m.get("id") == self.id:
                    if "error" in m:
                        raise RuntimeError("%s: %s" % (method, m["error"]))
                    return m.get("result", {})
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk
        raise RuntimeError("%s: no reply in %d s" % (method, timeout))

    def eval(self, js):
        r = self.call("Runtime.evaluate", {"expression": js, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError("page script: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=5)
        except (RuntimeError, OSError):
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


# Runs in the page: what a person would see wrong, as a list of strings.
LAYOUT_JS = r"""(function(){
var errs=[], svg=document.querySelector('#heap-chart svg');
if(!svg) return ['no heap chart'];
var W=svg.width.baseVal.value, H=svg.height.baseVal.value, boxes=[];
svg.querySelectorAll('text').forEach(function(t){var b=t.getBBox();
 if(b.x<-0.5||b.y<-0.5||b.x+b.width>W+0.5||b.y+b.height>H+0.5)
  errs.push('chart label "'+t.textContent+'" outside the chart ('+[b.x,b.y,b.width,W].join(',')+')');
 if(t.classList.contains('xt')) boxes.push([b.x,b.x+b.width,t.textContent])});
boxes.sort(function(a,b){return a[0]-b[0]});
for(var i=1;i<boxes.length;i++) if(boxes[i][0]<boxes[i-1][1]) errs.push('time labels overlap: '+boxes[i-1][2]+' / '+boxes[i][2]);
document.querySelectorAll('#flame-graph .fr').forEach(function(e){
 if(e.scrollWidth>e.clientWidth+1) errs.push('flame label cut: '+e.textContent)
 else if(e.textContent && e.textContent!==e.dataset.name && e.textContent.slice(-1)!=='\u2026') errs.push('flame label altered: '+e.textContent)});
document.querySelectorAll('h1,h2,#heap-legend .key,.controls label').forEach(function(e){
 if(e.scrollWidth>e.clientWidth+1) errs.push('text cut: '+e.textContent.slice(0,60))});
return errs})()"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--log-dir", required=True)
    a = ap.parse_args()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        mpdtest.skip("chromium not installed (Debian package chromium)")
    cc = shutil.which("cc")
    if not cc:
        mpdtest.skip("no C compiler (cc) to build the workload")
    mpdtest.require_bpf()
    tmp = tempfile.mkdtemp(prefix="mpd-htmlview-")
    m, db, prog = a.memprofd, os.path.join(tmp, "p.db"), os.path.join(tmp, "four_sites")
    subprocess.run([cc, "-g", "-O1", "-fno-omit-frame-pointer", "-o", prog, a.source], check=True)
    p = mpdtest.record(m, db, [prog])
    if p.returncode != 0:
        mpdtest.finish(["record: " + mpdtest.describe(p)], "html_view", tmp)
    page = os.path.join(tmp, "report.html")
    p = mpdtest.run([m, "export", "html", "--db", db, "--binary", prog, "-o", page])
    if p.returncode != 0:
        mpdtest.finish(["export html: " + mpdtest.describe(p)], "html_view", tmp)
    errs = []
    with open(page, encoding="utf-8") as f:
        src = f.read()
    if re.search(r'(src|href)\s*=\s*"(https?:)?//', src):
        errs.append("the report references a network resource")
    # The heap chart is bytes live: site_long's 40 KiB for 300 ms and site_leak's 25 KiB
    # until exit, not the 388 KB allocated; its bytes x seconds are the contexts'.
    d = json.loads(re.search(r'id="mpd-data">(.*?)</script>', src, re.S).group(1))
    got = sum(sum(b[1:]) for b in d["buckets"]) * d["bucket_s"]
    want = sum(c["total_size"] * c["total_lifetime_ms"] / c["alloc_count"] / 1e3
               for c in mpdtest.query_contexts(m, db, ["--binary", prog]) if c["alloc_count"])
    if not want or abs(got - want) > 0.03 * want + d["bucket_s"] * len(d["buckets"]):
        errs.append("heap chart: %.0f byte-seconds, the contexts' bytes x lifetimes give %.0f"
                    % (got, want))
    mpdtest.log("heap chart: %.0f byte-seconds (contexts: %.0f)" % (got, want))
    b = Browser(exe, tempfile.mkdtemp(prefix="profile.", dir=tmp))
    b.source = a.source
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        b.session = b.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                           session=False)["sessionId"]
        b.call("Page.enable")
        b.call("Network.enable")
        for width in WIDTHS:
            b.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 1000,
                                                          "deviceScaleFactor": 1, "mobile": False})
            b.call("Page.navigate", {"url": "file://" + page})
            for _ in range(100):
                if b.eval("document.body && document.body.dataset.ready === '1'"):
                    break
                time.sleep(0.1)
            else:
                errs.append("%d px: the viewer never finished" % width)
                continue
            check_page(b, errs, width) if width == WIDTHS[0] else None
            errs += ["%d px: %s" % (width, e) for e in b.eval(LAYOUT_JS)]
            h = b.eval("document.documentElement.scrollHeight")
            b.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": min(h, 6000),
                                                          "deviceScaleFactor": 1, "mobile": False})
            shot = b.call("Page.captureScreenshot", {"format": "png"})["data"]
            os.makedirs(a.log_dir, exist_ok=True)
            path = os.path.join(os.path.abspath(a.log_dir), "html_view_%d.png" % width)
            with open(path, "wb") as f:
                f.write(base64.b64decode(shot))
            mpdtest.log("screenshot: " + path)
    except (RuntimeError, OSError, KeyError) as e:
        errs.append("browser: %s" % e)
    finally:
        b.close()
    mpdtest.finish(errs, "html_view: a report a person can use, in Chromium", tmp)


def check_page(b, errs, width):
    """Tables, sorting, search, zoom and the two flame views, as clicks and typing."""
    row = b.eval("(function(){var r=document.querySelector('#ctx-table tbody tr');"
                 "return [r.textContent, r.querySelector('td.stack').title]})()")
    if not re.search(r"site_small \S*four_sites\.c:\d+", row[0]) or "\n" not in row[1] or \
            "main" not in row[1]:
        errs.append("top row without file:line or a one-frame-a-line tooltip: %r" % row)
    leak = b.eval("(function(){var t=document.querySelector('#leak-table');"
                  "return t?t.tBodies[0].rows[0].textContent:''})()")
    if "site_leak" not in leak or "25.0 KiB" not in leak or "at exit" not in leak:
        errs.append("live-at-exit section: %r" % leak)
    col = b.eval("[].findIndex.call(document.querySelectorAll('#ctx-table th'),"
                 "function(t){return t.textContent==='objects'})")
    vals = []
    for _ in range(2):
        b.eval("document.querySelectorAll('#ctx-table th')[%d].click()" % col)
        vals.append(b.eval("[].map.call(document.querySelectorAll('#ctx-table tbody tr'),"
                           "function(r){return +r.cells[%d].dataset.v})" % col))
    if vals[0] != sorted(vals[0], reverse=True) or vals[1] != sorted(vals[1]) or \
            len(set(vals[0])) < 3:
        errs.append("sorting by objects: %r" % vals)
    found = b.eval("(function(){var s=document.getElementById('flame-search');s.value='site_leak';"
                   "s.dispatchEvent(new Event('input'));return [document.querySelectorAll("
                   "'#flame-graph .fr.match').length,document.getElementById('flame-found')"
                   ".textContent]})()")
    share = re.search(r"matched: ([\d.]+)%", found[1])
    # site_leak's 25600 B of the 388056 allocated: 6.6%.
    if not found[0] or not share or abs(float(share.group(1)) - 6.6) > 0.2:
        errs.append("search site_leak: %r" % found)
    # Flame tooltips name where each frame is: the allocation site's malloc line, and
    # every line of main that calls into a site.
    tips = b.eval("(function(){document.getElementById('flame-reset').click();var r={};"
                  "[].forEach.call(document.querySelectorAll('#flame-graph .fr'),function(e)"
                  "{r[e.dataset.name]=e.title});return r})()")
    src = open(b.source).read().split("\n")
    want = {"site_small": [i + 1 for i, l in enumerate(src) if "malloc(64)" in l],
            "main": [i + 1 for i, l in enumerate(src) if "= site_small()" in l or
                     "= site_leak()" in l or "= site_long()" in l]}
    for fn, lines in want.items():
        got = [int(n) for n in re.findall(r"four_sites\.c:(\d+)", tips.get(fn, ""))]
        if not lines or not set(lines) <= set(got):
            errs.append("flame tooltip of %s: %r, want four_sites.c lines %r" %
                        (fn, tips.get(fn), lines))
    zoom = b.eval("(function(){document.getElementById('flame-reset').click();"
                  "var f=[].find.call(document.querySelectorAll('#flame-graph .fr'),function(e)"
                  "{return e.dataset.name==='main'});f.click();var top=document.querySelector("
                  "'#flame-graph .fr');var r=[top.dataset.name,top.style.width];"
                  "document.querySelector('#flame-graph .fr').click();"
                  "r.push(document.querySelector('#flame-graph .fr').dataset.name);return r})()")
    if zoom[0] != "main" or zoom[2] != "all":
        errs.append("zoom into main and out: %r" % zoom)
    up = b.eval("(function(){var s=document.getElementById('flame-mode');s.value='bottom-up';"
                "s.dispatchEvent(new Event('change'));return [].filter.call(document."
                "querySelectorAll('#flame-graph .fr'),function(e){return e.style.top==='17px'})"
                ".map(function(e){return e.dataset.name})})()")
    if "site_small" not in up or "main" in up:
        errs.append("bottom-up: first level is %r, want the allocation sites" % up)
    b.eval("(function(){var s=document.getElementById('flame-mode');s.value='top-down';"
           "s.dispatchEvent(new Event('change'))})()")
    ticks = b.eval("[].map.call(document.querySelectorAll('#heap-chart text.xt'),"
                   "function(t){return t.textContent})")
    bars = b.eval("document.querySelectorAll('#heap-chart rect.cell').length")
    lines = b.eval("document.querySelectorAll('#heap-chart polyline.ctx').length")
    if len(ticks) < 2 or not all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in ticks) or \
            not bars or lines < 3:
        errs.append("heap chart: ticks %r, %d bars, %d context lines" % (ticks, bars, lines))


if __name__ == "__main__":
    main()
