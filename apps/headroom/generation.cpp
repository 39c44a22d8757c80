// Shared generation plumbing for run and chat: plan, load, stream, stop on Ctrl-C, report.
#include "generation.h"

#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/template.h"
#include "kernels/cpu/dot.h"
#include "plan/devices.h"
#include "plan/report.h"
#include "util/units.h"

namespace cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) {
  if (g_interrupted.exchange(true)) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

}  // namespace

void install_interrupt_handler() {
  std::signal(SIGINT, on_sigint);
}
bool interrupted() {
  return g_interrupted.load();
}
void clear_interrupt() {
  g_interrupted.store(false);
}

sample::SamplingParams SamplingFlags::params() const {
  sample::SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = repeat_penalty;
  p.repeat_last_n = repeat_last_n;
  p.presence_penalty = presence_penalty;
  p.frequency_penalty = frequency_penalty;
  p.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  return p;
}

void add_sampling_flags(CLI::App* cmd, SamplingFlags& f) {
  cmd->add_option("--temp", f.temperature, "Sampling temperature; 0 = greedy")
      ->capture_default_str();
  cmd->add_option("--top-k", f.top_k, "Keep the k most likely tokens (0 = all)")
      ->capture_default_str();
  cmd->add_option("--top-p", f.top_p, "Keep the smallest set reaching this probability (1 = all)")
      ->capture_default_str();
  cmd->add_option("--min-p", f.min_p, "Drop tokens below min-p × the top probability (0 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", f.repeat_penalty, "Penalty for recent tokens (1 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", f.repeat_last_n,
                  "How many recent tokens the penalties see (-1 = all)")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", f.presence_penalty, "Subtracted once from recent tokens")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", f.frequency_penalty,
                  "Subtracted per occurrence in recent tokens")
      ->capture_default_str();
  cmd->add_option("-s,--seed", f.seed,
                  "Random seed (-1 = random, printed); the same seed gives the same text")
      ->capture_default_str();
}

util::Result<Session> open_session(const PlanFlags& flags, bool serving) {
  Session s;
  HR_ASSIGN_OR_RETURN(s.planned, plan_model(flags));
  if (!serving && s.planned.adapters.size() > 1) {
    return util::errorf(
        "--lora is given {} times: this command applies one adapter (serve holds several, and "
        "each request chooses)",
        s.planned.adapters.size());
  }
  std::fprintf(stderr, "%s\n",
               plan::format_plan(s.planned.plan, s.planned.spec, s.planned.source).c_str());
  if (!s.planned.plan.fits) return util::Error(s.planned.plan.refusal());
  HR_ASSIGN_OR_RETURN(
      s.engine,
      engine::Engine::create(s.planned.file, s.planned.spec, s.planned.plan,
                             {.projector = s.planned.projector, .drafter = s.planned.drafter}));
  for (const engine::AdapterFile& f : s.planned.adapters) {
    HR_ASSIGN_OR_RETURN(engine::AdapterInfo a, s.engine->adapters().load(f.name, f.path, f.scale));
    std::fprintf(stderr, "%s\n", describe_adapter(a).c_str());
    if (!serving) s.adapter = a.name;
  }
  HR_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(*s.planned.file));
  s.tokenizer = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
  return s;
}

util::Result<Generation> generate(Session& session, engine::Request r,
                                  const std::function<void(const std::string&)>& on_text) {
  Generation g;
  tokenizer::StreamDecoder decoder(*session.tokenizer);
  engine::Scheduler scheduler(*session.engine);
  r.end_ids = session.tokenizer->end_of_generation();
  r.adapter = session.adapter;
  const tokenizer::Tokenizer& tok = *session.tokenizer;
  r.on_token = [&](int32_t token, float) {
    g.tokens.push_back(token);
    if (!tok.is_end_of_generation(token)) on_text(decoder.push(token));
    return true;
  };
  r.on_done = [&](engine::FinishReason reason, const engine::RequestStats& stats,
                  const std::string& error) {
    g.reason = reason;
    g.stats = stats;
    g.error = error;
  };
  auto submitted = scheduler.submit(std::move(r));
  if (submitted.refusal != engine::Refusal::kNone) return util::Error(submitted.message);
  while (!scheduler.idle()) {
    if (interrupted() && !g.interrupted) {
      g.interrupted = true;
      scheduler.cancel(submitted.id);
    }
    HR_TRY(scheduler.step());
  }
  on_text(decoder.flush());
  return g;
}

util::Result<std::string> choose_chat_template(const std::string& override_value,
                                               const gguf::File& file, const model::Spec& spec,
                                               std::string_view fallback) {
  if (!override_value.empty()) {
    if (auto builtin = chat::builtin_template(override_value)) return std::string(*builtin);
    std::ifstream in(override_value, std::ios::binary);
    if (!in) {
      return util::errorf(
          "--chat-template '{}' is neither a built-in name (gemma4, chatml, llama3) nor a readable "
          "file",
          override_value);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  HR_ASSIGN_OR_RETURN(auto stored, file.get_string("tokenizer.chat_template"));
  if (stored) return std::string(*stored);
  if (spec.arch == model::Arch::kGemma4) return std::string(*chat::builtin_template("gemma4"));
  if (!fallback.empty()) {
    std::fprintf(stderr,
                 "%s has no chat template: using the built-in %.*s (choose with --chat-template)\n",
                 file.name().c_str(), static_cast<int>(fallback.size()), fallback.data());
    return std::string(*chat::builtin_template(fallback));
  }
  return util::errorf(
      "{} has no chat template — pass --chat-template chatml, llama3, gemma4 or a .jinja file",
      file.name());
}

std::string describe_adapter(const engine::AdapterInfo& a) {
  std::string line = fmt::format(
      "lora: {} ({}): {} matrices of rank ≤ {}, alpha {:g}, scale {:g}, {} in its slot", a.name,
      a.path, a.n_pairs, a.max_rank, a.alpha, a.scale, util::format_bytes(a.bytes));
  if (a.n_ignored > 0) {
    line += fmt::format(
        "; {} pairs adapt the k or v of KV-shared layers, which compute neither (they attend to "
        "their source layer's cache): left out",
        a.n_ignored);
  }
  return line;
}

std::string kernels_description(const plan::Plan& p) {
  if (p.uses_gpu()) return fmt::format("cuda kernels on {}", p.compute_device().name);
  const plan::Request& r = p.request;
  const int threads = r.n_threads > 0 ? r.n_threads : plan::physical_cores();
  if (r.reference_kernels)
    return fmt::format("ref kernels (scalar reference), {} thread{}", threads,
                       threads > 1 ? "s" : "");
  return fmt::format("cpu kernels ({}), {} thread{}",
                     kernels::cpu::isa_name(kernels::cpu::cpu_isa()), threads,
                     threads > 1 ? "s" : "");
}

namespace {

// What the bytes a run read per second say against the memory roofline — never a share above
// 100 %: past it either a token's bytes sit in the CPU's cache (no memory roofline applies) or
// the plan's bandwidth figure is stale, so it is measured again now.
std::string roofline_text(const plan::Plan& plan, double achieved, double bytes_per_token) {
  const std::string read =
      fmt::format("{}/tok → {:.2f} GB/s", util::format_bytes(bytes_per_token), achieved / 1e9);
  double bw = plan.compute_device().bandwidth;
  if (!plan.uses_gpu()) {
    const uint64_t llc = plan::last_level_cache_bytes();
    if (llc > 0 && bytes_per_token <= static_cast<double>(llc)) {
      return fmt::format(
          "{}; a token's bytes fit the CPU's {} cache, so no memory roofline "
          "bounds it",
          read, util::format_bytes(llc));
    }
    if (achieved > bw) {
      const int threads =
          plan.request.n_threads > 0 ? plan.request.n_threads : plan::physical_cores();
      const plan::BandwidthProbe now = plan::probe_cpu_bandwidth(threads, plan::kPlanProbeBytes);
      plan::remember_cpu_bandwidth(threads, now);
      if (achieved > now.bytes_per_second) {
        plan::report_cpu_bandwidth_achieved(threads, achieved);
        return fmt::format(
            "{}: at the memory roofline — faster than the plan's {:.1f} GB/s and the "
            "{:.1f} GB/s measured now allow, so the figure is measured again next run",
            read, bw / 1e9, now.bytes_per_second / 1e9);
      }
      return fmt::format(
          "{}, {:.0f}% of the {:.1f} GB/s roofline measured now (the plan's {:.1f} "
          "GB/s was stale)",
          read, 100 * achieved / now.bytes_per_second, now.bytes_per_second / 1e9, bw / 1e9);
    }
  }
  return fmt::format("{}, {:.0f}% of the {:.1f} GB/s roofline", read,
                     100 * std::min(achieved / bw, 1.0), bw / 1e9);
}

}  // namespace

std::string evidence_line(const Generation& g, const plan::Plan& plan) {
  const auto& s = g.stats;
  const double tps = s.generation_tokens_per_second();
  const double bytes = static_cast<double>(plan.prediction.bytes_per_token);
  std::string line = fmt::format("prompt {} tok", s.n_prompt);
  if (s.n_cached > 0) line += fmt::format(" ({} from the prefix cache)", s.n_cached);
  line += fmt::format(" ({:.1f} tok/s) | generated {} tok", s.prompt_tokens_per_second(),
                      s.n_generated);
  if (s.n_preempted > 0) line += fmt::format(" (preempted {}×)", s.n_preempted);
  if (tps > 0) {
    line += fmt::format(", {:.1f} tok/s steady, {:.2f} ms/tok", tps, 1e3 / tps);
  }
  if (s.n_drafted > 0) line += fmt::format(" | drafts: {} of {} kept", s.n_accepted, s.n_drafted);
  line += fmt::format(" | first token {:.1f} ms", s.ttft_seconds() * 1e3);
  // A kept draft is a token without a weight read of its own: the roofline does not bound it.
  if (tps > 0 && bytes > 0 && s.n_accepted == 0)
    line += " | " + roofline_text(plan, tps * bytes, bytes);
  line += " | " + kernels_description(plan);
  if (g.interrupted)
    line += " | interrupted";
  else
    line += fmt::format(" | finished: {}", engine::finish_reason_name(g.reason));
  return line;
}

}  // namespace cli
