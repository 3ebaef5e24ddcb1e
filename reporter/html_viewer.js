/* memprofd export html: the viewer, inlined into the report at build time
 * (reporter/embed_text.py). Reads the JSON block #mpd-data; draws the heap-over-time
 * chart (SVG, real time axis), the flame graph (top-down or bottom-up, click to zoom,
 * search by function or file; tooltips give each frame's file:line, inlined ones marked,
 * from the JSON names/where/inl tables); sorts tables (#sort=TABLE:COLUMN[:asc] opens a
 * sorted view). No network. */
(function () {
'use strict';
var D = JSON.parse(document.getElementById('mpd-data').textContent);
function fmtB(v) {
  var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
  while (v >= 1024 && i < 4) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + ' ' + u[i];
}
function fmtN(v) { return v >= 1e6 ? (v / 1e6).toFixed(1) + 'M' : v >= 1e4 ? (v / 1e3).toFixed(1) + 'k' : '' + v; }
var canvas = document.createElement('canvas').getContext('2d');
function textWidth(s, font) { canvas.font = font; return canvas.measureText(s).width; }
/* s cut to fit px with an ellipsis, or '' when not even one character fits. */
function fit(s, px, font) {
  if (textWidth(s, font) <= px) return s;
  var lo = 0, hi = s.length;
  while (lo < hi) { var m = (lo + hi + 1) >> 1; if (textWidth(s.slice(0, m) + '\u2026', font) <= px) lo = m; else hi = m - 1; }
  return lo ? s.slice(0, lo) + '\u2026' : '';
}

/* ---- sortable tables ---- */
document.querySelectorAll('table.sortable').forEach(function (t) {
  t.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var desc = !th.classList.contains('desc');
      t.querySelectorAll('th').forEach(function (x) { x.classList.remove('asc', 'desc'); });
      th.classList.add(desc ? 'desc' : 'asc');
      var tb = t.tBodies[0], rows = Array.prototype.slice.call(tb.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col], y = b.cells[col], p = x.dataset.v, q = y.dataset.v;
        var c = (p !== undefined && q !== undefined) ? (parseFloat(p) - parseFloat(q)) :
          x.textContent.localeCompare(y.textContent);
        return desc ? -c : c;
      });
      rows.forEach(function (r) { tb.appendChild(r); });
    });
  });
});
var sm = /^#sort=([\w-]+):(\d+)(?::(asc|desc))?$/.exec(location.hash);
if (sm) {
  var st = document.getElementById(sm[1]), sh = st && st.tHead.rows[0].cells[+sm[2]];
  if (sh) { if (sm[3] === 'asc') sh.classList.add('desc'); sh.click(); }
}

/* ---- flame graph: top-down (callers on top) or bottom-up (allocation sites on top) ---- */
var W = { bytes: 0, objects: 1, accesses: 2 }, FONT = '11px monospace', ROW = 17;
var fg = document.getElementById('flame-graph'), sel = document.getElementById('flame-weight'),
  modeSel = document.getElementById('flame-mode'), search = document.getElementById('flame-search'),
  found = document.getElementById('flame-found');
function add(n, v) { for (var i = 0; i < 3; i++) n.v[i] += v[i]; }
function tree(bottomUp) {
  var root = { n: 'all', v: [0, 0, 0], c: {} };
  D.stacks.forEach(function (s) {
    var node = root, path = bottomUp ? s[1].slice().reverse() : s[1];
    add(node, s[0]);
    path.forEach(function (i) {
      var k = D.names[i], w = D.where[i] ? D.where[i] + (D.inl[i] ? ' [inlined]' : '') : '';
      node = node.c[k] || (node.c[k] = { n: k, v: [0, 0, 0], c: {}, p: node, w: {} });
      if (w) node.w[w] = 1;
      add(node, s[0]);
    });
  });
  if (D.other[0] || D.other[1] || D.other[2]) {
    root.c['(other contexts)'] = { n: '(other contexts)', v: D.other.slice(), c: {}, p: root };
    add(root, D.other);
  }
  return root;
}
var ROOT = tree(false), zoom = ROOT;
function color(s) {
  var h = 0;
  for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
  return 'hsl(' + (10 + h % 45) + ',' + (60 + h % 30) + '%,' + (55 + h % 15) + '%)';
}
/* A frame's source lines for its tooltip, one a line: a function reached from several
 * lines (or inlined into several callers) lists each, up to FLAME_LOCS. */
var FLAME_LOCS = 8;
function where(locs) {
  if (!locs.length) return '';
  var more = locs.length > FLAME_LOCS ? '\n\u2026 and ' + (locs.length - FLAME_LOCS) + ' more' : '';
  return '\n' + locs.slice(0, FLAME_LOCS).join('\n') + more;
}
function draw() {
  var w = W[sel.value] || 0, width = fg.clientWidth || 1200, tot = zoom.v[w], maxd = 0;
  var q = search.value.trim().toLowerCase(), matched = 0;
  fg.textContent = '';
  if (!tot) { fg.innerHTML = '<p class="empty">Nothing to draw for this weight.</p>'; fg.style.height = ''; return; }
  function place(n, x, d, inMatch) {
    var px = n.v[w] / tot * width;
    if (px < 0.5) return;
    if (d > maxd) maxd = d;
    var locs = n.w ? Object.keys(n.w) : [];
    var hit = q && (n.n + ' ' + locs.join(' ')).toLowerCase().indexOf(q) >= 0;
    if (hit && !inMatch) matched += n.v[w];
    var e = document.createElement('div');
    e.className = 'fr' + (hit ? ' match' : q ? ' dim' : '');
    e.style.left = x + 'px'; e.style.width = px + 'px'; e.style.top = (d * ROW) + 'px';
    e.style.background = hit ? '#e056fd' : color(n.n);
    var val = w === 0 ? fmtB(n.v[0]) : fmtN(n.v[w]);
    e.title = n.n + ' \u2014 ' + val + ' (' + (100 * n.v[w] / tot).toFixed(1) + '%)' + where(locs);
    e.dataset.name = n.n;
    e.textContent = fit(n.n, px - 6, FONT);
    e.addEventListener('click', function () { zoom = (n === zoom) ? ROOT : n; draw(); });
    fg.appendChild(e);
    var kids = Object.keys(n.c).map(function (k) { return n.c[k]; }).sort(function (a, b) { return b.v[w] - a.v[w]; }), cx = x;
    kids.forEach(function (k) { place(k, cx, d + 1, inMatch || hit); cx += k.v[w] / tot * width; });
  }
  place(zoom, 0, 0, false);
  fg.style.height = ((maxd + 1) * ROW) + 'px';
  found.textContent = q ? 'matched: ' + (100 * matched / tot).toFixed(1) + '% of ' + (zoom === ROOT ? 'all' : zoom.n) : '';
}
sel.value = D.weight;
sel.addEventListener('change', draw);
modeSel.addEventListener('change', function () { ROOT = tree(modeSel.value === 'bottom-up'); zoom = ROOT; draw(); });
search.addEventListener('input', draw);
document.getElementById('flame-reset').addEventListener('click', function () { zoom = ROOT; search.value = ''; draw(); });
window.addEventListener('resize', function () { draw(); chart(); });
draw();

/* ---- heap over time: bytes live by class per time bucket, and the top contexts ---- */
var hm = document.getElementById('heap-chart'), NS = 'http://www.w3.org/2000/svg';
var CLS_COLOR = { hot: '#e74c3c', notcold: '#f0ad4e', cold: '#3498db' };
function el(name, attrs, parent, text) {
  var e = document.createElementNS(NS, name);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function pad2(v) { return (v < 10 ? '0' : '') + v; }
/* A tick label readable at the axis's span: dates when it spans days, else hh:mm(:ss). */
function tlabel(ms, span) {
  var d = new Date(ms);
  var hm = pad2(d.getUTCHours()) + ':' + pad2(d.getUTCMinutes());
  if (span > 2 * 86400e3) return d.toISOString().slice(0, 10);
  if (span > 86400e3) return d.toISOString().slice(5, 10) + ' ' + hm;
  return span > 600e3 ? hm : hm + ':' + pad2(d.getUTCSeconds());
}
function niceStep(span, n) {
  var steps = [1e3, 5e3, 10e3, 30e3, 60e3, 300e3, 600e3, 1800e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 12 * 3600e3, 86400e3, 7 * 86400e3];
  for (var i = 0; i < steps.length; i++) if (span / steps[i] <= n) return steps[i];
  return steps[steps.length - 1];
}
function chart() {
  hm.textContent = '';
  if (!D.buckets.length) { hm.innerHTML = '<p class="empty">No time buckets recorded.</p>'; return; }
  var bw = D.bucket_s * 1000, t0 = D.buckets[0][0] / 1e6, t1 = D.buckets[D.buckets.length - 1][0] / 1e6 + bw;
  var span = t1 - t0, lw = textWidth(tlabel(t0, span), '11px sans-serif') + 16;
  /* Margins hold half a time label on the right, the byte labels on the left. */
  var width = Math.max(320, hm.clientWidth || 900), height = 260, L = 80, R = Math.ceil(lw / 2) + 4, T = 12, B = 40;
  var max = 1;
  D.buckets.forEach(function (b) { var s = 0; for (var i = 1; i < b.length; i++) s += b[i]; if (s > max) max = s; });
  var svg = el('svg', { width: width, height: height, role: 'img', 'aria-label': 'heap over time' }, hm);
  var x = function (ms) { return L + (ms - t0) / (t1 - t0) * (width - L - R); };
  var y = function (v) { return T + (1 - v / max) * (height - T - B); };
  /* y axis: 4 ticks */
  for (var k = 0; k <= 4; k++) {
    var v = max * k / 4;
    el('line', { x1: L, x2: width - R, y1: y(v), y2: y(v), class: 'grid' }, svg);
    el('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, svg, fmtB(Math.round(v)));
  }
  /* x axis: ticks at a step that leaves room for each label */
  var step = niceStep(span, Math.max(1, Math.floor((width - L - R) / lw)));
  for (var t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
    el('line', { x1: x(t), x2: x(t), y1: height - B, y2: height - B + 4, class: 'axis' }, svg);
    el('text', { x: x(t), y: height - B + 16, 'text-anchor': 'middle', class: 'tick xt' }, svg, tlabel(t, span));
  }
  el('text', { x: L, y: height - 4, class: 'tick' }, svg, 'UTC; each bar: bytes live, averaged over its ' + D.bucket_s + ' s (estimated)');
  /* stacked bars by class */
  D.buckets.forEach(function (b) {
    var base = 0, bx = x(b[0] / 1e6), bwx = Math.max(1, x(b[0] / 1e6 + bw) - bx - 1);
    D.classes.forEach(function (c, i) {
      var v = b[i + 1];
      if (!v) return;
      var r = el('rect', { x: bx, y: y(base + v), width: bwx, height: y(base) - y(base + v), fill: CLS_COLOR[c] || '#999', class: 'cell ' + c }, svg);
      el('title', {}, r, new Date(b[0] / 1e6).toISOString() + ' ' + c + ': ' + fmtB(v));
      base += v;
    });
  });
  /* top contexts: a line each */
  var legend = document.getElementById('heap-legend');
  legend.textContent = '';
  D.classes.forEach(function (c) { var s = document.createElement('span'); s.className = 'key'; s.style.borderColor = CLS_COLOR[c] || '#999'; s.textContent = c; legend.appendChild(s); });
  D.top.forEach(function (tc, i) {
    var pts = tc.series.map(function (p) { return (x(p[0] / 1e6 + bw / 2)).toFixed(1) + ',' + y(p[1]).toFixed(1); }).join(' ');
    var hue = (i * 67 + 280) % 360, col = 'hsl(' + hue + ',60%,35%)';
    var pl = el('polyline', { points: pts, fill: 'none', stroke: col, 'stroke-width': 2, class: 'ctx' }, svg);
    tc.series.forEach(function (p) { el('circle', { cx: x(p[0] / 1e6 + bw / 2), cy: y(p[1]), r: 3, fill: col }, svg); });
    el('title', {}, pl, tc.name);
    var s = document.createElement('span'); s.className = 'key'; s.style.borderColor = col; s.textContent = '#' + (i + 1) + ' ' + tc.name; s.title = tc.name; legend.appendChild(s);
  });
}
chart();
document.body.setAttribute('data-ready', '1');
})();
