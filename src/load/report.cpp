// JSON, text and HTML renderings of a load run.
#include "load/report.h"

#include <fmt/format.h>

#include <algorithm>

namespace load {

namespace {

nlohmann::json distribution_json(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"min", d.min}, {"max", d.max},
          {"p50", d.p50},     {"p95", d.p95},   {"p99", d.p99}};
}

bool measured(const RequestRecord& r, const LoadRun& run) {
  return r.start >= run.window_start && r.start < run.window_end;
}

nlohmann::json per_item_json(const LoadOptions& options, const LoadRun& run) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& item : options.mix.items) {
    std::vector<double> ttft, e2e;
    int count = 0, failed = 0;
    int64_t tokens = 0;
    for (const auto& r : run.records) {
      if (r.item != item.name || !measured(r, run)) continue;
      ++count;
      if (!r.ok()) {
        ++failed;
        continue;
      }
      tokens += r.completion_tokens;
      e2e.push_back(r.end - r.start);
      if (r.ttft >= 0) ttft.push_back(r.ttft);
    }
    items.push_back({{"name", item.name},
                     {"weight", item.weight},
                     {"measured", count},
                     {"failed", failed},
                     {"completion_tokens", tokens},
                     {"ttft_s", distribution_json(distribution(ttft))},
                     {"e2e_s", distribution_json(distribution(e2e))}});
  }
  return items;
}

}  // namespace

namespace {

nlohmann::json server_json(const ServerMetrics& m) {
  nlohmann::json j = {{"available", m.available},
                      {"samples", m.samples},
                      {"preemptions", m.preemptions},
                      {"prefix_cache_hit_rate", m.prefix_hit_rate}};
  if (!m.available) j["unavailable"] = m.unavailable;
  j["kv_pool"] = nlohmann::json::object();
  for (const auto& [group, use] : m.kv) {
    j["kv_pool"][group] = {
        {"blocks", use.blocks}, {"used_peak", use.used_peak}, {"cached_end", use.cached_end}};
  }
  return j;
}

}  // namespace

nlohmann::json report_json(const LoadOptions& options, const LoadRun& run, const Summary& s) {
  nlohmann::json j;
  j["endpoint"] = options.endpoint.origin + options.endpoint.api_prefix + "/chat/completions";
  j["model"] = run.model;
  j["concurrency"] = options.concurrency;
  if (options.duration > 0) {
    j["duration_s"] = options.duration;
  } else {
    j["requests_asked"] = options.requests;
  }
  j["warmup_s"] = options.warmup;
  j["max_tokens"] = options.max_tokens;
  j["retry_policy"] = {{"retries", options.retries},
                       {"retried_kinds", {"connect", "timeout", "http_429", "http_5xx"}},
                       {"only_before_first_token", true}};
  j["timeout_s"] = options.timeout;
  j["window"] = {{"start_s", s.window_start},
                 {"end_s", s.window_end},
                 {"duration_s", s.window_end - s.window_start},
                 {"run_end_s", s.run_end}};
  j["requests"] = {{"warmup", s.warmup_requests},
                   {"measured", s.measured_requests},
                   {"succeeded", s.succeeded},
                   {"failed", s.failed}};
  j["ttft_s"] = distribution_json(s.ttft);
  // Split by whether the server reused a cached prefix (usage.prompt_tokens_details).
  j["ttft_cached_s"] = distribution_json(s.ttft_cached);
  j["ttft_uncached_s"] = distribution_json(s.ttft_uncached);
  j["server"] = server_json(run.server);
  j["itl_s"] = distribution_json(s.itl);
  j["e2e_s"] = distribution_json(s.e2e);
  bool all_usage = true;
  for (const auto& r : run.records) all_usage = all_usage && (!r.ok() || r.usage_reported);
  j["tokens"] = {{"completion", s.completion_tokens},
                 {"prompt", s.prompt_tokens},
                 {"prompt_cached", s.cached_tokens},
                 {"in_window", s.tokens_in_window},
                 {"counted_from", all_usage ? "usage" : "usage where reported, else chunks"}};
  j["throughput"] = {{"total_tokens_per_second", s.total_tokens_per_second},
                     {"per_stream_tokens_per_second",
                      distribution_json(s.stream_tokens_per_second)}};
  j["errors"] = s.errors;
  j["retries"] = s.retries;
  nlohmann::json examples = nlohmann::json::object();
  for (const auto& r : run.records) {
    if (!r.ok() && measured(r, run) && !examples.contains(r.error))
      examples[r.error] = r.error_detail;
  }
  j["error_examples"] = examples;
  j["per_item"] = per_item_json(options, run);
  nlohmann::json series = {{"bucket_s", s.bucket_seconds}};
  for (const auto& b : s.series) {
    series["start_s"].push_back(b.start);
    series["tokens_per_second"].push_back(b.tokens_per_second);
    series["completed"].push_back(b.completed);
    series["errors"].push_back(b.errors);
  }
  j["series"] = series;
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& r : run.records) {
    samples.push_back({{"item", r.item},
                       {"start_s", r.start},
                       {"end_s", r.end},
                       {"ttft_s", r.ttft},
                       {"tokens", r.completion_tokens},
                       {"error", r.error},
                       {"measured", measured(r, run)}});
  }
  j["samples"] = samples;
  return j;
}

namespace {

std::string ms(double seconds) { return fmt::format("{:.1f}", seconds * 1e3); }

// The server's prefix cache, KV pool and preemptions, as its /metrics showed them.
std::string server_text(const nlohmann::json& j) {
  std::string out;
  const auto& t = j["tokens"];
  const int64_t prompt = t["prompt"].get<int64_t>(), cached = t["prompt_cached"].get<int64_t>();
  if (prompt > 0) {
    out += fmt::format("prompt tokens: {}, {} from the server's prefix cache ({:.0f}%)", prompt,
                       cached, 100.0 * cached / prompt);
    if (j["ttft_cached_s"]["count"].get<size_t>() > 0 &&
        j["ttft_uncached_s"]["count"].get<size_t>() > 0) {
      out += fmt::format("; TTFT p50 {} ms with a cached prefix, {} ms without",
                         ms(j["ttft_cached_s"]["p50"]), ms(j["ttft_uncached_s"]["p50"]));
    }
    out += "\n";
  }
  const auto& server = j["server"];
  if (!server["available"].get<bool>()) {
    return out + fmt::format("server KV pool: not reported ({})\n",
                             server["unavailable"].get<std::string>());
  }
  out += "server KV pool:";
  for (const auto& [group, use] : server["kv_pool"].items()) {
    out += fmt::format(" {} {:.0f} blocks, at most {:.0f} in use, {:.0f} cached at the end;", group,
                       use["blocks"].get<double>(), use["used_peak"].get<double>(),
                       use["cached_end"].get<double>());
  }
  out += fmt::format(" {:.0f} preemptions", server["preemptions"].get<double>());
  if (server["prefix_cache_hit_rate"].get<double>() >= 0) {
    out += fmt::format("; prefix-cache hit rate {:.0f}% since the server started",
                       100 * server["prefix_cache_hit_rate"].get<double>());
  }
  return out + "\n";
}

std::string distribution_row(const char* name, const nlohmann::json& d) {
  if (d["count"].get<size_t>() == 0) return fmt::format("  {:<14} (no samples)\n", name);
  return fmt::format("  {:<14} {:>9} {:>9} {:>9} {:>9} {:>8}\n", name, ms(d["p50"]), ms(d["p95"]),
                     ms(d["p99"]), ms(d["mean"]), d["count"].get<size_t>());
}

std::string counts(const nlohmann::json& by_kind) {
  if (by_kind.empty()) return "none";
  std::string out;
  for (const auto& [kind, n] : by_kind.items())
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", kind, n.get<int>());
  return out;
}

}  // namespace

std::string report_text(const nlohmann::json& j) {
  std::string out;
  const auto& req = j["requests"];
  const auto& w = j["window"];
  out += fmt::format("headroom load: {} (model: {}), concurrency {}\n",
                     j["endpoint"].get<std::string>(),
                     j["model"].get<std::string>().empty() ? "server default"
                                                           : j["model"].get<std::string>(),
                     j["concurrency"].get<int>());
  out += fmt::format("window: {:.1f} s after {:.1f} s of warm-up; requests: {} measured ({} ok, {} "
                     "failed), {} in warm-up (excluded)\n",
                     w["duration_s"].get<double>(), j["warmup_s"].get<double>(),
                     req["measured"].get<int>(), req["succeeded"].get<int>(),
                     req["failed"].get<int>(), req["warmup"].get<int>());
  out += fmt::format("  {:<14} {:>9} {:>9} {:>9} {:>9} {:>8}\n", "latency (ms)", "p50", "p95",
                     "p99", "mean", "samples");
  out += distribution_row("time to first", j["ttft_s"]);
  out += distribution_row("inter-token", j["itl_s"]);
  out += distribution_row("end-to-end", j["e2e_s"]);
  const auto& tp = j["throughput"];
  const auto& stream = tp["per_stream_tokens_per_second"];
  out += fmt::format("throughput: {:.1f} tok/s total over the window ({:.0f} tokens); per stream "
                     "{:.1f} tok/s p50 (p95 {:.1f}, mean {:.1f})\n",
                     tp["total_tokens_per_second"].get<double>(),
                     j["tokens"]["in_window"].get<double>(), stream["p50"].get<double>(),
                     stream["p95"].get<double>(), stream["mean"].get<double>());
  out += server_text(j);
  out += fmt::format("errors: {}\n", counts(j["errors"]));
  for (const auto& [kind, detail] : j["error_examples"].items())
    out += fmt::format("  {}: {}\n", kind, detail.get<std::string>());
  out += fmt::format("retries: {} (policy: up to {} per request, on connect/timeout/429/5xx "
                     "before the first token)\n",
                     counts(j["retries"]), j["retry_policy"]["retries"].get<int>());
  out += "per mix item:\n";
  for (const auto& item : j["per_item"]) {
    out += fmt::format("  {:<20} {:>5} measured {:>4} failed  TTFT p50 {:>8} ms  E2E p50 {:>8} "
                       "ms\n",
                       item["name"].get<std::string>(), item["measured"].get<int>(),
                       item["failed"].get<int>(), ms(item["ttft_s"]["p50"]),
                       ms(item["e2e_s"]["p50"]));
  }
  return out;
}

namespace {

// The page: the report's JSON in a data block, drawn by the script below into inline SVG.
// When every chart is drawn the script sets <body data-charts-drawn="N"> and each chart's
// data-rect (its page box); an exception sets data-error. Tests read those from the DOM.
constexpr const char* kPage = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>headroom load report</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
svg.chart { display: block; border: 1px solid #ccc; margin: 8px 0; }
.note { color: #666; font-size: 12px; }
</style></head>
<body>
<h1>headroom load report</h1>
<p id="meta"></p>
<table id="latency"></table>
<p id="throughput"></p>
<p id="errors"></p>
<h2>Tokens per second over time</h2>
<p class="note">Every streamed token by arrival time, per bucket; grey: warm-up (excluded); dashed: the window's average.</p>
<svg class="chart" id="chart-throughput" width="900" height="260"></svg>
<h2>Latency over time</h2>
<p class="note">Each request at its start time: end-to-end (blue) and time to first token (orange); failed requests as red marks on the axis.</p>
<svg class="chart" id="chart-latency" width="900" height="260"></svg>
<h2>Latency distribution</h2>
<p class="note">Cumulative share of measured successful requests at or below each latency: end-to-end (blue), time to first token (orange).</p>
<svg class="chart" id="chart-cdf" width="900" height="260"></svg>
<script type="application/json" id="report-data">@DATA@</script>
<script>
"use strict";
window.addEventListener("error", e => { document.body.dataset.error = String(e.message); });
const R = JSON.parse(document.getElementById("report-data").textContent);
const NS = "http://www.w3.org/2000/svg";
const BLUE = "#1f77b4", ORANGE = "#ff7f0e", RED = "#d62728";
function el(parent, name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}
function maxOf(values, floor) { return values.reduce((m, v) => Math.max(m, v), floor); }
function ticks(lo, hi, n) {
  const span = hi - lo || 1, step0 = span / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= step0);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(+v.toFixed(10));
  return out;
}
// A plot frame: axes with ticks and labels; returns functions mapping data to pixels.
function frame(svg, xmax, ymax, xlabel, ylabel) {
  const W = +svg.getAttribute("width"), H = +svg.getAttribute("height");
  const L = 64, Rm = 16, T = 12, B = 40;
  xmax = xmax > 0 ? xmax : 1; ymax = ymax > 0 ? ymax * 1.05 : 1;
  const x = v => L + (W - L - Rm) * v / xmax, y = v => H - B - (H - T - B) * v / ymax;
  for (const v of ticks(0, xmax, 8)) {
    el(svg, "line", {x1: x(v), x2: x(v), y1: T, y2: H - B, stroke: "#eee"});
    el(svg, "text", {x: x(v), y: H - B + 16, "text-anchor": "middle", "font-size": 11}, String(v));
  }
  for (const v of ticks(0, ymax, 5)) {
    el(svg, "line", {x1: L, x2: W - Rm, y1: y(v), y2: y(v), stroke: "#eee"});
    el(svg, "text", {x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11}, String(v));
  }
  el(svg, "line", {x1: L, x2: W - Rm, y1: H - B, y2: H - B, stroke: "#444"});
  el(svg, "line", {x1: L, x2: L, y1: T, y2: H - B, stroke: "#444"});
  el(svg, "text", {x: (L + W - Rm) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12}, xlabel);
  el(svg, "text", {x: 14, y: (T + H - B) / 2, "text-anchor": "middle", "font-size": 12,
                   transform: `rotate(-90 14 ${(T + H - B) / 2})`}, ylabel);
  return {x, y, top: T, bottom: H - B};
}
function polyline(svg, points, color, extra) {
  if (points.length === 0) return;
  el(svg, "polyline", Object.assign({points: points.map(p => p.join(",")).join(" "), fill: "none",
                                     stroke: color, "stroke-width": 2}, extra || {}));
}
function drawThroughput(svg) {
  const s = R.series, w = R.window, end = Math.max(w.run_end_s, w.end_s);
  const f = frame(svg, end, maxOf(s.tokens_per_second, 1), "seconds since start", "tok/s");
  if (w.start_s > 0)
    el(svg, "rect", {x: f.x(0), y: f.top, width: f.x(w.start_s) - f.x(0), height: f.bottom - f.top, fill: "#000", "fill-opacity": 0.07});
  const pts = [];
  s.start_s.forEach((t, i) => {
    pts.push([f.x(t), f.y(s.tokens_per_second[i])]);
    pts.push([f.x(Math.min(t + s.bucket_s, end)), f.y(s.tokens_per_second[i])]);
  });
  polyline(svg, pts, BLUE);
  const avg = R.throughput.total_tokens_per_second;
  polyline(svg, [[f.x(w.start_s), f.y(avg)], [f.x(w.end_s), f.y(avg)]], "#555", {"stroke-dasharray": "6 4", "stroke-width": 1});
}
function drawLatency(svg) {
  const ok = R.samples.filter(r => r.error === "");
  const end = Math.max(R.window.run_end_s, R.window.end_s);
  const f = frame(svg, end, maxOf(ok.map(r => (r.end_s - r.start_s) * 1e3), 1), "request start (s)", "latency (ms)");
  for (const r of ok) {
    el(svg, "circle", {cx: f.x(r.start_s), cy: f.y((r.end_s - r.start_s) * 1e3), r: 3, fill: BLUE});
    if (r.ttft_s >= 0) el(svg, "circle", {cx: f.x(r.start_s), cy: f.y(r.ttft_s * 1e3), r: 3, fill: ORANGE});
  }
  for (const r of R.samples.filter(r => r.error !== ""))
    el(svg, "line", {x1: f.x(r.start_s), x2: f.x(r.start_s), y1: f.bottom, y2: f.bottom - 10, stroke: RED, "stroke-width": 2});
}
function cdf(values) {
  const v = values.slice().sort((a, b) => a - b);
  return v.map((x, i) => [x, (i + 1) / v.length]);
}
function drawCdf(svg) {
  const ok = R.samples.filter(r => r.error === "" && r.measured);
  const e2e = cdf(ok.map(r => (r.end_s - r.start_s) * 1e3));
  const ttft = cdf(ok.filter(r => r.ttft_s >= 0).map(r => r.ttft_s * 1e3));
  const f = frame(svg, maxOf(e2e.map(p => p[0]), 1), 1 / 1.05, "latency (ms)", "share of requests");
  for (const [curve, color] of [[e2e, BLUE], [ttft, ORANGE]]) {
    const pts = [[f.x(0), f.y(0)]];
    let prev = 0;
    for (const [x, q] of curve) { pts.push([f.x(x), f.y(prev)]); pts.push([f.x(x), f.y(q)]); prev = q; }
    polyline(svg, pts, color);
  }
}
function fmtMs(s) { return (s * 1e3).toFixed(1); }
function fillTables() {
  const m = R.model || "server default";
  document.getElementById("meta").textContent =
    `${R.endpoint} · model ${m} · concurrency ${R.concurrency} · window ${R.window.duration_s.toFixed(1)} s after ${R.warmup_s} s warm-up · ` +
    `${R.requests.measured} requests measured (${R.requests.succeeded} ok, ${R.requests.failed} failed), ${R.requests.warmup} in warm-up`;
  const t = document.getElementById("latency");
  t.innerHTML = "<tr><th>latency (ms)</th><th>p50</th><th>p95</th><th>p99</th><th>mean</th><th>samples</th></tr>";
  for (const [name, d] of [["time to first token", R.ttft_s], ["inter-token", R.itl_s], ["end-to-end", R.e2e_s]]) {
    const row = t.insertRow();
    for (const v of [name, fmtMs(d.p50), fmtMs(d.p95), fmtMs(d.p99), fmtMs(d.mean), d.count]) row.insertCell().textContent = v;
  }
  const s = R.throughput.per_stream_tokens_per_second;
  document.getElementById("throughput").textContent =
    `Throughput: ${R.throughput.total_tokens_per_second.toFixed(1)} tok/s total over the window; per stream ${s.p50.toFixed(1)} tok/s (p50), ${s.mean.toFixed(1)} (mean).`;
  const errs = Object.entries(R.errors).map(([k, n]) => `${k} ${n}`).join(", ") || "none";
  const retries = Object.entries(R.retries).map(([k, n]) => `${k} ${n}`).join(", ") || "none";
  document.getElementById("errors").textContent = `Errors: ${errs}. Retries: ${retries}.`;
}
fillTables();
const charts = [["chart-throughput", drawThroughput], ["chart-latency", drawLatency], ["chart-cdf", drawCdf]];
for (const [id, draw] of charts) {
  const svg = document.getElementById(id);
  draw(svg);
  const b = svg.getBoundingClientRect();
  svg.dataset.rect = [b.left + window.scrollX, b.top + window.scrollY, b.width, b.height].map(Math.round).join(",");
}
document.body.dataset.chartsDrawn = String(charts.length);
document.title = "headroom load report (ready)";
</script>
</body></html>
)HTML";

}  // namespace

std::string report_html(const nlohmann::json& report) {
  // "</" inside the data block would end the script element; JSON allows "<\/" instead.
  std::string data = report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3)
    data.replace(at, 2, "<\\/");
  std::string page = kPage;
  page.replace(page.find("@DATA@"), 6, data);
  return page;
}

}  // namespace load
